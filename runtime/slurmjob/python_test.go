package slurmjob

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPublishedPythonIsReadBackAsAnAbsolutePath(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	abs, _ := filepath.Abs("venv/bin/python3")
	cases := []struct {
		name, python, want string
	}{
		{"an absolute path is kept", "/opt/venv/bin/python3", "/opt/venv/bin/python3"},
		{"a bare name is looked up on PATH, as exec does", "sh", sh},
		{"a relative path is made absolute", "venv/bin/python3", abs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := PublishPython(dir, c.python); err != nil {
				t.Fatal(err)
			}
			got, err := JobPython(dir)
			if err != nil || got != c.want {
				t.Fatalf("JobPython = %q, %v; want %q", got, err, c.want)
			}
			if fi, err := os.Stat(filepath.Join(dir, PythonFile)); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v, mode %v; want 0600", PythonFile, err, fi.Mode().Perm())
			}
		})
	}
}

func TestJobPythonOfADirectoryWithoutOneIsEmptyAndOfABadFileAnError(t *testing.T) {
	cases := []struct {
		name    string
		content *string
		wantErr string
	}{
		{"no file: not a torch job's rendezvous directory", nil, ""},
		{"a relative path is refused", ptr("python3\n"), "not the absolute path"},
		{"two lines are refused", ptr("/usr/bin/python3\n/tmp/x\n"), "not the absolute path"},
		{"an empty file is refused", ptr(""), "not the absolute path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.content != nil {
				if err := os.WriteFile(filepath.Join(dir, PythonFile), []byte(*c.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := JobPython(dir)
			if c.wantErr == "" {
				if err != nil || got != "" {
					t.Fatalf("JobPython = %q, %v; want \"\", nil", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("JobPython = %q, %v; want an error containing %q", got, err, c.wantErr)
			}
		})
	}
}

func TestPublishPythonOfAnInterpreterNotOnPATHNamesIt(t *testing.T) {
	dir := t.TempDir()
	err := PublishPython(dir, "no-such-interpreter-here")
	if err == nil || !strings.Contains(err.Error(), "no-such-interpreter-here") {
		t.Fatalf("PublishPython = %v; want an error naming the interpreter", err)
	}
	if _, err := os.Stat(filepath.Join(dir, PythonFile)); err == nil {
		t.Errorf("%s written for an interpreter that is not there", PythonFile)
	}
}

func ptr(s string) *string { return &s }
