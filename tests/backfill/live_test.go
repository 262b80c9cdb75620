package backfill

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

const pollInterval = time.Second

func TestElasticJobGrowsIntoIdleGPUsWithinTwoPollIntervals(t *testing.T) {
	l := slurmlab.Require(t)
	s := settings{dir: t.TempDir(), nodes: []string{"n3"}}
	startDaemon(t, l, s, "backfilld")
	e, rdv := submitElastic(t, l, "es-req min=1 max=3 lw=4 d1", "-w", "n3", "--gres=gpu:t4:1", "-t", "5")
	cancelExtrasAtEnd(t, l, e.ID)
	// The coordinator file exists now; the next two cycles must grow the job.
	took := waitFor(t, 2*pollInterval+time.Second, "an extra job of "+e.ID, func() bool { return len(extrasOf(t, l, e.ID)) > 0 })
	t.Logf("extra job submitted %v after the coordinator file appeared", took.Round(time.Millisecond))
	x := extrasOf(t, l, e.ID)[0]
	x, err := l.WaitState(context.Background(), x.ID, 20*time.Second, "RUNNING")
	if err != nil {
		t.Fatal(err)
	}
	// squeue spells the request gres:gpu:t4:1 on 22.05, gres/gpu:t4:1 on 24.11: compare it parsed
	gres, err := slurmcli.ParseGRES(x.TRESPerNode)
	if x.Name != "es-extra-"+e.ID || x.Partition != "low" || x.NodeList != "n3" || err != nil ||
		len(gres) != 1 || gres[0] != (slurmcli.GRES{Name: "gpu", Type: "t4", Count: 1}) {
		t.Errorf("extra job %+v (GRES %v, %v): want es-extra-%s in low on n3 with gres:gpu:t4:1", x, gres, err, e.ID)
	}
	parentEnd, _ := time.ParseInLocation(slurmcli.TimeLayout, e.EndTime, time.Local)
	xEnd, err := time.ParseInLocation(slurmcli.TimeLayout, x.EndTime, time.Local)
	if err != nil || xEnd.After(parentEnd) {
		t.Errorf("extra job ends %s, after its parent (%s)", x.EndTime, e.EndTime)
	}
	coordinator, _ := os.ReadFile(filepath.Join(rdv, "coordinator"))
	want := "joined " + x.ID + " " + strings.TrimSpace(string(coordinator))
	// One worker task per lent GPU, each on its own GPU. The deadline covers
	// slurmd's launch, not the daemon: 2c418d0's clean-clone CI saw 22.05's
	// slurmd launch the running extra job's batch script 10.3 s after its
	// allocation while the suite held both cores.
	gpus, _ := x.GPUs()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d join lines of extra job %s (one per lent GPU)", gpus, x.ID), func() bool {
		b, _ := os.ReadFile(filepath.Join(rdv, "workers.log"))
		return strings.Count(string(b), want+"\n") == gpus
	})
}

// A d2 job's owner excluded the v100 nodes (-x n1,n2): its extra jobs take
// t4s of n3 and n4 up to its maximum (4 nodes × 1 GPU) and never go onto n1
// or n2, which a d2 job without --exclude takes first (a tester's finding
// on this lab: they did).
func TestAnElasticJobIsNeverGrownOntoNodesItsOwnerExcluded(t *testing.T) {
	l := slurmlab.Require(t)
	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2", "n3", "n4"}}
	startDaemon(t, l, s, "backfilld")
	e, _ := submitElastic(t, l, "es-req min=1 max=4 lw=16 d2", "-w", "n3", "-x", "n1,n2", "--gres=gpu:1", "-t", "5")
	cancelExtrasAtEnd(t, l, e.ID)
	waitFor(t, 20*pollInterval, "extra jobs of "+e.ID+" on 3 t4 GPUs of n3 and n4", func() bool {
		gpus := 0
		for _, x := range extrasOf(t, l, e.ID) {
			if x.NodeList == "n1" || x.NodeList == "n2" || strings.Contains(x.TRESPerNode, "v100") {
				t.Fatalf("extra job %s of %s on %s (%s): its owner excluded n1 and n2", x.ID, e.ID, x.NodeList, x.TRESPerNode)
			}
			n, _ := x.GPUs()
			gpus += n
		}
		return gpus == 3
	})
}

func TestRigidJobStartsNoLaterThanSlurmPlannedBecauseExtraJobsEndInTime(t *testing.T) {
	t.Parallel()
	l := slurmlab.Require(t)
	ctx := context.Background()
	// nobody's held job named with 0x1F (issue 8) is listed all along: it
	// must not stop the grow nor the shrink before the reservation.
	submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 120\n", "--hold", "-J", "bad\x1fname", "-t", "3")
	// n2: a rigid job holds 2 GPUs for 45 s (time limit 1 min); job E holds
	// all of n1. The daemon (managing n1, n2) lends n2's 2 idle GPUs to E.
	blocker := l.Submit(t, "#!/bin/sh\nsleep 45\n", "-w", "n2", "--gres=gpu:v100:2", "-t", "1")
	if _, err := l.WaitState(ctx, blocker, 30*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2"}}
	d := startDaemon(t, l, s, "backfilld")
	e, rdv := submitElastic(t, l, "es-req min=1 max=2 lw=6 d1", "-w", "n1", "--gres=gpu:v100:4", "-t", "5")
	cancelExtrasAtEnd(t, l, e.ID)
	waitFor(t, 10*time.Second, "an extra job of "+e.ID, func() bool { return len(extrasOf(t, l, e.ID)) > 0 })
	x := extrasOf(t, l, e.ID)[0]
	if _, err := l.WaitState(ctx, x.ID, 20*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	// Now a rigid job needs all of n2: Slurm plans it at the blocker's time limit.
	rigid := l.Submit(t, "#!/bin/sh\nsleep 2\n", "-w", "n2", "--gres=gpu:v100:4", "-t", "1")
	var planned time.Time
	waitFor(t, 10*time.Second, "Slurm's planned start of job "+rigid, func() bool {
		j, err := l.CLI.Job(ctx, rigid)
		if err != nil || j.State != "PENDING" || j.SchedNodes == "" {
			return false
		}
		planned, _, _ = j.Start(time.Local)
		return !planned.IsZero()
	})
	t.Logf("rigid job %s planned at %s on n2", rigid, planned.Format(time.TimeOnly))
	r, err := l.WaitState(ctx, rigid, time.Until(planned)+20*time.Second, "RUNNING", "COMPLETED")
	if err != nil {
		t.Fatal(err)
	}
	started, _, _ := r.Start(time.Local)
	if started.After(planned) {
		t.Errorf("rigid job started at %s, after Slurm's planned %s", started.Format(time.TimeOnly), planned.Format(time.TimeOnly))
	}
	xs, err := l.CLI.Job(ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if xs.State != "COMPLETED" {
		t.Errorf("extra job %s ended %s, want COMPLETED (SIGTERM, worker left with 0), not preempted", x.ID, xs.State)
	}
	ended, _ := time.ParseInLocation(slurmcli.TimeLayout, xs.EndTime, time.Local)
	if !ended.Before(planned.Add(-20 * time.Second)) {
		t.Errorf("extra job ended at %s, not safety_margin (20 s) before the planned start %s", xs.EndTime, planned.Format(time.TimeOnly))
	}
	if b, _ := os.ReadFile(filepath.Join(rdv, "workers.log")); !strings.Contains(string(b), "left "+x.ID) {
		t.Errorf("worker of %s did not see SIGTERM; workers.log:\n%s", x.ID, b)
	}
	d.stop(syscall.SIGTERM)
	if n := countDecisions(t, s, "signal"); n == 0 {
		t.Error("the daemon recorded no signal decision")
	}
}

func TestSIGKILLedDaemonRestartsWithoutOrphansOrWronglyShrunkJobs(t *testing.T) {
	l := slurmlab.Require(t)
	s := settings{dir: t.TempDir(), nodes: []string{"n4"}}
	e, _ := submitElastic(t, l, "es-req min=1 max=3 lw=4 d1", "-w", "n4", "--gres=gpu:t4:1", "-t", "5")
	cancelExtrasAtEnd(t, l, e.ID)
	// 1. Kill the daemon with SIGKILL right after its first submission, in
	// the middle of its cycles (the second grow may be in flight).
	d1 := startDaemon(t, l, s, "first")
	waitFor(t, 10*time.Second, "an extra job of "+e.ID, func() bool { return len(extrasOf(t, l, e.ID)) > 0 })
	waitCycles(t, d1, countLog(t, d1.log, "cycle done")+1, 10*time.Second) // the cycle after the first grow
	d1.stop(syscall.SIGKILL)
	before := extrasOf(t, l, e.ID)
	// 2. Restart while the job runs: every extra job is kept (recorded or
	// adopted), none is cancelled.
	d2 := startDaemon(t, l, s, "second")
	waitCycles(t, d2, 3, 20*time.Second)
	d2.stop(syscall.SIGKILL)
	db, err := backfillstore.Open(filepath.Join(s.dir, "backfill.db"))
	if err != nil {
		t.Fatal(err)
	}
	active, err := db.ActiveExtras(context.Background())
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, a := range active {
		recorded[a.ID] = true
	}
	for _, x := range before {
		j, err := l.CLI.Job(context.Background(), x.ID)
		if err != nil || (j.State != "RUNNING" && j.State != "PENDING") {
			t.Errorf("extra job %s of running job %s is %s after the restart (%v): shrunk by mistake", x.ID, e.ID, j.State, err)
		}
		if !recorded[x.ID] {
			t.Errorf("extra job %s is not in the database after the restart (recorded: %v)", x.ID, recorded)
		}
	}
	// 3. The job ends while no daemon runs; the next daemon cancels its
	// extra jobs: no orphan is left.
	if _, err := l.CLI.Output(context.Background(), "scancel", e.ID); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, l, s, "third")
	waitFor(t, 3*pollInterval+2*time.Second, "no extra job of "+e.ID+" left", func() bool { return len(extrasOf(t, l, e.ID)) == 0 })
	t.Logf("%d extra jobs before the restart; all gone after the parent ended", len(before))
}

func TestUnreachableSlurmctldIsReportedAndProbedEveryPollIntervalKeepingState(t *testing.T) {
	t.Parallel()
	l := slurmlab.Require(t)
	s := settings{dir: t.TempDir(), nodes: []string{"n1"}}
	// A copy of the lab's slurm.conf whose controller port has nothing listening.
	conf, err := os.ReadFile(l.Conf)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(conf), "\n") {
		if strings.HasPrefix(line, "SlurmctldPort=") {
			line = "SlurmctldPort=1"
		}
		lines = append(lines, line)
	}
	s.conf = filepath.Join(s.dir, "slurm.conf")
	if err := os.WriteFile(s.conf, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := backfillstore.Open(filepath.Join(s.dir, "backfill.db"))
	if err != nil {
		t.Fatal(err)
	}
	kept := backfillstore.ExtraJob{ID: "999999", Parent: "999998", Node: "n1", GPUs: 1, Submitted: time.Now(), End: time.Now().Add(time.Hour)}
	if err := db.RecordExtra(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	db.Close()
	d := startDaemon(t, l, s, "backfilld")
	waitFor(t, 30*time.Second, "5 probes of the unreachable slurmctld", func() bool { return countLog(t, d.log, "slurmctld still unreachable") >= 5 })
	d.stop(syscall.SIGTERM)
	var failed, probes int
	var failedAt, fifthProbeAt time.Time
	for _, line := range logLines(t, d.log) {
		switch line["@message"] {
		case "cycle failed; state kept, retrying":
			failed++
			failedAt = logTime(t, line)
			msg, _ := line["error"].(string)
			if !strings.Contains(msg, "slurmctld is unreachable") {
				t.Errorf("error %q does not say slurmctld is unreachable", msg)
			}
			if line["retry_in"] != "1s" || line["probing"] != true {
				t.Errorf("failed cycle logged retry_in=%v probing=%v, want 1s (the poll interval) and probing", line["retry_in"], line["probing"])
			}
		case "slurmctld still unreachable":
			probes++
			if probes == 5 {
				fifthProbeAt = logTime(t, line)
			}
			if line["retry_in"] != "1s" {
				t.Errorf("probe retry_in=%v, want the 1s poll interval whatever max_backoff is", line["retry_in"])
			}
		}
	}
	// With poll_interval 1s: one failed cycle, then a cheap `scontrol ping`
	// every second (no backoff, so the first good cycle comes one poll
	// interval after slurmctld answers): 5 probes within 12 s of the failure
	// by the daemon's own clock, 5 s of waits and 5 pings (backoff to
	// max_backoff would take 14 s of waits alone; on 24.11 under both
	// halves' load the 5 pings took 3.5 s, the 5th probe 8.5 s after).
	if failed != 1 || probes < 5 {
		t.Errorf("%d failed cycles and %d probes, want 1 and at least 5", failed, probes)
	} else if gap := fifthProbeAt.Sub(failedAt); gap > 12*time.Second {
		t.Errorf("the 5th probe came %v after the failed cycle, want within 12 s: probes back off", gap)
	}
	db, err = backfillstore.Open(filepath.Join(s.dir, "backfill.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if x, err := db.Extra(context.Background(), kept.ID); err != nil || x.State != backfillstore.ExtraSubmitted {
		t.Errorf("recorded extra job after the outage: %+v, %v; want it kept as submitted", x, err)
	}
}

// countLog counts the lines of the daemon log at path whose message is msg.
func countLog(t *testing.T, path, msg string) int {
	t.Helper()
	n := 0
	for _, line := range logLines(t, path) {
		if line["@message"] == msg {
			n++
		}
	}
	return n
}

// waitCycles waits until daemon d has logged n cycles ("cycle done", at
// the debug level the tests' configuration sets) and fails the test when it
// has not after within, or has stopped.
func waitCycles(t *testing.T, d *daemonProc, n int, within time.Duration) {
	t.Helper()
	waitFor(t, within, fmt.Sprintf("%d cycles of the daemon", n), func() bool {
		select {
		case <-d.done:
			t.Fatalf("the daemon stopped after %d of %d cycles", countLog(t, d.log, "cycle done"), n)
		default:
		}
		return countLog(t, d.log, "cycle done") >= n
	})
}

// logTime is the time a daemon log line was written (@timestamp).
func logTime(t *testing.T, line map[string]any) time.Time {
	t.Helper()
	s, _ := line["@timestamp"].(string)
	at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", s)
	if err != nil {
		t.Fatalf("log line %v: @timestamp: %v", line, err)
	}
	return at
}

func logLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func countDecisions(t *testing.T, s settings, kind string) int {
	t.Helper()
	return len(decisionsOfKind(t, s, kind))
}

// decisionsOfKind is the daemon's recorded decisions of kind, oldest first.
func decisionsOfKind(t *testing.T, s settings, kind string) []backfillstore.Decision {
	t.Helper()
	db, err := backfillstore.Open(filepath.Join(s.dir, "backfill.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ds, err := db.Decisions(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []backfillstore.Decision
	for _, d := range ds {
		if d.Kind == kind {
			out = append(out, d)
		}
	}
	return out
}

func TestAUsersJobBorrowingTheExtraCommentIsNeverCancelled(t *testing.T) {
	l := slurmlab.Require(t)
	// The admin's reproduction: a user's job whose comment starts like an
	// extra job's, whose "parent" is long gone, on a managed node.
	id := l.Submit(t, "#!/bin/sh\nsleep 60\n", "-p", "normal", "-w", "n3", "-J", "important-sim", "--comment=es-extra parent=1", "-t", "2")
	t.Cleanup(func() { l.CLI.Output(context.Background(), "scancel", id) })
	if _, err := l.WaitState(context.Background(), id, 30*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	s := settings{dir: t.TempDir(), nodes: []string{"n3"}}
	d := startDaemon(t, l, s, "backfilld")
	waitCycles(t, d, 4, 20*time.Second)
	d.stop(syscall.SIGTERM)
	if j, err := l.CLI.Job(context.Background(), id); err != nil || j.State != "RUNNING" {
		t.Fatalf("job %s is %s (%v) after 4 cycles, want RUNNING: the daemon acted on a job it does not own", id, j.State, err)
	}
	logged := 0
	for _, line := range logLines(t, d.log) {
		if msg, _ := line["@message"].(string); strings.HasPrefix(msg, "leaving job alone") && line["extra_id"] == id {
			logged++
		}
	}
	if logged != 1 {
		t.Errorf("job %s logged %d times as left alone, want once", id, logged)
	}
}
