package torchengine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExtractWritesThePackageOnceAndRefusesAModifiedCopy(t *testing.T) {
	root := t.TempDir()
	dir, err := Extract(root)
	if err != nil {
		t.Fatal(err)
	}
	init := filepath.Join(dir, "easyscale", "__init__.py")
	if _, err := os.Stat(init); err != nil {
		t.Fatalf("extracted package lacks __init__.py: %v", err)
	}
	again, err := Extract(root)
	if err != nil || again != dir {
		t.Fatalf("second Extract = %q, %v; want %q, nil", again, err, dir)
	}
	if err := os.WriteFile(init, []byte("# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Extract(root); err == nil || !strings.Contains(err.Error(), "__init__.py differs") {
		t.Fatalf("Extract over an edited copy: %v; want an error naming the file", err)
	}
}

func TestPackageDigestCoversEveryModule(t *testing.T) {
	files := packageFiles()
	for _, want := range []string{"__init__.py", "safetensors.py", "streams.py", "sampler.py", "context.py", "reduce.py", "numerics.py"} {
		found := false
		for _, f := range files {
			found = found || strings.HasSuffix(f, "/"+want)
		}
		if !found {
			t.Errorf("embedded package lacks %s (have %v)", want, files)
		}
	}
	if len(PackageDigest()) != 64 {
		t.Errorf("PackageDigest() = %q, want 64 hex digits", PackageDigest())
	}
}
