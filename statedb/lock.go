package statedb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"

	"golang.org/x/sys/unix"
)

// dirLock is the writer's exclusive flock(2) on the state directory itself,
// plus one on DIR/lock. The directory cannot be deleted from under a running
// writer while it holds state.db, so deleting or replacing DIR/lock lets no
// second writer in; DIR/lock carries the holder's "pid=<pid> host=<host>"
// for error messages and is also locked so that a binary that only knows
// DIR/lock is kept out too. The kernel drops both locks when the process
// dies, so a SIGKILLed writer never leaves a stale lock. flock locks belong
// to the open file description, so a second Open in the same process is
// refused too.
type dirLock struct {
	dir  *os.File // nil where the filesystem cannot flock a directory
	file *os.File
}

// lockDir takes the exclusive locks on dir and DIR/lock without blocking
// and writes "pid=<pid> host=<host>" into DIR/lock. A held lock gives a
// *LockedError naming the holder: its PID from /proc/locks when the kernel
// lists it, else what DIR/lock says.
func lockDir(dir string) (*dirLock, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening state directory %s to lock it: %w", dir, err)
	}
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, holderOf(dir)
		}
		if !cannotLockDirectories(err) {
			return nil, fmt.Errorf("locking state directory %s: %w", dir, err)
		}
		// An NFS client emulates flock with a write lock that a
		// directory opened read-only cannot take; only Options.
		// AllowNetworkFS gets here, and DIR/lock alone guards it.
		d = nil
	}
	l := &dirLock{dir: d}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		l.release()
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
			return nil, fmt.Errorf("opening writer lock: %w (%s)", err, unwritableFix)
		}
		return nil, fmt.Errorf("opening writer lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid, host := sqlitefile.ReadHolder(f)
		f.Close()
		l.release()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Dir: dir, PID: pid, Host: host}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	l.file = f
	if err := sqlitefile.WriteHolder(f); err != nil {
		l.release()
		return nil, fmt.Errorf("recording writer in %s: %w", path, err)
	}
	return l, nil
}

// cannotLockDirectories reports the errors flock(2) gives on a directory of
// a filesystem that emulates flock with POSIX locks (NFS: EBADF without
// write access) or has no locks at all.
func cannotLockDirectories(err error) bool {
	return errors.Is(err, unix.EBADF) || errors.Is(err, unix.ENOLCK) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)
}

// Writer returns the process that holds dir's writer lock (a running
// writer: `easyscale run`), with its PID and host as in a *LockedError, or
// nil when /proc/locks lists no holder of the lock on dir or DIR/lock on
// this host. It takes no lock (so it cannot make a writer starting at the
// same moment fail) and changes nothing; where /proc/locks is missing or
// the writer runs in another PID namespace or on another host it returns
// nil.
func Writer(dir string) *LockedError {
	if sqlitefile.FlockHolder(dir) == 0 && sqlitefile.FlockHolder(filepath.Join(dir, LockFile)) == 0 {
		return nil
	}
	return holderOf(dir)
}

// holderOf names the writer holding dir's lock. The kernel's /proc/locks is
// believed over DIR/lock, which anyone who can write the directory may
// delete or rewrite.
func holderOf(dir string) *LockedError {
	pid, host := sqlitefile.Holder(dir, filepath.Join(dir, LockFile))
	return &LockedError{Dir: dir, PID: pid, Host: host}
}

// release drops the locks by closing the files. DIR/lock itself stays:
// deleting it would race with a contender that has it open.
func (l *dirLock) release() error {
	var err error
	if l.file != nil {
		err = l.file.Close()
	}
	if l.dir != nil {
		if derr := l.dir.Close(); err == nil {
			err = derr
		}
	}
	if err != nil {
		return fmt.Errorf("releasing writer lock: %w", err)
	}
	return nil
}
