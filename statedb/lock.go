package statedb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
		return nil, fmt.Errorf("opening writer lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		l.release()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder.Dir = dir
			return nil, holder
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	l.file = f
	if err := writeHolder(f); err != nil {
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
	if flockHolder(dir) == 0 && flockHolder(filepath.Join(dir, LockFile)) == 0 {
		return nil
	}
	return holderOf(dir)
}

// holderOf names the writer holding dir's lock. The kernel's /proc/locks is
// believed over DIR/lock, which anyone who can write the directory may
// delete or rewrite.
func holderOf(dir string) *LockedError {
	e := holder(dir, filepath.Join(dir, LockFile))
	e.Dir = dir
	return e
}

// holder names the process holding the flock on locked: the PID /proc/locks
// lists for it (on this host), else the "pid=<pid> host=<host>" of
// lockFile.
func holder(locked, lockFile string) *LockedError {
	e := &LockedError{}
	if f, err := os.Open(lockFile); err == nil {
		e = readHolder(f)
		f.Close()
	}
	if pid := flockHolder(locked); pid > 0 && pid != e.PID {
		host, _ := os.Hostname()
		e.PID, e.Host = pid, host
	}
	return e
}

// flockHolder returns the PID that /proc/locks lists as holding a flock on
// path, or 0 when none is listed (no procfs, or the holder is outside this
// PID namespace).
func flockHolder(path string) int {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseProcLocks(f, unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
}

// parseProcLocks finds the holder of a FLOCK on the file (major:minor:ino)
// in the /proc/locks format of proc(5), e.g.
//
//	1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
//
// where major and minor are hex. Waiters ("1: -> FLOCK ...") and malformed
// lines are skipped; it returns 0 when no line matches.
func parseProcLocks(r io.Reader, major, minor uint32, ino uint64) int {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		mnr, err2 := strconv.ParseUint(id[1], 16, 32)
		in, err3 := strconv.ParseUint(id[2], 10, 64)
		pid, err4 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		if uint32(maj) == major && uint32(mnr) == minor && in == ino && pid > 0 {
			return pid
		}
	}
	return 0
}

func writeHolder(f *os.File) error {
	host, _ := os.Hostname()
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(fmt.Sprintf("pid=%d host=%s\n", os.Getpid(), host)), 0)
	return err
}

// readHolder parses what writeHolder wrote; unreadable content gives a
// LockedError without PID and host.
func readHolder(f *os.File) *LockedError {
	b, _ := io.ReadAll(io.LimitReader(f, 512))
	e := &LockedError{}
	for _, field := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "pid":
			fmt.Sscanf(v, "%d", &e.PID)
		case "host":
			e.Host = v
		}
	}
	return e
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
