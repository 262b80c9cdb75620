package slurmlab

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// usersLock is this process's hold on $EASYSCALE_LAB_DIR/users.lock, the lock every
// test process using the lab holds (flock(2), per open file).
//
//   - The first user, which finds no other holder, takes it exclusively and runs
//     lab-up.sh that way, so nobody else uses a half-started lab; [usersLock.Share]
//     then lets the others in.
//   - A later user blocks on a shared lock until the first user shares (or the last
//     user has stopped the lab) and runs lab-up.sh in join mode, which never restarts
//     a lab that others use.
//   - The last user out is the one whose exclusive try succeeds (see release).
type usersLock struct {
	f     *os.File
	first bool // no other process used the lab when this one joined
}

// joinUsers opens path and takes the users lock as described at [usersLock]. It
// blocks while another process starts or stops the lab. Errors name the file.
func joinUsers(path string) (*usersLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lab's users lock: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return &usersLock{f: f, first: true}, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s shared: %w", path, err)
	}
	return &usersLock{f: f}, nil
}

// Share turns the first user's exclusive hold into a shared one, letting the
// processes waiting in joinUsers in. It does nothing for a later user.
func (u *usersLock) Share() error {
	if !u.first {
		return nil
	}
	if err := syscall.Flock(int(u.f.Fd()), syscall.LOCK_SH); err != nil {
		return fmt.Errorf("sharing %s: %w", u.f.Name(), err)
	}
	return nil
}

// Last reports whether no other process holds the users lock; then this process
// holds it exclusively until Close, so no one joins while it stops the lab. Call it
// only when leaving: when it returns false this process no longer holds the lock
// (flock(2) converts a lock by dropping it first).
func (u *usersLock) Last() bool {
	return syscall.Flock(int(u.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// Close drops the lock.
func (u *usersLock) Close() error { return u.f.Close() }
