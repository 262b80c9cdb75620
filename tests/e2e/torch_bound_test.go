package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// The bounds of a torch run with workers on other machines: a slow worker
// is waited for however long its step, a lost one is noticed at once, even
// while a process group forms, and the summary describes the world size
// the steps really ran on.

// ledgerSchedule is the schedule the ledger under state records: FROM:W
// for every stretch of steps that ran on W physical workers (the ledger
// numbers completed steps: its step 1 is step index 0 of a schedule).
func ledgerSchedule(t *testing.T, state string) string {
	t.Helper()
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Ledger(0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	var spans []string
	last := -1
	for _, r := range rows {
		if r.Workers != last {
			spans = append(spans, fmt.Sprintf("%d:%d", r.Step-1, r.Workers))
			last = r.Workers
		}
	}
	return strings.Join(spans, ",")
}

// summarySchedule is the schedule of a summary file's text.
func summarySchedule(t *testing.T, text string) string {
	t.Helper()
	var s struct {
		Schedule string `json:"schedule"`
	}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		t.Fatalf("summary %s: %v", text, err)
	}
	return s.Schedule
}

// TestTorchASlowJoinedWorkerIsWaitedFor: the joined worker's first step
// takes 30 s (2 logical workers, 15 s a forward); the coordinator's process
// computes its half in 3 s and then waits 27 s for it, longer than any
// bound on a collective the run has (the heartbeat timeout is 5 s; the
// bound was once max(20 s, 4 heartbeat timeouts)). The joiner heartbeats
// throughout, so the step must not fail: no step is redone and the digest
// is the fixed run's.
func TestTorchASlowJoinedWorkerIsWaitedFor(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval"))
	state, addr := t.TempDir(), freePort(t)
	// The coordinator's process is slow too (1.5 s a forward: 6 s a step
	// alone), so the joiner arrives mid-run.
	coord := startTorchListen(t, job, state, addr, []string{"TOYJOB_SLOW=0:1.5"}, "--heartbeat-timeout", "5s")
	w := startTorchWorker(t, addr, state, []string{"TOYJOB_SLOW=0:15:2"})
	coord.waitLine(t, state, "admitted: rank=1", 120*time.Second)
	if code, _ := coord.exitCode(t, 240*time.Second); code != 0 {
		t.Fatalf("the run exited %d:\n%s\nworker:\n%s", code, coord.stderr, w.stderr)
	}
	sum := readFile(t, filepath.Join(state, "summary.json"))
	if !strings.Contains(sum, ref) {
		t.Fatalf("summary %s: want the digest %s of one process per logical worker", sum, ref)
	}
	if strings.Contains(coord.stderr.String(), "redoing the step") || !strings.Contains(sum, `"redone_steps": 0`) {
		t.Fatalf("a step of the slow but live worker was redone:\n%s\n%s", sum, coord.stderr)
	}
	var slowest float64
	for _, e := range ledger(t, state) {
		if e.Workers == 2 && e.WallSeconds > slowest {
			slowest = e.WallSeconds
		}
	}
	if slowest < 29 {
		t.Fatalf("the slowest step on 2 workers took %.1f s: the joiner's slow step did not run on 2, the test shows nothing", slowest)
	}
	t.Logf("slowest step on 2 workers: %.1f s", slowest)
	if got, want := summarySchedule(t, sum), ledgerSchedule(t, state); got != want {
		t.Errorf("summary schedule %q, the ledger's world sizes %q", got, want)
	}
}

// TestTorchAJoinerLostWhileTheGroupFormsIsNoticedAtOnce holds the joined
// worker's Python process before it arrives at its first rendezvous (the
// coordinator's process waits for it there) and SIGKILLs the worker: the
// coordinator must notice within the heartbeat timeout (not at the end of
// the rendezvous' bound), re-form the group without it on its own process
// (not restarted), and end with the fixed run's digest.
func TestTorchAJoinerLostWhileTheGroupFormsIsNoticedAtOnce(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval"))
	state, addr := t.TempDir(), freePort(t)
	coord := startTorchListen(t, job, state, addr, []string{"TOYJOB_SLOW=0:0.5"})
	w := startTorchWorker(t, addr, state, []string{"TOYJOB_HOLD_GROUP=600"})
	w.waitLine(t, state, "toyjob: holding rank 1 of 2 before the rendezvous", 120*time.Second)
	py := w.pythonPID(t)
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	hb, _ := time.ParseDuration(joinHeartbeat)
	coord.waitLine(t, state, "workers lost; redoing the step", hb)
	t.Logf("SIGKILL during the rendezvous to the redo: %v", time.Since(t0).Round(time.Millisecond))
	waitGone(t, py, 10*time.Second, "the killed worker's Python process")
	if code, _ := coord.exitCode(t, 180*time.Second); code != 0 {
		t.Fatalf("the run exited %d:\n%s", code, coord.stderr)
	}
	sum := readFile(t, filepath.Join(state, "summary.json"))
	if !strings.Contains(sum, ref) {
		t.Fatalf("summary %s: want the digest %s of one process per logical worker\n%s", sum, ref, coord.stderr)
	}
	if n := strings.Count(coord.stderr.String(), "admitted: rank=1"); n != 1 {
		t.Fatalf("%d admissions, want the one joiner's", n)
	}
	// The joiner never ran a step: the summary's schedule is the ledger's, one process throughout.
	if got, want := summarySchedule(t, sum), ledgerSchedule(t, state); got != want || want != "0:1" {
		t.Errorf("summary schedule %q, the ledger's world sizes %q; want 0:1", got, want)
	}
}
