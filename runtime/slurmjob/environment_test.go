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

func TestRendezvousDirectoriesOthersCouldChangeAreRefused(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T) string // returns the rendezvous directory
		wantErr string
	}{
		{"a private directory is accepted", func(t *testing.T) string {
			return mkdir(t, filepath.Join(t.TempDir(), "rdv"), 0o700)
		}, ""},
		{"a directory others may write", func(t *testing.T) string {
			return mkdir(t, filepath.Join(t.TempDir(), "rdv"), 0o777)
		}, "chmod 700"},
		{"a symbolic link to a directory", func(t *testing.T) string {
			base := t.TempDir()
			mkdir(t, filepath.Join(base, "real"), 0o700)
			if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "rdv")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "rdv")
		}, "not a directory"},
		{"in a parent others may write that is not sticky", func(t *testing.T) string {
			parent := mkdir(t, filepath.Join(t.TempDir(), "shared"), 0o777)
			return mkdir(t, filepath.Join(parent, "rdv"), 0o700)
		}, "not sticky"},
		{"in a sticky parent others may write (as /tmp)", func(t *testing.T) string {
			parent := mkdir(t, filepath.Join(t.TempDir(), "shared"), 0o777|os.ModeSticky)
			return mkdir(t, filepath.Join(parent, "rdv"), 0o700)
		}, ""},
		{"in a parent that is a symbolic link", func(t *testing.T) string {
			base := t.TempDir()
			real := mkdir(t, filepath.Join(base, "real"), 0o700)
			mkdir(t, filepath.Join(real, "rdv"), 0o700)
			if err := os.Symlink(real, filepath.Join(base, ".easyscale")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, ".easyscale", "rdv")
		}, "parent"},
		{"a directory another user made", func(t *testing.T) string {
			if os.Getuid() != 0 {
				t.Skip("giving a directory to another user needs root")
			}
			dir := mkdir(t, filepath.Join(t.TempDir(), "rdv"), 0o700)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "uid 65534"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.setup(t)
			err := CheckPrivateDir(dir)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckPrivateDir(%s) = %v, want nil", dir, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("CheckPrivateDir(%s) = %v, want an error containing %q", dir, err, c.wantErr)
			}
			if perr := PublishEnvironment(dir, []string{"SECRET=1"}); perr == nil {
				t.Errorf("PublishEnvironment into %s: no error", dir)
			}
		})
	}
}

func TestAnEnvironmentFileThatIsASymbolicLinkIsRefused(t *testing.T) {
	dir := mkdir(t, filepath.Join(t.TempDir(), "rdv"), 0o700)
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("LD_PRELOAD=/x.so\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, EnvironmentFile)); err != nil {
		t.Fatal(err)
	}
	if env, err := JobEnvironment(dir); err == nil {
		t.Fatalf("JobEnvironment through a symbolic link = %q, want an error", env)
	}
}

func TestPublishingNeverWritesThroughALinkPlantedInTheDirectory(t *testing.T) {
	dir := mkdir(t, filepath.Join(t.TempDir(), "rdv"), 0o700)
	victim := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(victim, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{EnvironmentFile + ".tmp", "." + EnvironmentFile + ".tmp"} {
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := PublishEnvironment(dir, []string{"SECRET_TOKEN=hunter2"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "my notes\n" {
		t.Fatalf("the linked file now holds %q", b)
	}
	if env, err := JobEnvironment(dir); err != nil || !slices.Equal(env, []string{"SECRET_TOKEN=hunter2"}) {
		t.Fatalf("JobEnvironment = %q, %v", env, err)
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return dir
}
