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
// ErrNoTorch, naming the interpreter and the package to install, when torch
// cannot be imported within 60 seconds.
func Python(ctx context.Context) (path, torchVersion string, err error) {
	return pythonAt(ctx, os.Getenv(PythonEnv))
}

// pythonAt is Python for the interpreter path ("": DefaultPython).
func pythonAt(ctx context.Context, path string) (string, string, error) {
	if path == "" {
		path = DefaultPython
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-c", "import torch; print(torch.__version__)").CombinedOutput()
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
