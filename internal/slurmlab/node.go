package slurmlab

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// KillNode makes lab node name (e.g. "n3") fail the way a crashed machine
// does: it SIGKILLs, all at once, the node's slurmd (its PID in
// run/lab.pids), every slurmstepd of that node (recognised, as lab-down.sh
// does, by the node's log/slurmd-NAME.log they hold open) and every process
// below those slurmstepds (the job's tasks). slurmctld notices nothing until
// its next ping goes unanswered: the node is set DOWN ("Not responding")
// about SlurmdTimeout (30 s in the lab) later. It returns the PIDs killed.
//
// "All at once" is [crash]: every process is stopped before any is killed,
// as no process of a crashed machine outlives another. Killed one by one,
// srun's shepherd (a child of srun that, when srun dies without telling
// it, kills the step with SIGKILL through slurmctld) ran between srun's
// kill and its own on a loaded machine and killed the step's tasks on
// every surviving node (docs/first-node-loss.md). Killed parents first
// after being stopped, the batch script's death orphaned the process group
// of srun and its shepherd, stopped, and the kernel woke it with SIGHUP and
// SIGCONT: the step was killed again, 0.1-0.5 s after the loss. crash kills
// children first.
//
// It registers a cleanup on t, which must come after [Require]'s, that
// restores the node with [Lab.RestoreNode], so the drained-node check of
// Require passes and later tests find it idle. It fails t when the node's
// slurmd is not running.
func (l *Lab) KillNode(t testing.TB, name string) []int {
	t.Helper()
	slurmd, err := l.slurmdPID(name)
	if err != nil {
		t.Fatalf("slurmlab: killing node %s: %v", name, err)
	}
	roots := append([]int{slurmd}, l.stepDaemons(name)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := l.RestoreNode(ctx, name); err != nil {
			t.Errorf("slurmlab: %v", err)
		}
	})
	pids, names, err := crash(roots, nil)
	if err != nil {
		t.Fatalf("slurmlab: killing node %s: %v", name, err)
	}
	t.Logf("slurmlab: node %s killed: %s", name, strings.Join(names, " "))
	return pids
}

// crash SIGKILLs roots and every process below them as a crashed machine
// loses them: together, none seeing another die. It first stops each
// process (SIGSTOP), a parent before its children are listed (a stopped
// process forks no more), then kills them all, children before parents (so
// that no stopped process group is orphaned, which would wake it with
// SIGHUP and SIGCONT); a stopped process dies of SIGKILL as a running one
// does. It returns the PIDs, parents first, and
// each as "PID:COMM" (read while it was stopped). A
// process that is gone already is skipped. between, when not nil, runs
// between two signals (a test's stand-in for a loaded machine that
// preempts the caller there).
func crash(roots []int, between func()) ([]int, []string, error) {
	signal := func(p int, sig syscall.Signal) error {
		if between != nil {
			between()
		}
		if err := syscall.Kill(p, sig); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("%v to %d: %w", sig, p, err)
		}
		return nil
	}
	var pids []int
	var names []string
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if err := signal(p, syscall.SIGSTOP); err != nil {
			return pids, names, err
		}
		pids = append(pids, p)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		names = append(names, fmt.Sprintf("%d:%s", p, strings.TrimSpace(string(comm))))
		queue = append(queue, children(p)...)
	}
	// Children before parents: a process that exits while a process group
	// below it (a child's, in the same session) still has a stopped member
	// orphans that group, and the kernel then sends the group SIGHUP and
	// SIGCONT (POSIX orphaned process groups): the stopped processes would
	// run again. Killed parents first, the batch script's death so woke
	// srun and its shepherd; srun forwarded the SIGHUP to the step as a
	// SIGKILL, the shepherd cancelled the step through slurmctld. A
	// SIGKILLed process no longer counts as stopped, so with its
	// descendants killed first no stopped group is left to orphan. pids
	// is breadth-first, so every process's descendants come after it.
	for i := len(pids) - 1; i >= 0; i-- {
		if err := signal(pids[i], syscall.SIGKILL); err != nil {
			return pids, names, err
		}
	}
	return pids, names, nil
}

// RestoreNode brings a node killed by [Lab.KillNode] back: unless its
// slurmd runs, it starts one as lab-up.sh does (`slurmd -D -N NAME` under
// setsid, output appended to log/slurmd-NAME.out) and records the new PID
// in run/lab.pids, under the lab lock, so lab-up.sh and lab-down.sh know
// it; then it waits until slurmctld hears from the node, resumes it with
// `scontrol update NodeName=NAME State=RESUME` when it is still down or
// drained (ReturnToService=2 usually returns it by itself), and waits until
// it is neither down, drained nor unresponsive. It returns an error naming
// the node and its last state when ctx ends first.
func (l *Lab) RestoreNode(ctx context.Context, name string) error {
	if pid, err := l.slurmdPID(name); err != nil || !running(pid, "slurmd") {
		if err := l.startSlurmd(name); err != nil {
			return fmt.Errorf("restoring node %s: %w", name, err)
		}
	}
	resumed := false
	last := "unknown"
	for {
		n, err := l.showNode(ctx, name)
		if err == nil {
			last = n.State
			switch {
			case strings.Contains(n.State, "NOT_RESPONDING"):
			case !resumed && (strings.Contains(n.State, "DOWN") || strings.Contains(n.State, "DRAIN")):
				if out, err := l.CLI.Output(ctx, "scontrol", "update", "NodeName="+name, "State=RESUME"); err != nil {
					return fmt.Errorf("restoring node %s: scontrol update State=RESUME: %w (%s)", name, err, out)
				}
				resumed = true
			case !strings.Contains(n.State, "DOWN") && !strings.Contains(n.State, "DRAIN"):
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restoring node %s: still %s: %w", name, last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// NodeState returns the node's state as `scontrol show node` prints it,
// e.g. "IDLE", "MIXED", "DOWN+NOT_RESPONDING".
func (l *Lab) NodeState(ctx context.Context, name string) (string, error) {
	n, err := l.showNode(ctx, name)
	return n.State, err
}

func (l *Lab) showNode(ctx context.Context, name string) (slurmcli.NodeDetail, error) {
	nodes, err := l.CLI.ShowNodes(ctx)
	if err != nil {
		return slurmcli.NodeDetail{}, err
	}
	for _, n := range nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return slurmcli.NodeDetail{}, fmt.Errorf("scontrol show node lists no node %s", name)
}

// slurmdPID reads the node's slurmd PID from run/lab.pids.
func (l *Lab) slurmdPID(name string) (int, error) {
	path := filepath.Join(l.Dir, "run", "lab.pids")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the lab's PIDs: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "slurmd-"+name {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("%s records no slurmd-%s (is %s a lab node?)", path, name, name)
}

// startSlurmd starts the node's slurmd like lab-up.sh's spawn and replaces
// its line in run/lab.pids while holding lab.lock.
func (l *Lab) startSlurmd(name string) error {
	lock, err := os.OpenFile(filepath.Join(l.Dir, "lab.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening the lab lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("taking the lab lock: %w", err)
	}
	out, err := os.OpenFile(filepath.Join(l.Dir, "log", "slurmd-"+name+".out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening the slurmd output file: %w", err)
	}
	defer out.Close()
	bin := filepath.Join(l.Dir, "bin")
	cmd := exec.Command(filepath.Join(bin, "slurmd"), "-D", "-N", name, "-d", filepath.Join(bin, "slurmstepd"))
	cmd.Env = l.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting slurmd -N %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() // reap it should it die while this process runs
	return replacePID(filepath.Join(l.Dir, "run", "lab.pids"), "slurmd-"+name, pid)
}

// replacePID rewrites the "NAME PID" line of a lab.pids file.
func replacePID(path, name string, pid int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var lines []string
	found := false
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			line, found = fmt.Sprintf("%s %d", name, pid), true
		}
		lines = append(lines, line)
	}
	if !found {
		lines = append(lines, fmt.Sprintf("%s %d", name, pid))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}

// stepDaemons returns the PIDs of the slurmstepd processes that hold the
// node's slurmd log open.
func (l *Lab) stepDaemons(name string) []int {
	logPath := filepath.Join(l.Dir, "log", "slurmd-"+name+".log")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || !isComm(pid, "slurmstepd") {
			continue
		}
		fds, _ := filepath.Glob(filepath.Join(d, "fd", "*"))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && target == logPath {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// isComm reports whether process pid runs the program comm.
func isComm(pid int, comm string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(b)) == comm
}

// running reports whether process pid runs comm and is not a zombie (a
// killed daemon's parent, PID 1 here, may reap it late).
func running(pid int, comm string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil || !isComm(pid, comm) {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if state, ok := strings.CutPrefix(line, "State:"); ok {
			return !strings.HasPrefix(strings.TrimSpace(state), "Z")
		}
	}
	return false
}

// children returns the processes whose parent is pid (the children of all
// its threads).
func children(pid int) []int {
	var out []int
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			if c, err := strconv.Atoi(sc.Text()); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
