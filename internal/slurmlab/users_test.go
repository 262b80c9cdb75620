package slurmlab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitersOn reports whether /proc/locks shows a process blocked on the file (a
// "->" line with the file's inode).
func waitersOn(t *testing.T, path string) bool {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks: %v", err)
	}
	suffix := fmt.Sprintf(":%d ", st.Ino)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "->") && strings.Contains(line, suffix) {
			return true
		}
	}
	return false
}

func TestUsersLockLetsNobodyInWhileTheFirstUserStartsTheLab(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.lock")
	first, err := joinUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if !first.first {
		t.Fatal("the only user is not first")
	}
	type joined struct {
		u   *usersLock
		err error
	}
	later := make(chan joined, 1)
	go func() {
		u, err := joinUsers(path) // a second test process starting at the same time
		later <- joined{u, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !waitersOn(t, path) { // the event: the second user blocks on the lock
		if time.Now().After(deadline) {
			t.Fatal("the second user never blocked on the users lock")
		}
		select {
		case j := <-later:
			t.Fatalf("the second user joined (first=%v, err=%v) while the first still starts the lab", j.u != nil && j.u.first, j.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := first.Share(); err != nil {
		t.Fatal(err)
	}
	var j joined
	select {
	case j = <-later:
	case <-time.After(10 * time.Second):
		t.Fatal("the second user did not join after the first shared the lock")
	}
	if j.err != nil {
		t.Fatal(j.err)
	}
	defer j.u.Close()
	if j.u.first {
		t.Error("the second user thinks it is first: its lab-up would be allowed to restart the lab")
	}
	probe, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if syscall.Flock(int(probe.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		t.Error("the users lock is free while two users hold it")
	}
	j.u.Close()
	if !first.Last() {
		t.Error("the remaining user is not last after the other left")
	}
}
