package slurmlab

import (
	"bytes"
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
)

// privateLab is a one-node lab of its own (a temporary directory, the ports of
// EASYSCALE_LAB_PORT_BASE+50), for tests of lab-up.sh itself that must not disturb
// the shared lab other packages use.
type privateLab struct {
	dir, root string
	env       []string
}

func newPrivateLab(t *testing.T) *privateLab {
	t.Helper()
	if !Enabled() {
		t.Skip("slurmlab: " + offWhy)
	}
	if why := skipReason(ciMode(), os.Geteuid() == 0, installed()); why != "" {
		if ciMode() {
			t.Fatalf("slurmlab: CI is set but the lab cannot run: %s", why)
		}
		t.Skip("slurmlab: " + why)
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "eslab-") // short: the MariaDB socket path must stay under 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // munged runs as munge
		t.Fatal(err)
	}
	base := 16800
	if v, err := strconv.Atoi(os.Getenv("EASYSCALE_LAB_PORT_BASE")); err == nil {
		base = v
	}
	p := &privateLab{dir: dir, root: root}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EASYSCALE_LAB") && !strings.HasPrefix(kv, "EASYSCALE_SPANK") &&
			!strings.HasPrefix(kv, "SLURM_CONF=") && !strings.HasPrefix(kv, "_EASYSCALE_LAB") {
			p.env = append(p.env, kv)
		}
	}
	p.env = append(p.env, "EASYSCALE_LAB_DIR="+dir, fmt.Sprintf("EASYSCALE_LAB_PORT_BASE=%d", base+50),
		"EASYSCALE_LAB_NODES=1", "EASYSCALE_LAB_GPUS=1", "EASYSCALE_LAB_OWNER=harness",
		"EASYSCALE_SPANK_SO=/nonexistent")
	t.Cleanup(func() {
		if out, err := p.script(t, "lab-down.sh", "EASYSCALE_LAB_PURGE=1"); err != nil {
			t.Errorf("lab-down.sh of the private lab: %v\n%s", err, out)
		}
	})
	return p
}

func (p *privateLab) command(ctx context.Context, script string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(p.root, "tests/lab", script))
	cmd.Env = append(append([]string{}, p.env...), env...)
	return cmd
}

// script runs tests/lab/SCRIPT with extra environment and returns its output.
func (p *privateLab) script(t *testing.T, script string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := p.command(ctx, script, env...).CombinedOutput()
	return string(out), err
}

// pids reads run/lab.pids: daemon name -> PIDs recorded for it.
func (p *privateLab) pids(t *testing.T) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "run", "lab.pids"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		m[f[0]] = append(m[f[0]], pid)
	}
	return m
}

// mungeds counts the munged processes serving this lab's socket.
func (p *privateLab) mungeds(t *testing.T) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err == nil && bytes.HasPrefix(b, []byte("/usr/sbin/munged\x00")) &&
			bytes.Contains(b, []byte("--socket="+filepath.Join(p.dir, "munge", "munge.socket"))) {
			n++
		}
	}
	return n
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// TestTwoLabUpsAtOnceOnAStoppedLabLeaveOneLab starts lab-up.sh twice at the same
// time on a lab whose pid file still lists a daemon that is gone (a run that was
// killed): the restart path. Both must succeed, and the lab must run each daemon
// once. lab-up used to release its lock while it stopped the old lab, so the
// second one could restart the lab again under the first, or find the first's
// configs moved away.
func TestTwoLabUpsAtOnceOnAStoppedLabLeaveOneLab(t *testing.T) {
	p := newPrivateLab(t)
	if err := os.MkdirAll(filepath.Join(p.dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	// a PID above pid_max (4194304 at most) is never alive
	if err := os.WriteFile(filepath.Join(p.dir, "run", "lab.pids"), []byte("munged 4999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var outs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = p.command(ctx, "lab-up.sh")
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("lab-up #%d: %v\n%s", i+1, err, outs[i].String())
		}
	}
	pids := p.pids(t)
	for _, name := range []string{"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd-n1"} {
		if len(pids[name]) != 1 {
			t.Errorf("lab.pids lists %s %d times (%v), want once", name, len(pids[name]), pids[name])
			continue
		}
		if want := commOf(name); comm(pids[name][0]) != want {
			t.Errorf("%s (pid %d) runs %q, want %q", name, pids[name][0], comm(pids[name][0]), want)
		}
	}
	if n := p.mungeds(t); n != 1 {
		t.Errorf("%d munged processes serve the lab's socket, want 1", n)
	}
}

// commOf mirrors lib.sh: the /proc/PID/comm of a recorded daemon.
func commOf(name string) string {
	if strings.HasPrefix(name, "slurmd-") {
		return "slurmd"
	}
	return name
}

// TestLabUpInJoinModeNeverRestartsALabInUse is what a test process that is not the
// lab's first user runs (EASYSCALE_LAB_JOIN=1): with a node killed (as a node-failure
// test does) it joins the lab as it is, and with other settings it fails; in neither
// case does a daemon restart.
func TestLabUpInJoinModeNeverRestartsALabInUse(t *testing.T) {
	p := newPrivateLab(t)
	if out, err := p.script(t, "lab-up.sh"); err != nil {
		t.Fatalf("lab-up: %v\n%s", err, out)
	}
	before := p.pids(t)
	slurmd := before["slurmd-n1"][0]
	if err := syscall.Kill(slurmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for comm(slurmd) == "slurmd" { // gone, or a zombie until init reaps it
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", slurmd)); strings.Contains(string(b), "State:\tZ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slurmd %d still alive 30 s after SIGKILL", slurmd)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := p.script(t, "lab-up.sh", "EASYSCALE_LAB_JOIN=1")
	if err != nil || !strings.Contains(out, "joined without a restart") {
		t.Errorf("join with a node down: %v\n%s", err, out)
	}
	out, err = p.script(t, "lab-up.sh", "EASYSCALE_LAB_JOIN=1", "EASYSCALE_LAB_CPUS=4")
	if err == nil || !strings.Contains(out, "in use by other test processes") {
		t.Errorf("join with other settings: err=%v, want a failure naming the lab in use\n%s", err, out)
	}
	after := p.pids(t)
	for _, name := range []string{"munged", "mariadbd", "slurmdbd", "slurmctld"} {
		if fmt.Sprint(after[name]) != fmt.Sprint(before[name]) || comm(after[name][0]) != name {
			t.Errorf("%s: pids %v before, %v after (comm %q): restarted", name, before[name], after[name], comm(after[name][0]))
		}
	}
}
