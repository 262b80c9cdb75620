package statedb

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// dirLock is the writer's flock(2) on DIR/lock. The kernel drops it when the
// process dies, so a SIGKILLed writer never leaves a stale lock. flock locks
// belong to the open file description, so a second Open in the same process
// is refused too.
type dirLock struct{ f *os.File }

// lockDir takes the exclusive lock on DIR/lock without blocking and writes
// "pid=<pid> host=<host>" into it for the next contender's error message.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening writer lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder.Dir = dir
			return nil, holder
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := writeHolder(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("recording writer in %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
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

// release drops the lock by closing the file. The file itself stays: deleting
// it would race with a contender that has it open.
func (l *dirLock) release() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("releasing writer lock: %w", err)
	}
	return nil
}
