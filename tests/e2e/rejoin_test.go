package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// paceEnv makes the --procs runs below long in time but not in work
// (trainer.FaultPaceEnv), so signals land mid-run on any machine.
const paceEnv = "EASYSCALE_FAULT_PACE=20ms"

// summaryDigest reads the digest of a run's --summary file.
func summaryDigest(t *testing.T, path string) string {
	t.Helper()
	var s struct{ Digest string }
	if err := json.Unmarshal([]byte(readFile(t, path)), &s); err != nil {
		t.Fatalf("summary %s: %v", path, err)
	}
	return s.Digest
}

var admittedRe = regexp.MustCompile(`coordinator: admitted: job_id=\S+ rank=(\d+) node=\S+ pid=(\d+)`)

// TestLastMemberLeavingWhileAnotherRejoinsGoesOn: the last member of a
// --procs job leaves (SIGTERM) while another worker process of the job is
// rejoining (here: one lost past the heartbeat timeout while stopped, then
// continued; in the field, the ranks downstream of one SIGKILLed while it
// forwarded the all-reduce result). The coordinator waits for the rejoiner
// and the job finishes with the fixed run's digest, instead of stopping
// with "no physical workers left" although the rejoiner came 0.4 s later.
func TestLastMemberLeavingWhileAnotherRejoinsGoesOn(t *testing.T) {
	refDir, ref := reference(t)
	state := t.TempDir()
	sum := filepath.Join(state, "summary.json")
	run := start(t, []string{paceEnv}, "run", "--config", config(), "--steps", fmt.Sprint(procSteps), "--no-eval", "--procs",
		"--workers", "0:2", "--state", state, "--summary", sum, "--heartbeat-timeout", "1s")
	run.waitMatch(t, state, regexp.MustCompile(`(?s)admitted.*admitted`), time.Minute)
	pids := map[string]int{}
	for _, m := range admittedRe.FindAllStringSubmatch(run.stderr.String(), -1) {
		pids[m[1]], _ = strconv.Atoi(m[2])
	}
	if pids["0"] == 0 || pids["1"] == 0 {
		t.Fatalf("no pids of ranks 0 and 1 in the log:\n%s", run.stderr)
	}
	waitStep(t, state, 3, time.Minute)
	rejoiner, leaver := pids["1"], pids["0"]
	if err := syscall.Kill(rejoiner, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	run.waitLine(t, state, "silent past the heartbeat timeout", time.Minute)
	// Continued, the lost worker finds its session gone and rejoins after
	// its backoff; the survivor leaves at the next step boundary, before.
	if err := syscall.Kill(rejoiner, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(leaver, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := run.exitCode(t, 2*time.Minute); code != 0 {
		t.Fatalf("the run exited %d:\n%s\n%s", code, run.stderr, workerLogs(t, state))
	}
	log := run.stderr.String()
	if !strings.Contains(log, "waiting for the workers on their way") || !strings.Contains(log, "released a worker") {
		t.Fatalf("the last member was not released while a worker was on its way:\n%s", log)
	}
	if d := summaryDigest(t, sum); d != ref {
		t.Fatalf("digest %s, fixed run %s", d, ref)
	}
	sameSamples(t, refDir, state)
}

// children returns the process ids whose parent is pid (Linux /proc).
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ')'
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			c, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, c)
		}
	}
	return out
}

// TestAGrowSurvivesAJoinerKilledBeforeAdmission: a process launched for a
// grow (2 to 4 workers at step 15) is SIGKILLed while it joins, and a
// member leaves (SIGTERM) during the grow. The launcher starts the killed
// worker again and the grow completes, instead of failing after the whole
// join timeout ("only 3 of 4 workers joined within 1m0s"); the run reaches
// the fixed run's digest.
func TestAGrowSurvivesAJoinerKilledBeforeAdmission(t *testing.T) {
	refDir, ref := reference(t)
	state := t.TempDir()
	sum := filepath.Join(state, "summary.json")
	run := start(t, []string{paceEnv}, "run", "--config", config(), "--steps", fmt.Sprint(procSteps), "--no-eval", "--procs",
		"--workers", "0:2,15:4", "--state", state, "--summary", sum, "--heartbeat-timeout", "3s")
	coord := run.cmd.Process.Pid
	first := map[int]bool{}
	var joiner int
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for joiner == 0 {
		for _, c := range children(coord) {
			switch {
			case len(first) < 2:
				first[c] = true
			case !first[c]:
				joiner = c
			}
		}
		select {
		case err := <-run.done:
			t.Fatalf("the run ended (%v) before the grow:\n%s", err, run.stderr)
		case <-deadline:
			t.Fatalf("no worker was launched for the grow:\n%s", run.stderr)
		case <-tick.C:
		}
	}
	if err := syscall.Kill(joiner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A member leaves: the first of the two first workers still alive (on a
	// loaded machine one of them may have been replaced before the grow;
	// the clean-clone CI once met a gone one: "no such process").
	left := false
	for c := range first {
		err := syscall.Kill(c, syscall.SIGTERM)
		if err == nil {
			left = true
			break
		}
		if !errors.Is(err, syscall.ESRCH) {
			t.Fatal(err)
		}
	}
	if !left {
		t.Fatalf("neither of the first workers %v is alive to leave during the grow:\n%s", first, run.stderr)
	}
	// The old coordinator failed after its 60 s join timeout.
	code, took := run.exitCode(t, 50*time.Second)
	if code != 0 {
		t.Fatalf("the run exited %d after %v:\n%s\n%s", code, took, run.stderr, workerLogs(t, state))
	}
	if log := run.stderr.String(); !strings.Contains(log, "exited before it was admitted; starting it again") {
		t.Fatalf("the killed joiner was not started again:\n%s", log)
	}
	if d := summaryDigest(t, sum); d != ref {
		t.Fatalf("digest %s, fixed run %s", d, ref)
	}
	sameSamples(t, refDir, state)
}
