package slurmlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReplacePIDRewritesOnlyThatDaemonsLine(t *testing.T) {
	tests := []struct {
		name, before, want string
	}{
		{"the node's line gets the new PID", "munged 10\nslurmd-n1 11\nslurmd-n3 13\n", "munged 10\nslurmd-n1 11\nslurmd-n3 99\n"},
		{"a missing line is appended", "munged 10\n", "munged 10\nslurmd-n3 99\n"},
		{"a name that only starts alike is left alone", "slurmd-n30 30\nslurmd-n3 13\n", "slurmd-n30 30\nslurmd-n3 99\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lab.pids")
			if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := replacePID(path, "slurmd-n3", 99); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.want {
				t.Fatalf("lab.pids:\n%s\nwant:\n%s", b, tc.want)
			}
		})
	}
}

// gone reports whether process pid has exited (no such process, or a
// zombie not reaped yet).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "PID (COMM) STATE ...": the state follows the last ')'
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// A crash leaves no process of the tree time to act on another's death,
// even when the caller is preempted between two signals. The tree is
// srun's in miniature: a parent and a child (srun's shepherd) that acts
// when the parent dies (here: EOF on a FIFO only the parent holds open;
// the shepherd kills the step through slurmctld). Killed one by one with
// a pause between, the child acted; with crash it does not.
func TestACrashLeavesNoProcessTimeToActOnAnothersDeath(t *testing.T) {
	dir := t.TempDir()
	script := `mkfifo "$D/p"
sh -c 'cat <"$D/p" >/dev/null; echo acted >"$D/mark"' &
exec 3>"$D/p"
echo ready >"$D/ready"
exec sleep 1000`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "D="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	waitReady(t, cmd, dir, func() bool { return true })
	deadline := time.Now().Add(10 * time.Second)
	// preempted for 200 ms before each signal: ample time for the child to
	// see the parent die, were the parent killed while the child runs
	pids, _, err := crash([]int{cmd.Process.Pid}, func() { time.Sleep(200 * time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) < 3 { // sh (then sleep), the child sh, its cat
		t.Fatalf("crash signalled %v, want the parent, the child and the child's cat", pids)
	}
	<-waited
	for _, p := range pids {
		for !gone(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of %v still runs after the crash", p, pids)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mark")); err == nil {
		t.Fatalf("a process acted on another's death during the crash: mark %q", b)
	}
}

// A crash wakes no stopped process by orphaning its process group. The
// tree is the batch step's in miniature: a process leading its own process
// group (the batch script, srun in its group) whose parent is in another
// group of the same session (slurmstepd), and a child that acts on SIGHUP
// (srun: "forcing job termination", the step's tasks SIGKILLed). Killed
// parent first, the leader's death orphaned the group with a stopped member
// and the kernel sent it SIGHUP and SIGCONT: the child ran and acted
// (docs/first-node-loss.md, lab run of 2026-12-02 08:22). With crash it
// does not.
func TestACrashWakesNoStoppedProcessByOrphaningItsGroup(t *testing.T) {
	dir := t.TempDir()
	script := `sh -c 'trap "echo acted >\"\$D/mark\"; exit 0" HUP; echo ready >"$D/ready"; while :; do sleep 1; done' &
exec sleep 1000`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "D="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, this process's session
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	waitReady(t, cmd, dir, func() bool { return len(children(cmd.Process.Pid)) > 0 })
	deadline := time.Now().Add(10 * time.Second)
	pids, names, err := crash([]int{cmd.Process.Pid}, func() { time.Sleep(200 * time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) < 2 {
		t.Fatalf("crash signalled %v, want the leader and its child", names)
	}
	<-waited
	for _, p := range pids {
		for !gone(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of %v still runs after the crash", p, names)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mark")); err == nil {
		t.Fatalf("a stopped process ran during the crash (SIGHUP of its orphaned group): mark %q; signalled %v", b, names)
	}
}

// waitReady polls (10 ms, 10 s deadline) until the test's process tree
// wrote dir/ready and more() holds; it kills cmd and fails the test on
// the deadline.
func waitReady(t *testing.T, cmd *exec.Cmd, dir string, more func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil && more() {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the process tree did not get ready in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
