package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSummaryFileNeverFollowsAPlantedLink: --summary PATH is written through
// an exclusive temporary file; a link planted where the old code wrote
// (PATH.tmp) to another file is neither followed nor removed, and PATH
// holds the summary afterwards.
func TestSummaryFileNeverFollowsAPlantedLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "summary.json")
	if err := os.Symlink(victim, path+".tmp"); err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{`{"step":1}` + "\n", `{"step":2}` + "\n"} {
		if err := writeFileAtomic(path, []byte(body)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != body {
			t.Fatalf("write %d: %s holds %q (%v), want %q", i, path, got, err, body)
		}
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != "keep me\n" {
		t.Fatalf("the file the planted link names now holds %q (%v)", got, err)
	}
	if fi, err := os.Lstat(path + ".tmp"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the planted link was touched: %v %v", fi, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("%s mode %v (%v), want 0644", path, fi.Mode(), err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 3 {
		t.Fatalf("files left in the directory: %q, want the victim, the link and the summary", left)
	}
}
