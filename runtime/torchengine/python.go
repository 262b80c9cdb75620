package torchengine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// PythonEnv names the environment variable that overrides the interpreter.
const PythonEnv = "EASYSCALE_PYTHON"

// DefaultPython is Debian's interpreter, the one python3-torch installs into
// (a pyenv or venv python3 earlier on PATH does not see Debian's torch).
const DefaultPython = "/usr/bin/python3"

// ErrNoTorch is returned (wrapped) by Python when the interpreter cannot import torch.
var ErrNoTorch = errors.New("python cannot import torch")

// Python returns the interpreter for torch workers ($EASYSCALE_PYTHON, else
// DefaultPython) and torch's version as it reports it. It fails with
// ErrNoTorch, naming the interpreter and the package to install, when the
// interpreter finds no torch package within 60 seconds. It does not import
// torch (a second of CPU on a small machine, which every worker process
// spends once on its own): it reads torch/version.py, the file
// torch.__version__ comes from.
func Python(ctx context.Context) (path, torchVersion string, err error) {
	return pythonAt(ctx, os.Getenv(PythonEnv))
}

// torchProbe prints torch's version without importing torch: it finds the
// package and runs its version.py alone (a module of plain assignments on
// torch 1.13 and 2.x).
const torchProbe = `import importlib.util as u, os, sys
spec = u.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    sys.exit("ModuleNotFoundError: No module named 'torch'")
path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
v = u.spec_from_file_location("easyscale_torch_version", path)
m = u.module_from_spec(v)
v.loader.exec_module(m)
print(m.__version__)
`

// pythonAt is Python for the interpreter path ("": DefaultPython).
func pythonAt(ctx context.Context, path string) (string, string, error) {
	if path == "" {
		path = DefaultPython
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-c", torchProbe).CombinedOutput()
	if err != nil {
		return path, "", fmt.Errorf("%w: %s (%v): %s; install Debian's python3-torch or set %s",
			ErrNoTorch, path, err, lastLine(out), PythonEnv)
	}
	return path, strings.TrimSpace(string(out)), nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
