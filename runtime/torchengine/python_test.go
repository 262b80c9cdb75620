package torchengine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// requireTorch returns the interpreter with torch, or skips the test; under
// CI (make test installs python3-torch) a missing torch fails it.
func requireTorch(t *testing.T) string {
	t.Helper()
	py, version, err := Python(context.Background())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
	t.Logf("torch %s at %s", version, py)
	return py
}

// TestPythonPackage runs the easyscale package's unittest suite with the
// interpreter the engine uses, from a fresh extraction of the embedded copy
// (so what is tested is what ships).
func TestPythonPackage(t *testing.T) {
	py := requireTorch(t)
	dir, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests, err := filepath.Abs("python/tests")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", tests, "-t", filepath.Dir(tests), "-v")
	cmd.Dir = filepath.Dir(tests)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir+string(os.PathListSeparator)+filepath.Dir(tests),
		"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python unittest: %v", err)
	}
}
