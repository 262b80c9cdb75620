package statedb

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenCreatesSchemaAndReopenKeepsData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "state")
	db, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode = %v, %v; want 0700", st.Mode().Perm(), err)
	}
	var version int
	var journal string
	db.sql.QueryRow("PRAGMA user_version").Scan(&version)
	db.sql.QueryRow("PRAGMA journal_mode").Scan(&journal)
	if version != len(migrations) || journal != "wal" {
		t.Fatalf("user_version=%d journal_mode=%q, want %d and wal", version, journal, len(migrations))
	}
	for _, table := range []string{"job", "ledger", "allocations", "checkpoints", "est_contexts"} {
		var n int
		if err := db.sql.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE type='table' AND name=?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: count=%d err=%v", table, n, err)
		}
	}
	if err := db.AppendLedger(entry(0, "a")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db, err = Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	last, ok, err := db.LastStep()
	if err != nil || !ok || last != 0 {
		t.Fatalf("after reopen LastStep = %d, %v, %v; want 0, true, nil", last, ok, err)
	}
	if err := db.IntegrityCheck(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesSchemaFromNewerBinary(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.sql.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open of a v99 database: err = %v, want ErrSchemaTooNew", err)
	}
	if _, err := OpenReadOnly(dir); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("OpenReadOnly of a v99 database: err = %v, want ErrSchemaTooNew", err)
	}
}

func TestSecondWriterIsRefusedWithTheHolderNamed(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Open(dir)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		second.Close()
		t.Fatalf("second Open: err = %v, want *LockedError", err)
	}
	host, _ := os.Hostname()
	if le.PID != os.Getpid() || le.Host != host {
		t.Errorf("LockedError names pid %d host %q, want %d %q", le.PID, le.Host, os.Getpid(), host)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the directory", err)
	}
	// The first writer is unaffected by the refused second one.
	if err := first.AppendLedger(entry(1, "x")); err != nil {
		t.Fatalf("first writer after refusal: %v", err)
	}
	first.Close()
	third, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after the first writer closed: %v", err)
	}
	third.Close()
}

func TestReadOnly(t *testing.T) {
	t.Run("a directory without state is reported as such", func(t *testing.T) {
		_, err := OpenReadOnly(t.TempDir())
		if !errors.Is(err, ErrNoState) {
			t.Fatalf("err = %v, want ErrNoState", err)
		}
	})
	t.Run("a reader sees a running writer's commits and cannot write", func(t *testing.T) {
		dir := t.TempDir()
		w, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.AppendLedger(entry(3, "a")); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatalf("OpenReadOnly while writer runs: %v", err)
		}
		defer r.Close()
		if got, err := r.Ledger(0, 10); err != nil || len(got) != 1 || got[0].Step != 3 {
			t.Fatalf("reader ledger = %v, %v", got, err)
		}
		if err := w.AppendLedger(entry(4, "b")); err != nil {
			t.Fatal(err)
		}
		if last, _, _ := r.LastStep(); last != 4 {
			t.Fatalf("reader LastStep = %d after writer appended 4", last)
		}
		if err := r.AppendLedger(entry(5, "c")); err == nil {
			t.Fatal("AppendLedger on a read-only DB succeeded")
		}
		if err := r.SaveCheckpoint(5, nil, nil, nil); err == nil {
			t.Fatal("SaveCheckpoint on a read-only DB succeeded")
		}
	})
	t.Run("a reader opens a closed writer's directory", func(t *testing.T) {
		dir := t.TempDir()
		w, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		w.AppendLedger(entry(7, "a"))
		w.Close()
		r, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatalf("OpenReadOnly: %v", err)
		}
		defer r.Close()
		if last, ok, err := r.LastStep(); err != nil || !ok || last != 7 {
			t.Fatalf("LastStep = %d %v %v", last, ok, err)
		}
	})
}

func TestOpenWithRejectsNegativeKeep(t *testing.T) {
	if _, err := OpenWith(t.TempDir(), Options{KeepCheckpoints: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

// A directory whose state.db is gone but whose checkpoints are still there
// is refused rather than adopted (which would delete the checkpoints).
func TestOpenRefusesCheckpointsWithoutADatabase(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, CheckpointDir), 0o700); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, CheckpointDir, "step-5.safetensors")
	if err := os.WriteFile(ck, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrOrphanCheckpoints) {
		t.Fatalf("Open = %v, want ErrOrphanCheckpoints", err)
	}
	if _, err := os.Stat(ck); err != nil {
		t.Fatalf("the checkpoint was removed: %v", err)
	}
}

// A reader without write access to the directory (a read-only mount, or
// another user) can still read the state. As root the directory is made
// read-only with a read-only bind mount; otherwise with chmod.
func TestOpenReadOnlyOnAReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.InitJob(Job{ID: "sha256:" + strings.Repeat("a", 64), Name: "j", Spec: "{}", LogicalWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	view := dir
	if os.Getuid() == 0 {
		view = t.TempDir()
		if out, err := exec.Command("mount", "--bind", dir, view).CombinedOutput(); err != nil {
			t.Skipf("cannot bind-mount here: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", view).Run() })
		if out, err := exec.Command("mount", "-o", "remount,bind,ro", view).CombinedOutput(); err != nil {
			t.Skipf("cannot remount read-only here: %v %s", err, out)
		}
	} else {
		os.Chmod(dir, 0o500)
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	}
	ro, err := OpenReadOnly(view)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if j, err := ro.Job(); err != nil || j.Name != "j" {
		t.Fatalf("Job() = %+v, %v", j, err)
	}
	// A writer is refused with what to do (a tester's: a bare
	// "permission denied").
	if w, err := Open(view); err == nil || !strings.Contains(err.Error(), "copy the directory to one you may write") {
		if w != nil {
			w.Close()
		}
		t.Fatalf("Open of a directory this user cannot write: %v, want the fix named", err)
	}
}

// TestDeletingTheLockFileDoesNotLetASecondWriterIn: the writer lock is held
// on something a user cannot delete from under a running writer. With the
// lock file deleted, emptied or overwritten, a second Open is refused and
// names the first writer (this process).
func TestDeletingTheLockFileDoesNotLetASecondWriterIn(t *testing.T) {
	host, _ := os.Hostname()
	cases := []struct {
		name   string
		tamper func(path string) error
	}{
		{"the lock file deleted", os.Remove},
		{"the lock file deleted and recreated empty", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.WriteFile(p, nil, 0o600)
		}},
		{"the lock file overwritten with another holder", func(p string) error {
			return os.WriteFile(p, []byte("pid=1 host=elsewhere\n"), 0o600)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			if err := c.tamper(filepath.Join(dir, LockFile)); err != nil {
				t.Fatal(err)
			}
			second, err := Open(dir)
			var le *LockedError
			if !errors.As(err, &le) {
				if second != nil {
					second.Close()
				}
				t.Fatalf("second Open after %s: err = %v, want *LockedError", c.name, err)
			}
			if le.PID != os.Getpid() || le.Host != host {
				t.Errorf("LockedError names pid %d host %q, want the first writer: %d %q", le.PID, le.Host, os.Getpid(), host)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
				t.Errorf("error %q does not name the holder's pid", err)
			}
			if err := first.AppendLedger(entry(1, "x")); err != nil {
				t.Fatalf("first writer after the refusal: %v", err)
			}
			first.Close()
			third, err := Open(dir)
			if err != nil {
				t.Fatalf("Open after the first writer closed: %v", err)
			}
			third.Close()
		})
	}
}
