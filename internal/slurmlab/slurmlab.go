// Package slurmlab gives Go tests a real Slurm cluster: the lab of tests/lab
// (slurmctld, slurmdbd with MariaDB, four slurmd n1..n4 with emulated GPUs, v100 on
// n1,n2 and t4 on n3,n4, partitions "normal" and the preemptible "low"), on Slurm 22.05
// (Debian 12's packages, the default) or, with EASYSCALE_LAB_CURRENT=1, on Slurm 24.11
// in the current lab's Debian 13 root ([Current]).
//
// A test package starts it once:
//
//	func TestMain(m *testing.M) { os.Exit(slurmlab.Main(m)) }
//
// and each test asks for it with [Require]. Lab tests run only when asked: the
// environment variable EASYSCALE_LAB=1 (set by `make test` and .ci/test.sh) turns them
// on; without it Main, [Build] and Require touch nothing (no lab-up, no lock files, no
// `make build`) and Require skips with a message saying how to turn them on, even as
// root on a machine with Slurm, so `make test-unit` and a plain `go test ./...` start no
// daemons. With EASYSCALE_LAB=1, Require skips when Slurm is not installed or the tests
// do not run as root, except when the environment variable CI is set: then a lab that
// cannot start fails the test.
//
// Several test packages may use the lab at once (go test runs packages in parallel):
// each holds a shared lock on $EASYSCALE_LAB_DIR/users.lock while it runs. The first
// user (the one that finds no other holder) runs lab-up.sh holding that lock
// exclusively, so the others wait for the lab to be up; a later user runs lab-up.sh in
// join mode (EASYSCALE_LAB_JOIN=1), which never restarts a lab that others are using (a
// test may have killed a node on purpose). The last one out stops the lab, but only if
// a test harness started it (a lab started with `make lab-up` stays up;
// EASYSCALE_LAB_KEEP=1 keeps a harness-started one up too).
//
// The current lab's Slurm clients, Python and torch are in its root, so a test of the
// current lab runs there: `make test-current` builds bin/ and the test binaries on the
// host (the root has no Go toolchain) and runs each binary with
// $EASYSCALE_LAB_DIR/bin/lab-exec, which marks the process as running in the root. A
// test process that asks for the current lab from the host fails with a message
// saying so: the host's 22.05 clients cannot talk to 24.11 daemons.
package slurmlab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// DefaultDir is the lab directory when EASYSCALE_LAB_DIR is not set.
const DefaultDir = "/tmp/easyscale-lab"

// DefaultCurrentDir is the current lab's directory when EASYSCALE_LAB_DIR is not set
// (tests/lab/lib.sh's default with EASYSCALE_LAB_CURRENT=1).
const DefaultCurrentDir = "/tmp/easyscale-lab-current"

// CurrentSwitch is the environment variable that selects the current lab (Slurm 24.11,
// Python 3.13 and torch 2.6 in a Debian 13 root): "1" selects it, unset or "0" the
// 22.05 lab (lab-up.sh refuses other values).
const CurrentSwitch = "EASYSCALE_LAB_CURRENT"

// Current reports whether the current lab was selected ([CurrentSwitch]).
func Current() bool { return on(os.Getenv(CurrentSwitch)) }

// InRoot reports whether this process runs in the current lab's root: lab-exec
// (tests/lab/current-lib.sh) sets _EASYSCALE_LAB_IN_ROOT=1 for what it runs.
func InRoot() bool { return os.Getenv("_EASYSCALE_LAB_IN_ROOT") == "1" }

// selectedDir returns the lab directory: EASYSCALE_LAB_DIR, else the selected lab's default.
func selectedDir() string {
	if d := os.Getenv("EASYSCALE_LAB_DIR"); d != "" {
		return d
	}
	if Current() {
		return DefaultCurrentDir
	}
	return DefaultDir
}

// Lab is a running lab cluster.
type Lab struct {
	// Dir holds the lab's configs (etc/), logs (log/), state and pidfiles.
	Dir string
	// Conf is the path of slurm.conf, the SLURM_CONF every client needs.
	Conf string
	// Env is the environment for Slurm commands and jobs: this process's, plus the
	// export lines lab-up.sh printed (SLURM_CONF, EASYSCALE_LAB_DIR, EASYSCALE_LAB_PORT_BASE) and PATH with the
	// repository's bin/ first.
	Env []string
	// CLI runs squeue, sinfo, scontrol and sbatch against the lab.
	CLI slurmcli.Runner
	// Root is the repository root (where go.mod is).
	Root string
}

// Switch is the environment variable that turns the lab tests on ("1"; unset,
// "0", "false", "no" or "off" leave them off).
const Switch = "EASYSCALE_LAB"

// offWhy is Require's skip message while the lab tests are off.
const offWhy = "lab tests are off: set " + Switch + "=1 to run them against a private Slurm lab " +
	"(make test and .ci/test.sh do; it needs root and starts daemons)"

var (
	once     sync.Once
	off      bool // the lab tests were not asked for (Switch)
	shared   *Lab
	skipWhy  string
	startErr error
	users    *usersLock // held on users.lock while this process uses the lab
	labDir   string     // the lab directory users.lock is in
	labRoot  string     // the repository root, for tests/lab
	upOutput string     // what lab-up.sh printed on stderr
)

// on reports whether an environment switch's value means yes.
func on(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// ciMode reports whether the environment variable CI asks for strict mode.
func ciMode() bool { return on(os.Getenv("CI")) }

// Enabled reports whether the lab tests were asked for (EASYSCALE_LAB=1). Without it
// nothing in this package starts a daemon, takes a lock or builds anything.
func Enabled() bool { return on(os.Getenv(Switch)) }

// skipReason decides whether a process that asked for the lab ([Enabled]) may run it:
// "" to start it, else why not. ci is CI mode, root whether the process runs as root,
// installed whether Slurm's daemons are installed (under CI, lab-up installs them).
func skipReason(ci, root, installed bool) string {
	switch {
	case !root:
		return "the lab cluster needs root (mknod, daemons)"
	case !ci && !installed:
		return "Slurm is not installed (bash .ci/install-deps.sh)"
	}
	return ""
}

// Main starts the lab (see [Start]), runs the tests, prints the tail of every daemon
// log when a test failed, then releases the lab. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	if !Enabled() {
		return m.Run() // Require skips each lab test with offWhy
	}
	once.Do(start)
	if startErr != nil { // said here too: a package whose lab tests were filtered out passes
		fmt.Fprintf(os.Stderr, "slurmlab: lab cluster did not start: %v\n%s", startErr, upOutput)
	}
	code := m.Run()
	if shared != nil && code != 0 {
		fmt.Fprintln(os.Stderr, "slurmlab: tests failed; daemon logs:")
		shared.WriteLogTails(os.Stderr, 40)
	}
	if err := release(); err != nil {
		fmt.Fprintln(os.Stderr, "slurmlab:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Require returns the lab, starting it on first use. It skips the test when the lab
// tests are off (EASYSCALE_LAB not set, even under CI), and when Slurm is missing or
// the process is not root, unless CI is set (then it fails the test). It
// registers a cleanup that fails the test if a node is drained or down when the test
// ends, and prints what the daemons logged during the test if the test failed. A test
// that drains a node on purpose resumes it in a t.Cleanup registered after Require
// (cleanups run last-registered first, so it runs before the check).
func Require(t testing.TB) *Lab {
	t.Helper()
	once.Do(start)
	switch {
	case off:
		t.Skip("slurmlab: " + offWhy)
	case startErr != nil:
		t.Fatalf("slurmlab: lab cluster did not start: %v\n%s", startErr, upOutput)
	case skipWhy != "" && ciMode():
		t.Fatalf("slurmlab: CI is set but the lab cannot run: %s", skipWhy)
	case skipWhy != "":
		t.Skip("slurmlab: " + skipWhy)
	}
	l := shared
	offsets := l.logOffsets()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if drained, err := l.DrainedNodes(ctx); err != nil {
			t.Errorf("slurmlab: checking for drained nodes: %v", err)
		} else if len(drained) > 0 {
			t.Errorf("slurmlab: node(s) drained during the test: %s", drained)
		}
		if t.Failed() {
			var b strings.Builder
			l.writeLogsSince(&b, offsets)
			t.Logf("slurmlab: daemon logs during the test:\n%s", b.String())
		}
	})
	return l
}

// RequireTorch is Require for a test that runs torch jobs: it also skips
// the test when the lab nodes' interpreter, /usr/bin/python3, cannot
// import torch.
func RequireTorch(t testing.TB) *Lab {
	t.Helper()
	l := Require(t)
	if _, err := exec.Command("/usr/bin/python3", "-c", "import torch").CombinedOutput(); err != nil {
		t.Skip("no torch for /usr/bin/python3")
	}
	return l
}

// Start brings the lab up if needed (tests/lab/lab-up.sh) and returns it. skip is
// non-empty when the lab cannot run here (EASYSCALE_LAB not set; not root; Slurm not
// installed and CI not set); err is non-nil when it should run but did not start. Main and Require call it
// once per process; call it directly only outside tests.
func Start() (l *Lab, skip string, err error) {
	once.Do(start)
	if off {
		return nil, offWhy, nil
	}
	return shared, skipWhy, startErr
}

func start() {
	if !Enabled() {
		off = true
		return
	}
	if skipWhy = skipReason(ciMode(), os.Geteuid() == 0, installed()); skipWhy != "" {
		return
	}
	if Current() && !InRoot() {
		startErr = errors.New("the current lab (" + CurrentSwitch + "=1) was asked for outside its root: its Slurm " +
			"24.11 clients, Python and torch are in the root, so run the test binary there with " +
			"$EASYSCALE_LAB_DIR/bin/lab-exec (make test-current does)")
		return
	}
	root, err := repoRoot()
	if err != nil {
		startErr = err
		return
	}
	dir := selectedDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		startErr = fmt.Errorf("creating lab dir: %w", err)
		return
	}
	labDir, labRoot = dir, root
	users, err = joinUsers(filepath.Join(dir, "users.lock"))
	if err != nil {
		startErr = err
		return
	}
	defer func() {
		if err := users.Share(); err != nil && startErr == nil {
			startErr = err
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "tests/lab/lab-up.sh"))
	cmd.Env = append(os.Environ(), "EASYSCALE_LAB_DIR="+dir, "EASYSCALE_LAB_OWNER=harness")
	if !users.first { // others use the lab: lab-up must not restart it under them
		cmd.Env = append(cmd.Env, "EASYSCALE_LAB_JOIN=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	upOutput = stderr.String()
	if err != nil {
		startErr = fmt.Errorf("tests/lab/lab-up.sh: %w", err)
		return
	}
	env, err := exports(out)
	if err != nil {
		startErr = err
		return
	}
	l := &Lab{Dir: dir, Root: root, Conf: env["SLURM_CONF"]}
	l.Env = os.Environ()
	for k, v := range env {
		l.Env = append(l.Env, k+"="+v)
	}
	l.Env = append(l.Env, "PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	l.CLI = slurmcli.Runner{Env: l.Env}
	shared = l
}

// exports reads the `export K=V` lines lab-up.sh prints.
func exports(out []byte) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("lab-up.sh printed a bad export line %q", sc.Text())
		}
		env[k] = v
	}
	if env["SLURM_CONF"] == "" {
		return nil, fmt.Errorf("lab-up.sh printed no SLURM_CONF export (stdout %q)", out)
	}
	return env, nil
}

// release drops this process's use of the lab; the last user stops a lab that a
// harness started.
func release() error {
	if users == nil {
		return nil
	}
	defer users.Close()
	if os.Getenv("EASYSCALE_LAB_KEEP") == "1" {
		return nil
	}
	if !users.Last() {
		return nil // another test process still uses the lab
	}
	// also after a failed start: lab-down stops what a half-done lab-up recorded
	owner, _ := os.ReadFile(filepath.Join(labDir, "run", "owner"))
	if strings.TrimSpace(string(owner)) != "harness" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(labRoot, "tests/lab/lab-down.sh"))
	cmd.Env = append(os.Environ(), "EASYSCALE_LAB_DIR="+labDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tests/lab/lab-down.sh: %w\n%s", err, out)
	}
	return nil
}

func installed() bool {
	for _, b := range []string{"/usr/sbin/slurmctld-wlm", "/usr/sbin/slurmd-wlm", "/usr/sbin/slurmdbd", "/usr/sbin/munged", "/usr/sbin/mariadbd"} {
		if _, err := os.Stat(b); err != nil {
			return false
		}
	}
	_, err := exec.LookPath("sbatch")
	return err == nil
}

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Command returns a command that runs in the lab's environment.
func (l *Lab) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = l.Env
	return cmd
}

// Submit writes script to a file in t's temporary directory, submits it with
// `sbatch --parsable ARGS...` and returns the job id. The job is cancelled when the
// test ends. The job's working directory is that temporary directory, so its output
// goes to slurm-ID.out there unless args has "-o", path.
func (l *Lab) Submit(t testing.TB, script string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatalf("writing batch script: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append([]string{"--chdir=" + dir}, args...)
	id, err := l.CLI.Sbatch(ctx, path, args...)
	if err != nil {
		t.Fatalf("slurmlab: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = l.CLI.Output(ctx, "scancel", id)
		// The job's script writes into dir (its --chdir), which the test's
		// temporary directory cleanup removes right after: wait until Slurm
		// has ended the job (at most the deadline), so that the removal does
		// not race a script still writing there (a 24.11 CI run: a job
		// requeued and started again 0.4 s before the test ended, "unlinkat
		// ...: directory not empty").
		l.waitEnded(ctx, id)
	})
	return id
}

// waitEnded polls squeue every 100 ms until job id is in no active state
// (pending, running, completing, ...) or squeue no longer knows it, or ctx
// ends; an error reading it ends the wait too.
func (l *Lab) waitEnded(ctx context.Context, id string) {
	active := map[string]bool{"PENDING": true, "CONFIGURING": true, "RUNNING": true, "COMPLETING": true,
		"SUSPENDED": true, "REQUEUED": true, "REQUEUE_HOLD": true, "REQUEUE_FED": true, "RESIZING": true, "SIGNALING": true, "STAGE_OUT": true}
	for {
		j, err := l.CLI.Job(ctx, id)
		if err != nil || !active[j.State] {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitState polls squeue every 100 ms until job id is in one of states (e.g.
// "RUNNING", "COMPLETED") and returns its squeue line. It fails with an error naming
// the last state seen when timeout passes or the job reaches a final state that is
// not one of states.
func (l *Lab) WaitState(ctx context.Context, id string, timeout time.Duration, states ...string) (slurmcli.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	final := map[string]bool{"COMPLETED": true, "FAILED": true, "CANCELLED": true, "TIMEOUT": true,
		"NODE_FAIL": true, "OUT_OF_MEMORY": true, "BOOT_FAIL": true, "DEADLINE": true, "PREEMPTED": true}
	last := "unknown"
	for {
		j, err := l.CLI.Job(ctx, id)
		if err == nil {
			last = j.State
			for _, s := range states {
				if j.State == s {
					return j, nil
				}
			}
			if final[j.State] {
				return j, fmt.Errorf("job %s ended %s (reason %s), want %v", id, j.State, j.Reason, states)
			}
		}
		select {
		case <-ctx.Done():
			return slurmcli.Job{}, fmt.Errorf("job %s: still %s after %v, want %v", id, last, timeout, states)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitIdle polls sinfo every 100 ms until every node is "idle" and returns the nodes.
// Right after jobs end, nodes may still show "completing" or "planned" (reserved by
// a backfill plan for a job that is gone) for a second or two. On timeout it returns
// the last nodes seen and an error naming the first node that was not idle.
func (l *Lab) WaitIdle(ctx context.Context, timeout time.Duration) ([]slurmcli.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		nodes, err := l.CLI.Sinfo(ctx)
		busy := ""
		for _, n := range nodes {
			if n.State != "idle" && busy == "" {
				busy = n.Name + " is " + n.State
			}
		}
		if err == nil && busy == "" && len(nodes) > 0 {
			return nodes, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return nodes, fmt.Errorf("waiting for idle nodes: %w", err)
			}
			return nodes, fmt.Errorf("waiting for idle nodes: after %v %s", timeout, busy)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// DrainedNodes returns the nodes sinfo shows drained, draining or down.
func (l *Lab) DrainedNodes(ctx context.Context) ([]string, error) {
	nodes, err := l.CLI.Sinfo(ctx)
	if err != nil {
		return nil, err
	}
	return slurmcli.DrainedNodes(nodes), nil
}

// logFiles lists the daemon logs: slurmctld, slurmdbd, every slurmd, MariaDB.
func (l *Lab) logFiles() []string {
	files, _ := filepath.Glob(filepath.Join(l.Dir, "log", "*.log"))
	return files
}

func (l *Lab) logOffsets() map[string]int64 {
	m := map[string]int64{}
	for _, f := range l.logFiles() {
		if fi, err := os.Stat(f); err == nil {
			m[f] = fi.Size()
		}
	}
	return m
}

// writeLogsSince writes what each log gained after offsets (at most 64 KiB a file).
func (l *Lab) writeLogsSince(w io.Writer, offsets map[string]int64) {
	for _, f := range l.logFiles() {
		b, err := os.ReadFile(f)
		if err != nil || int64(len(b)) <= offsets[f] {
			continue
		}
		b = b[offsets[f]:]
		if len(b) > 64<<10 {
			b = b[len(b)-64<<10:]
		}
		fmt.Fprintf(w, "==> %s <==\n%s\n", f, b)
	}
}

// WriteLogTails writes the last n lines of every daemon log to w.
func (l *Lab) WriteLogTails(w io.Writer, n int) {
	for _, f := range l.logFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(w, "==> %s <==\n%s\n", f, strings.Join(lines, "\n"))
	}
}
