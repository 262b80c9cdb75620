package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRendezvousFilesMustBeTheJobUsersAndOfThisRun: the rules that keep
// another user from making a job look ready (rendezvous.go). Each case
// changes a good directory (this process's files, 0700 and 0600, the
// coordinator written after the run's start) in one way.
func TestRendezvousFilesMustBeTheJobUsersAndOfThisRun(t *testing.T) {
	uid := uint32(os.Getuid())
	start := time.Now().Add(-time.Minute)
	tests := []struct {
		name string
		// change alters the rendezvous directory dir (WorkDir/.easyscale/10)
		// and may return another uid or start to check with.
		change func(t *testing.T, dir string) (uint32, time.Time)
		// want is a substring of the error; "": ready.
		want string
	}{
		{"the runtime's own files are ready", func(*testing.T, string) (uint32, time.Time) { return uid, start }, ""},
		{"files of another user are not", func(*testing.T, string) (uint32, time.Time) { return uid + 1, start },
			"not by the job's user (uid " + strconv.FormatUint(uint64(uid+1), 10) + ")"},
		{"a token others may read is not", func(t *testing.T, dir string) (uint32, time.Time) {
			chmod(t, filepath.Join(dir, "token"), 0o640)
			return uid, start
		}, "token has mode -rw-r-----"},
		{"a coordinator file others may write is not", func(t *testing.T, dir string) (uint32, time.Time) {
			chmod(t, filepath.Join(dir, "coordinator"), 0o622)
			return uid, start
		}, "coordinator has mode"},
		{"a directory others may write is not", func(t *testing.T, dir string) (uint32, time.Time) {
			chmod(t, dir, 0o777)
			return uid, start
		}, "/.easyscale/10 has mode"},
		{"nor a .easyscale others may write", func(t *testing.T, dir string) (uint32, time.Time) {
			chmod(t, filepath.Dir(dir), 0o733)
			return uid, start
		}, "/.easyscale has mode"},
		{"a symbolic link to a file is not", func(t *testing.T, dir string) (uint32, time.Time) {
			target := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(target, []byte("secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			replace(t, filepath.Join(dir, "token"), func(p string) error { return os.Symlink(target, p) })
			return uid, start
		}, "token is a symbolic link"},
		{"nor a symbolic link to another job's directory", func(t *testing.T, dir string) (uint32, time.Time) {
			other := filepath.Join(rendezvous(t, "11"), ".easyscale", "11")
			replace(t, dir, func(p string) error { return os.Symlink(other, p) })
			return uid, start
		}, "10 is a symbolic link"},
		{"a coordinator file of an earlier run is not", func(t *testing.T, dir string) (uint32, time.Time) {
			old := start.Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(dir, "coordinator"), old, old); err != nil {
				t.Fatal(err)
			}
			return uid, start
		}, "before this run of the job started"},
		{"nor one whose run's start is unknown", func(*testing.T, string) (uint32, time.Time) { return uid, time.Time{} },
			"start time is unknown"},
		{"a missing token is not", func(t *testing.T, dir string) (uint32, time.Time) {
			if err := os.Remove(filepath.Join(dir, "token")); err != nil {
				t.Fatal(err)
			}
			return uid, start
		}, "token file"},
		{"a FIFO named coordinator is not (never opened)", func(t *testing.T, dir string) (uint32, time.Time) {
			replace(t, filepath.Join(dir, "coordinator"), func(p string) error { return syscall.Mkfifo(p, 0o600) })
			return uid, start
		}, "coordinator is not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(rendezvous(t, "10"), ".easyscale", "10")
			u, s := tc.change(t, dir)
			_, _, err := rendezvousFiles(dir, u, s)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("not ready: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("ready, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			if tc.name == "a missing token is not" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v does not wrap fs.ErrNotExist", err)
			}
		})
	}
}

// TestAJobWhoseRendezvousAnotherUserWroteIsNeitherGrownNorShrunk: a
// tester made a root daemon shed, shrink and grow another user's job by
// creating its rendezvous files in a world-writable working directory.
// Here job 10's files are this process's, but its user is another uid.
func TestAJobWhoseRendezvousAnotherUserWroteIsNeitherGrownNorShrunk(t *testing.T) {
	for _, owned := range []bool{true, false} {
		td := admitCluster(t, "", elasticComment)
		if !owned {
			td.Daemon.snap.UserID = func(string) (uint32, error) { return uint32(os.Getuid()) + 1, nil }
		}
		r := td.cycle(t)
		updates, subs := td.fake.commands("scontrol update"), td.fake.commands("sbatch")
		if owned && len(updates) == 0 {
			t.Fatalf("the job's own files: no shrink (report %+v): the test shows nothing", r)
		}
		if !owned && (len(updates) != 0 || len(subs) != 0) {
			t.Fatalf("files not the job's user's: updates %q, submissions %q; want none", updates, subs)
		}
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// replace removes path (a file or a directory tree) and creates it anew
// with create.
func replace(t *testing.T, path string, create func(string) error) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := create(path); err != nil {
		t.Fatal(err)
	}
}
