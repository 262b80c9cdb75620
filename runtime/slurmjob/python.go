package slurmjob

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
)

// PythonFile is the rendezvous file holding the absolute path of a torch
// job's Python interpreter as its coordinator resolved it
// ($EASYSCALE_PYTHON of the job, or the default). The tasks of the job's
// step inherit the job's environment, but an extra job that
// easyscale-backfilld submits runs with the daemon's: its `easyscale
// worker` reads the interpreter here.
const PythonFile = "python"

// PublishPython writes the absolute path of python into dir/python
// atomically; a bare name is looked up on PATH first, as exec does.
func PublishPython(dir, python string) error {
	path := python
	if !strings.Contains(python, "/") {
		p, err := exec.LookPath(python)
		if err != nil {
			return fmt.Errorf("publishing the job's Python interpreter %q: %w", python, err)
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("publishing the job's Python interpreter %q: %w", python, err)
	}
	if err := writeAtomic(filepath.Join(dir, PythonFile), abs+"\n"); err != nil {
		return fmt.Errorf("publishing the job's Python interpreter: %w", err)
	}
	return nil
}

// JobPython returns the interpreter dir/python names: "" when dir has no
// such file (not a torch job's rendezvous directory, or one of a version
// that did not publish it); an error when the file cannot be read, another
// user owns it or may write it (readOwnFile), or it does not hold one
// absolute path.
func JobPython(dir string) (string, error) {
	path := filepath.Join(dir, PythonFile)
	b, err := readOwnFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the job's Python interpreter: %w", err)
	}
	python := strings.TrimSuffix(string(b), "\n")
	if !filepath.IsAbs(python) || strings.ContainsAny(python, "\n\x00") {
		return "", fmt.Errorf("%s holds %q, not the absolute path of an interpreter", path, python)
	}
	return python, nil
}
