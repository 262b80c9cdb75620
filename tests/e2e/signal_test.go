package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// Mid-step signals: the fault-injection variable (trainer.FaultSlowStepEnv)
// makes one step sleep far longer than the deadlines below once its
// contexts have advanced, so a run that waits for the step in progress
// misses them.
const (
	slowStep      = 6
	signalSteps   = 12
	slowStepDelay = 60 * time.Second
	// exitDeadline is what the tests allow from SIGTERM to exit (the
	// promise is 2 s; the margin is for a loaded test machine).
	exitDeadline = 5 * time.Second
)

func slowStepEnv(step int64, d time.Duration) string {
	return fmt.Sprintf("EASYSCALE_FAULT_SLOW_STEP=%d:%s", step, d)
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// started is a running easyscale process.
type started struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

func start(t *testing.T, env []string, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command(easyscale, args...), stderr: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() { s.cmd.Process.Kill() })
	return s
}

// waitSlowStep waits until the slow step has begun: the fault-injection
// line on the process's stderr, or in a worker's log under state.
func (s *started) waitSlowStep(t *testing.T, state string, within time.Duration) {
	t.Helper()
	s.waitLine(t, state, "fault injection: step", within)
}

// waitLine waits until line appears on the process's stderr or in a
// worker's log under state.
func (s *started) waitLine(t *testing.T, state, line string, within time.Duration) {
	t.Helper()
	s.waitMatch(t, state, regexp.MustCompile(regexp.QuoteMeta(line)), within)
}

// waitMatch waits until re matches the process's stderr or a worker's log
// under state: a log line whose keys the logger may put before the ones a
// test looks for (the coordinator's job_id).
func (s *started) waitMatch(t *testing.T, state string, re *regexp.Regexp, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if re.MatchString(s.stderr.String()) {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(state, "workers", "worker-*.log"))
		for _, p := range logs {
			if b, err := os.ReadFile(p); err == nil && re.Match(b) {
				return
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("the run ended (%v) before %q appeared:\n%s", err, re, s.stderr)
		case <-deadline:
			t.Fatalf("%q did not appear within %v:\n%s", re, within, s.stderr)
		case <-tick.C:
		}
	}
}

// exitCode waits for the process for at most within and returns its exit
// code and how long it took.
func (s *started) exitCode(t *testing.T, within time.Duration) (int, time.Duration) {
	t.Helper()
	t0 := time.Now()
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return s.cmd.ProcessState.ExitCode(), time.Since(t0)
	case <-time.After(within):
		s.cmd.Process.Kill()
		t.Fatalf("no exit within %v of the signal:\n%s", within, s.stderr)
	}
	return 0, 0
}

// newestCheckpoint is the step of the newest valid checkpoint in state.
func newestCheckpoint(t *testing.T, state string) int64 {
	t.Helper()
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ck, _, err := db.LatestCheckpoint()
	if err != nil || ck == nil {
		t.Fatalf("no checkpoint in %s: %v", state, err)
	}
	return ck.Step
}

// TestSIGTERMMidStepExitsAtOnce sends SIGTERM (or SIGINT) to `easyscale
// run` (in process, and the coordinator of --procs) while a step that
// lasts a minute is in progress: it exits 143 (130) within seconds, the newest
// checkpoint is the last completed step, and the rerun reaches the
// uninterrupted run's digest.
func TestSIGTERMMidStepExitsAtOnce(t *testing.T) {
	ref := digest(mustRun(t, "run", "--config", config(), "--steps", fmt.Sprint(signalSteps), "--no-eval"))
	cases := []struct {
		name  string
		sig   syscall.Signal
		code  int
		extra []string
	}{
		{"in process", syscall.SIGTERM, 143, nil},
		{"in process, SIGINT", syscall.SIGINT, 130, nil},
		{"coordinator of worker processes", syscall.SIGTERM, 143, []string{"--procs", "--workers", "2", "--heartbeat-timeout", "3s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			args := append([]string{"run", "--config", config(), "--steps", fmt.Sprint(signalSteps), "--no-eval", "--quiet", "--state", state}, c.extra...)
			run := start(t, []string{slowStepEnv(slowStep, slowStepDelay)}, args...)
			run.waitSlowStep(t, state, 2*time.Minute)
			// A worker process may begin the slow step as a guess
			// (runtime/cluster/guess.go) before the coordinator has
			// the previous step's result: until the ledger holds that
			// step, it is still in progress and a signal rightly
			// abandons it.
			waitStep(t, state, slowStep, time.Minute)
			if err := run.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			code, took := run.exitCode(t, exitDeadline)
			t.Logf("%v to exit: %v", c.sig, took.Round(time.Millisecond))
			if code != c.code {
				t.Fatalf("exit %d after %v, want %d:\n%s", code, c.sig, c.code, run.stderr)
			}
			if last := lastStep(state); last != slowStep {
				t.Fatalf("the ledger ends at step %d, want %d (the abandoned step must not be recorded)", last, slowStep)
			}
			if ck := newestCheckpoint(t, state); ck != slowStep {
				t.Fatalf("newest checkpoint of step %d, want %d, the last completed step", ck, slowStep)
			}
			final := mustRun(t, args...)
			if got := int64(final.summary["resumed_from"].(float64)); got != slowStep {
				t.Fatalf("resumed from %d, want %d", got, slowStep)
			}
			if digest(final) != ref {
				t.Fatalf("digest %s after SIGTERM mid-step and resume, uninterrupted %s", digest(final), ref)
			}
		})
	}
}

// TestSIGTERMWhileWaitingForWorkersExitsAtOnce: a coordinator that waits
// for workers to join (here the second of `--listen --workers 2`, which
// never comes) exits 143 at once on SIGTERM instead of after the join
// timeout.
func TestSIGTERMWhileWaitingForWorkersExitsAtOnce(t *testing.T) {
	state := t.TempDir()
	run := start(t, nil, "run", "--config", config(), "--steps", fmt.Sprint(signalSteps), "--no-eval", "--quiet",
		"--state", state, "--listen", "127.0.0.1:0", "--workers", "2")
	run.waitMatch(t, state, regexp.MustCompile(`coordinator: admitted: job_id=\S+ rank=0 `), time.Minute)
	if err := run.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := run.exitCode(t, exitDeadline)
	t.Logf("SIGTERM to exit: %v", took.Round(time.Millisecond))
	if code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143:\n%s", code, run.stderr)
	}
}

// TestSIGTERMOfAJoinerWaitingForAdmissionExitsAtOnce: a worker that has
// joined but waits for the step boundary to be admitted (the step in
// progress lasts a minute) holds nothing, so SIGTERM ends it at once with
// exit 0 instead of after the step.
func TestSIGTERMOfAJoinerWaitingForAdmissionExitsAtOnce(t *testing.T) {
	state, addr := t.TempDir(), freePort(t)
	coord := start(t, []string{slowStepEnv(1, slowStepDelay)}, "run", "--config", config(), "--steps", fmt.Sprint(signalSteps),
		"--no-eval", "--quiet", "--state", state, "--listen", addr, "--workers", "1")
	coord.waitSlowStep(t, state, time.Minute)
	joiner := start(t, nil, "worker", "--join", addr, "--token-file", filepath.Join(state, "token"))
	// The first such line is the local worker's, admitted at the start.
	for deadline := time.Now().Add(time.Minute); strings.Count(coord.stderr.String(), "worker waiting for admission") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the joiner never asked for admission:\n%s\njoiner:\n%s", coord.stderr, joiner.stderr)
		}
	}
	if err := joiner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := joiner.exitCode(t, exitDeadline)
	t.Logf("SIGTERM to exit: %v", took.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("the joiner exited %d after SIGTERM, want 0:\n%s", code, joiner.stderr)
	}
}

// logTime is the timestamp of the first line of an hclog text log that
// contains sub.
func logTime(t *testing.T, log, sub string) time.Time {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, sub) {
			ts, _, _ := strings.Cut(line, " ")
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
			if err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			return at
		}
	}
	t.Fatalf("no log line contains %q:\n%s", sub, log)
	return time.Time{}
}

// TestWorkerSIGTERMMidSlowStepLeavesWithinItsGrace: a worker process that
// gets SIGTERM (--term-at) at the start of a step far longer than its
// leave grace (5 s) does not wait for the step boundary: it leaves within
// the grace, the coordinator redoes the step on the survivor, and the run
// ends with the fixed run's digest.
func TestWorkerSIGTERMMidSlowStepLeavesWithinItsGrace(t *testing.T) {
	const delay = 15 * time.Second
	ref := digest(mustRun(t, "run", "--config", config(), "--steps", fmt.Sprint(signalSteps), "--no-eval"))
	state := t.TempDir()
	run := start(t, []string{slowStepEnv(slowStep, delay)}, "run", "--config", config(), "--steps", fmt.Sprint(signalSteps),
		"--no-eval", "--quiet", "--state", state, "--procs", "--workers", "2", "--heartbeat-timeout", "3s",
		"--term-at", fmt.Sprintf("%d:1", slowStep), "--summary", filepath.Join(state, "summary.json"))
	if code, _ := run.exitCode(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, run.stderr)
	}
	var leaver string
	logs, _ := filepath.Glob(filepath.Join(state, "workers", "worker-*.log"))
	for _, p := range logs {
		if s := readFile(t, p); strings.Contains(s, "signal: leaving") {
			leaver = s
		}
	}
	if leaver == "" {
		t.Fatalf("no worker log records the SIGTERM (%v):\n%s", logs, run.stderr)
	}
	took := logTime(t, leaver, "left the job").Sub(logTime(t, leaver, "signal: leaving"))
	t.Logf("worker SIGTERM to leaving: %v (step in progress: %v)", took, delay)
	if took > 8*time.Second {
		t.Fatalf("the worker left %v after SIGTERM; want within its 5 s grace, not after the %v step:\n%s", took, delay, leaver)
	}
	sum := readFile(t, filepath.Join(state, "summary.json"))
	if !strings.Contains(sum, ref) || strings.Contains(sum, `"redone_steps": 0`) {
		t.Fatalf("summary %s: want digest %s and the abandoned step redone", sum, ref)
	}
}
