package slurmjob

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPublishedEnvironmentReadsBackAndIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rdv")
	in := []string{"HOME=/home/alice", "PYTHONPATH=/home/alice/lib", "EMPTY=", "WEIRD=a=b c\nd", "noequals", "=nokey"}
	if err := PublishEnvironment(dir, in); err != nil {
		t.Fatal(err)
	}
	got, err := JobEnvironment(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"HOME=/home/alice", "PYTHONPATH=/home/alice/lib", "EMPTY=", "WEIRD=a=b c\nd"}
	if !slices.Equal(got, want) {
		t.Errorf("read back %q, want %q", got, want)
	}
	fi, err := os.Stat(filepath.Join(dir, EnvironmentFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("environment file mode %v, want 0600 (it may hold the user's secrets)", fi.Mode().Perm())
	}
}

func TestJobEnvironmentOfADirectoryWithoutTheFileIsNone(t *testing.T) {
	got, err := JobEnvironment(t.TempDir())
	if err != nil || got != nil {
		t.Fatalf("JobEnvironment = %q, %v; want nil, nil", got, err)
	}
}

func TestJobEnvironmentThatCannotBeReadIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, EnvironmentFile), 0o700); err != nil { // a directory, not a file
		t.Fatal(err)
	}
	if _, err := JobEnvironment(dir); err == nil {
		t.Fatal("JobEnvironment of a directory named environment: no error")
	}
}

func TestMergeEnvironment(t *testing.T) {
	own := []string{"PATH=/usr/bin:/bin", "SLURM_JOB_ID=77", "SLURM_GPUS_PER_TASK=1", "CUDA_VISIBLE_DEVICES=3",
		"HOSTNAME=n2", "TMPDIR=/tmp/77", "EASYSCALE_JOIN=10.0.0.1:5000", "ONLY_OWN=1"}
	job := []string{"PATH=/home/alice/venv/bin:/usr/bin", "HOME=/home/alice", "SLURM_JOB_ID=42", "SLURM_NODELIST=n1",
		"CUDA_VISIBLE_DEVICES=0", "HOSTNAME=n1", "TMPDIR=/tmp/42", "ELASTIC_MIN=1", "PMI_RANK=0",
		"EASYSCALE_JOIN=bogus", EnvironmentAppliedVar + "=1", "EASYSCALE_CPUS_BOUND=0-3", "PYTHONPATH=/home/alice/lib", "DATA=/scratch/alice"}
	got := MergeEnvironment(own, job)
	want := []string{
		"CUDA_VISIBLE_DEVICES=3",
		"DATA=/scratch/alice",
		"EASYSCALE_JOIN=10.0.0.1:5000",
		"HOME=/home/alice",
		"HOSTNAME=n2",
		"ONLY_OWN=1",
		"PATH=/home/alice/venv/bin:/usr/bin",
		"PYTHONPATH=/home/alice/lib",
		"SLURM_GPUS_PER_TASK=1",
		"SLURM_JOB_ID=77",
		"TMPDIR=/tmp/77",
	}
	if !slices.Equal(got, want) {
		t.Errorf("MergeEnvironment =\n%q\nwant\n%q", got, want)
	}
}

// A rendezvous directory may sit in a shared working directory: a file
// there that another user wrote, or may rewrite, would choose what a
// worker of this user runs (LD_PRELOAD, an interpreter), and is refused.
func TestRendezvousFilesAnotherUserCouldHaveWrittenAreRefused(t *testing.T) {
	type reader func(dir string) error
	readers := map[string]reader{
		EnvironmentFile: func(dir string) error { _, err := JobEnvironment(dir); return err },
		PythonFile:      func(dir string) error { _, err := JobPython(dir); return err },
	}
	for name, read := range readers {
		t.Run(name+" writable by others", func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte("/usr/bin/python3\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
			if err := read(dir); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
				t.Fatalf("reading a world-writable %s: %v, want an error naming chmod go-w", name, err)
			}
		})
		t.Run(name+" of another user", func(t *testing.T) {
			if os.Getuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte("/usr/bin/python3\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			if err := read(dir); err == nil || !strings.Contains(err.Error(), "uid 65534") {
				t.Fatalf("reading %s owned by uid 65534: %v, want an error naming its owner", name, err)
			}
		})
	}
}
