package torchengine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentOf reads pid's parent from /proc/PID/stat (the field after the
// parenthesised command, which may itself hold spaces).
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %q: %v", pid, b, err)
	}
	return ppid
}

// waitUntil polls cond every 20 ms until it holds or deadline passes.
func waitUntil(t *testing.T, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkersAreForksOfOneServerAndItsLossEndsThem starts three workers:
// each is a child of one `python3 -m easyscale.forkserver`, not of this
// process. SIGKILLing the server ends every worker (PR_SET_PDEATHSIG), each
// Process reports its exit, and the next start brings a new server whose
// workers train.
func TestWorkersAreForksOfOneServerAndItsLossEndsThem(t *testing.T) {
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	server := 0
	for _, p := range l.Processes() {
		ppid := parentOf(t, p.Pid())
		if server == 0 {
			server = ppid
		}
		if ppid != server || ppid == os.Getpid() {
			t.Fatalf("worker %d's parent is %d; want one fork server for all (first: %d), not this process (%d)",
				p.Pid(), ppid, server, os.Getpid())
		}
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", server))
	if !strings.Contains(string(cmdline), "easyscale.forkserver") {
		t.Fatalf("the workers' parent %d runs %q, want python3 -m easyscale.forkserver", server, cmdline)
	}
	workers := l.Processes()
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, p := range workers {
		waitUntil(t, 20*time.Second, fmt.Sprintf("worker %d ended with its server", p.Pid()), p.exited)
		if err := p.proc.Wait(); err == nil {
			t.Errorf("worker %d: Wait after its server was killed gave nil, want its end reported", p.Pid())
		}
	}

	again, ctx := newLocal(t)
	if err := again.Resize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if ppid := parentOf(t, again.Processes()[0].Pid()); ppid == server || ppid == os.Getpid() {
		t.Fatalf("a worker after the server's loss has parent %d; want a new fork server (old %d, this process %d)",
			ppid, server, os.Getpid())
	}
	if _, err := again.Step(ctx, 0, []int{2, 2}, nil); err != nil {
		t.Fatalf("a step on the new server's workers: %v", err)
	}
}

// TestAnInterpreterWhoseForkServerFailsStartsWorkersOfItsOwn runs an
// interpreter that cannot run the fork server (a wrapper that exits 3 for
// it): the worker starts as its own interpreter, the reason is on the
// worker's stderr, and a step runs.
func TestAnInterpreterWhoseForkServerFailsStartsWorkersOfItsOwn(t *testing.T) {
	py := requireTorch(t)
	wrapper := filepath.Join(t.TempDir(), "python3")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *easyscale.forkserver*) exit 3;; esac\nexec %s \"$@\"\n", py)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	l, ctx := newLocal(t)
	stderr := &lockedBuffer{}
	l.start.Python, l.start.Stderr = wrapper, stderr
	if err := l.Resize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ppid := parentOf(t, l.Processes()[0].Pid()); ppid != os.Getpid() {
		t.Fatalf("the worker's parent is %d, want this process (%d): started as its own interpreter", ppid, os.Getpid())
	}
	if !strings.Contains(stderr.String(), "starting its own interpreter instead") {
		t.Fatalf("stderr %q: want the fork server's failure reported", stderr.String())
	}
	if _, err := l.Step(ctx, 0, []int{4}, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Logf("close: %v", err)
	}
}
