package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

const elasticComment = "es-req min=1 max=3 lw=4 d1"

// testDaemon is a daemon over a fake Slurm with a movable clock.
type testDaemon struct {
	*Daemon
	fake *fakeSlurm
	db   *backfillstore.DB
	now  time.Time
}

func (td *testDaemon) advance(d time.Duration) {
	td.now = td.now.Add(d)
	td.fake.set(func() { td.fake.now = td.now })
}

func (td *testDaemon) cycle(t testing.TB) Report {
	t.Helper()
	r, err := td.Cycle(context.Background())
	if err != nil {
		t.Fatalf("cycle: %v", err)
	}
	return r
}

func (td *testDaemon) active(t *testing.T) []backfillstore.ExtraJob {
	t.Helper()
	xs, err := td.db.ActiveExtras(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return xs
}

// newTestDaemon starts at a whole minute so time limits are easy to read.
func newTestDaemon(t testing.TB, extraTOML string) *testDaemon {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)
	fake := newFake(now)
	dir := t.TempDir()
	cfg, err := config.Parse(`
poll_interval = "2s"
grace_period = "10s"
safety_margin = "60s"
min_lend = "2m"
max_lend = "1h"
pending_timeout = "30s"
metrics_address = "off"
state_db = "` + filepath.Join(dir, "backfill.db") + `"
` + extraTOML)
	if err != nil {
		t.Fatal(err)
	}
	return newTestDaemonWith(t, fake, cfg)
}

func newTestDaemonWith(t testing.TB, fake *fakeSlurm, cfg *config.Config) *testDaemon {
	t.Helper()
	db, err := backfillstore.Open(cfg.StateDB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	td := &testDaemon{fake: fake, db: db, now: fake.now}
	d, err := New(Options{Config: cfg, DB: db, Slurm: fake.runner(), Now: func() time.Time { return td.now }, UserID: fake.userID,
		Logger:   hclog.New(&hclog.LoggerOptions{Output: io.Discard}),
		Actuator: &SlurmActuator{Slurm: fake.runner()}})
	if err != nil {
		t.Fatal(err)
	}
	td.Daemon = d
	return td
}

// argValue returns the value of --key=VALUE in a command line; --wrap,
// always last, takes the rest of the line.
func argValue(cmd, key string) string {
	if key == "wrap" {
		_, v, _ := strings.Cut(cmd, " --wrap=")
		return v
	}
	for _, f := range strings.Split(cmd, " --") {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

func TestAnElasticJobGrowsIntoIdleGPUsWithAnExtraJobThatFollowsTheContract(t *testing.T) {
	td := newTestDaemon(t, "")
	work := rendezvous(t, "10")
	td.fake.running("10", elasticComment, "n1", 1, 30*time.Minute, work)
	var intents []backfillstore.Intent // as sbatch runs: what a daemon killed now would adopt the job from
	td.fake.onSbatch = func() {
		var err error
		if intents, err = td.db.Intents(context.Background()); err != nil {
			t.Error(err)
		}
	}
	r := td.cycle(t)
	subs := td.fake.commands("sbatch")
	if len(subs) != 1 || len(r.Submitted) != 1 {
		t.Fatalf("submitted %v (report %v), want one extra job", subs, r.Submitted)
	}
	cmd := subs[0]
	dir := filepath.Join(work, ".easyscale", "10")
	for key, want := range map[string]string{
		"job-name": "es-extra-10", "comment": "es-extra parent=10", "partition": "low", "nodes": "1", "ntasks": "1",
		"account": "proj", "chdir": work, "output": filepath.Join(dir, "extra-%j.out"),
		"wrap": `srun easyscale worker --join "$(cat ` + dir + `/coordinator)" --token-file ` + dir + `/token`,
	} {
		if got := argValue(cmd, key); got != want {
			t.Errorf("--%s=%q, want %q in %s", key, got, want, cmd)
		}
	}
	if !strings.Contains(cmd, "--no-requeue") {
		t.Errorf("extra job is requeueable: %s", cmd)
	}
	node, gres := argValue(cmd, "nodelist"), argValue(cmd, "gres")
	if !(node == "n1" || node == "n2") || gres != "gpu:v100:1" {
		t.Errorf("extra job on %s with %s, want one v100 on n1 or n2 (doubling 1 GPU gives 1 more)", node, gres)
	}
	// The parent ends in 30 minutes, before max_lend (1h): the extra job must end
	// safety_margin (60 s) before it, since its limit runs from its start.
	if got := argValue(cmd, "time"); got != "29" {
		t.Errorf("--time=%s, want 29 (the parent's remaining time less the safety margin, not max_lend)", got)
	}
	xs := td.active(t)
	if len(xs) != 1 || xs[0].ID != r.Submitted[0] || xs[0].Parent != "10" || xs[0].Node != node || xs[0].GPUs != 1 || xs[0].User != "alice" ||
		xs[0].Lent != 29*time.Minute {
		t.Fatalf("recorded extras %+v, want the submitted one, lent for 29 minutes", xs)
	}
	if len(intents) != 1 || intents[0].Parent != "10" || intents[0].Node != node || intents[0].Lent != 29*time.Minute || intents[0].GPUs != 1 {
		t.Errorf("submission intents as sbatch ran %+v, want one for job 10 on %s lending 1 GPU for 29 minutes", intents, node)
	}
	if in, err := td.db.Intents(context.Background()); err != nil || len(in) != 0 {
		t.Errorf("submission intents %+v, %v; want the one written before sbatch deleted once the job is recorded", in, err)
	}
	ds, _ := td.db.Decisions(context.Background(), 0, 0)
	if len(ds) != 1 || ds[0].Kind != "grow" || ds[0].Job != "10" {
		t.Errorf("decisions %+v, want one grow of job 10", ds)
	}
	if got := value(td.Metrics().Grows); got != 1 {
		t.Errorf("grows_total %v, want 1", got)
	}
}

// TestAJobGrowsBackToItsMaximumAtOnceWhenNothingIsQueued: with no pending
// job, one cycle grows a 1-GPU job to its maximum of 4 (issue 17: grow-back
// to idle GPUs at once); with a pending job it at most doubles.
func TestAJobGrowsBackToItsMaximumAtOnceWhenNothingIsQueued(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending bool
		want    int
	}{{"nothing queued", false, 3}, {"a job queued", true, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, `nodes = ["n1"]`)
			td.fake.running("10", "es-req min=1 max=4 lw=8 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
			if tc.pending {
				td.fake.pending("20", "", 1, time.Time{})
			}
			td.cycle(t)
			got := 0
			for _, x := range td.active(t) {
				got += x.GPUs
			}
			if got != tc.want {
				t.Errorf("lent %d GPUs in one cycle, want %d", got, tc.want)
			}
		})
	}
}

func TestGrowthStopsAtTheRequestedMaximumOfPhysicalWorkers(t *testing.T) {
	tests := []struct {
		name       string
		comment    string
		cycles     int
		wantExtras int
	}{
		{"max=3 gives two extra jobs over three cycles", "es-req min=1 max=3 lw=8 d1", 3, 2},
		{"max=2 gives one extra job however many cycles run", "es-req min=1 max=2 lw=2 d1", 4, 1},
		{"max=1 never grows", "es-req min=1 max=1 lw=4 d1", 2, 0},
		{"a request without a node range never grows", "es-req lw=4 d1", 2, 0},
		{"a job that declared no logical workers runs as many as it started with and never grows", "es-req min=1 max=4 d1", 3, 0},
		{"the logical workers its runtime reports bound its growth", "es step=3/100 workers=1/2 d1 req=1-2", 3, 1},
		{"a job that is not EasyScale's never grows", "nightly build", 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			td.fake.running("10", tc.comment, "n1", 1, time.Hour, rendezvous(t, "10"))
			for range tc.cycles {
				td.cycle(t)
				td.advance(2 * time.Second)
			}
			if got := len(td.fake.commands("sbatch")); got != tc.wantExtras {
				t.Fatalf("%d extra jobs submitted, want %d", got, tc.wantExtras)
			}
		})
	}
}

func TestAJobWhoseCoordinatorIsNotUpIsNotGrown(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, t.TempDir())
	td.cycle(t)
	if subs := td.fake.commands("sbatch"); len(subs) != 0 {
		t.Fatalf("grew a job without a rendezvous directory: %v", subs)
	}
}

// TestAJobWhoseOwnerPrintsAsAStandInIsNotGrown: when the name service does
// not resolve a job's owner, squeue 24.11 prints the uid as the name and
// 22.05 prints "nobody"; UserId is the owner's. No extra job is lent to
// such a job (it would be submitted as the printed name), and so no record
// is made: the printed name must give squeue's UserId. The real account
// nobody, whose name gives its uid, grows (the labs' tests run as it); a
// stand-in "nobody" did on 22.05 when the real nobody had planted
// rendezvous files in the owner's shared work directory (a helper's
// finding: nobody's worker joined the job).
func TestAJobWhoseOwnerPrintsAsAStandInIsNotGrown(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		realNobody bool
		grow       bool
	}{
		{"24.11's stand-in", "4102", false, false},
		{"22.05's stand-in, the files the real nobody's", "nobody", false, false},
		{"the real nobody", "nobody", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			var logs bytes.Buffer
			td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
			j := td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
			// The rendezvous files (written by this process) are the real
			// nobody's: the fake's name service gives it this process's uid.
			td.fake.shareFilesWith("nobody")
			td.fake.set(func() {
				j.user = tc.user
				if !tc.realNobody {
					j.uid = "4102" // the owner, whose name does not resolve
				}
			})
			td.cycle(t)
			if subs := td.fake.commands("sbatch"); (len(subs) > 0) != tc.grow {
				t.Fatalf("owner printed as %q: extra jobs %v, want grown %v", tc.user, subs, tc.grow)
			}
			// Why it is not grown is logged once, not every cycle, and
			// that it is ready once the name resolves again.
			td.advance(2 * time.Second)
			td.cycle(t)
			want := 1
			if tc.grow {
				want = 0
			}
			if n := countLogs(t, &logs, "an elastic job is not ready", "10"); n != want {
				t.Errorf("%d not-ready messages for job 10 in 2 cycles, want %d; log:\n%s", n, want, logs.String())
			}
			td.fake.set(func() { j.user, j.uid = "nobody", "" }) // the name resolves: its uid, whose files they are
			td.advance(2 * time.Second)
			td.cycle(t)
			if n := countLogs(t, &logs, "an elastic job is ready again", "10"); n != want {
				t.Errorf("%d ready-again messages for job 10, want %d", n, want)
			}
		})
	}
}

func TestAnExtraJobNeverOutlivesItsParentNorGetsLessThanMinLend(t *testing.T) {
	tests := []struct {
		name     string
		limit    time.Duration
		wantTime string // "" = no extra job
	}{
		// The extra job's limit runs from its start, after now: it ends
		// safety_margin (60 s) before its parent (the lab saw an extra job
		// capped at the parent's end exactly outlive it by its 0.4 s start).
		{"a parent ending in 5 minutes gives a 4-minute extra job", 5 * time.Minute, "4"},
		{"a parent ending in 210 s gives a 2-minute extra job (whole minutes, rounded down)", 210 * time.Second, "2"},
		{"a parent ending in 150 s gives nothing (below min_lend after the margin)", 150 * time.Second, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			td.fake.running("10", elasticComment, "n1", 1, tc.limit, rendezvous(t, "10"))
			td.cycle(t)
			subs := td.fake.commands("sbatch")
			if tc.wantTime == "" {
				if len(subs) != 0 {
					t.Fatalf("submitted %v, want nothing", subs)
				}
				return
			}
			if len(subs) != 1 || argValue(subs[0], "time") != tc.wantTime {
				t.Fatalf("submitted %v, want one extra job with --time=%s", subs, tc.wantTime)
			}
		})
	}
}

// shrinkSetup: job 10 holds all of n1; the daemon manages n1 and n2 only, so
// its extra jobs land on n2; then job 50 is planned on n2 in 5 minutes.
func shrinkSetup(t *testing.T) (*testDaemon, []string) {
	td := newTestDaemon(t, `nodes = ["n1", "n2"]`)
	td.fake.running("10", "es-req min=1 max=2 lw=8 d1", "n1", 4, time.Hour, rendezvous(t, "10"))
	r := td.cycle(t)
	if len(r.Submitted) == 0 {
		t.Fatal("no extra job submitted")
	}
	for _, id := range r.Submitted {
		if n := td.fake.job(id).reqNode; n != "n2" {
			t.Fatalf("extra job %s on %s, want n2", id, n)
		}
	}
	td.fake.pending("50", "n2", 4, td.now.Add(5*time.Minute))
	return td, r.Submitted
}

func TestExtraJobsAreSignalledThenCancelledBeforeAReservedStart(t *testing.T) {
	td, extras := shrinkSetup(t)
	id := extras[0]
	reserved := td.fake.job("50").start
	deadline := reserved.Add(-time.Minute) // safety margin 60s
	var signalled, cancelled time.Time
	// Cycles every poll interval (2s) until the reserved start.
	for td.now.Before(reserved) {
		td.advance(2 * time.Second)
		r := td.cycle(t)
		if got := len(td.fake.commands("sbatch")); got != len(extras) {
			t.Fatalf("at %v: grew again while a reservation needs the GPUs (%d extra jobs)", td.now, got)
		}
		for _, c := range td.fake.commands("scancel") {
			switch {
			case c == "scancel --signal=TERM "+id && signalled.IsZero():
				signalled = td.now
				if !slices.Contains(r.Signalled, id) {
					t.Errorf("report signalled %v, want %s", r.Signalled, id)
				}
				if x, _ := td.db.Extra(context.Background(), id); x.State != backfillstore.ExtraSignalled || !x.Signalled.Equal(td.now) {
					t.Errorf("record %+v, want signalled at %v", x, td.now)
				}
			case c == "scancel "+id && cancelled.IsZero():
				cancelled = td.now
			}
		}
	}
	grace, poll := 10*time.Second, 2*time.Second
	switch {
	case signalled.IsZero() || cancelled.IsZero():
		t.Fatalf("signalled at %v, cancelled at %v: want both before %v", signalled, cancelled, deadline)
	case signalled.Before(deadline.Add(-grace - 3*poll)):
		t.Errorf("signalled at %v, earlier than needed for a deadline at %v", signalled, deadline)
	case cancelled.Sub(signalled) < grace:
		t.Errorf("cancelled %v after the signal, before the %v grace period", cancelled.Sub(signalled), grace)
	case !cancelled.Before(deadline):
		t.Errorf("cancelled at %v, not before the deadline %v", cancelled, deadline)
	}
	if x, _ := td.db.Extra(context.Background(), id); x.State != backfillstore.ExtraEnded || x.Reason != "CANCELLED" {
		t.Errorf("record %+v, want ended CANCELLED", x)
	}
	if got := value(td.Metrics().Shrinks.WithLabelValues("signal")); got != float64(len(extras)) {
		t.Errorf("shrinks_total{action=signal} %v, want %d", got, len(extras))
	}
}

func TestAReservationAlreadyDueSignalsAtOnceAndCancelsAtTheDeadline(t *testing.T) {
	td, extras := shrinkSetup(t)
	j50 := td.fake.job("50")
	td.fake.set(func() { j50.start = td.now.Add(30 * time.Second) }) // deadline passed already
	td.cycle(t)
	if got := td.fake.commands("scancel"); len(got) != len(extras) || !strings.HasPrefix(got[0], "scancel --signal=TERM") {
		t.Fatalf("%v, want SIGTERM to %v", got, extras)
	}
	td.advance(2 * time.Second) // the deadline (now, since it is overdue) has come: no waiting for the grace period
	td.cycle(t)
	if got := td.fake.commands("scancel "); len(got) < 2*len(extras) {
		t.Fatalf("%v, want scancel after the signal", got)
	}
}

func TestAPendingExtraJobIsCountedAndCancelledAfterPendingTimeout(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.startPending = true
	td.fake.running("10", "es-req min=1 max=2 lw=4 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
	first := td.cycle(t)
	td.advance(5 * time.Second)
	td.cycle(t)
	subs := td.fake.commands("sbatch")
	if len(subs) != 1 {
		t.Fatalf("submitted %d extra jobs, want 1 (the pending one counts)", len(subs))
	}
	td.advance(30 * time.Second)
	td.cycle(t)
	id := first.Submitted[0]
	if got := td.fake.commands("scancel"); len(got) != 1 || got[0] != "scancel "+id {
		t.Fatalf("%v, want scancel %s", got, id)
	}
	if x, _ := td.db.Extra(context.Background(), id); x.State != backfillstore.ExtraEnded || !strings.Contains(x.Reason, "pending_timeout") {
		t.Errorf("record %+v, want ended for pending_timeout", x)
	}
}

func TestExtraJobsOfAParentThatEndedAreCancelled(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	r := td.cycle(t)
	j10 := td.fake.job("10")
	td.fake.set(func() { j10.state = "COMPLETED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	if got := td.fake.commands("scancel"); len(got) != 1 || got[0] != "scancel "+r.Submitted[0] {
		t.Fatalf("%v, want scancel of %v", got, r.Submitted)
	}
	if x, _ := td.db.Extra(context.Background(), r.Submitted[0]); x.State != backfillstore.ExtraEnded || !strings.Contains(x.Reason, "parent job 10") {
		t.Errorf("record %+v, want ended because parent 10 is not running", x)
	}
}

func TestReconciliationAfterARestart(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the fake cluster and the database as a killed
		// daemon left them; it returns the extra job's id.
		setup       func(t *testing.T, td *testDaemon) string
		wantScancel string // "" none, "hard", "term"
		wantState   backfillstore.ExtraState
		wantReason  string
	}{
		{"an unrecorded running extra job of its submission intent is adopted, not cancelled",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				intend(t, td, "10", "n2", td.now.Add(-time.Second))
				return td.fake.extra("11", "10", "n2", 1, 20*time.Minute).id
			}, "", backfillstore.ExtraSubmitted, "adopted"},
		{"an unrecorded extra job as its submission intent lent it is adopted, not cancelled",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				intendLent(t, td, "10", "n2", td.now.Add(-time.Second), 20*time.Minute, 1)
				return td.fake.extra("11", "10", "n2", 1, 20*time.Minute).id
			}, "", backfillstore.ExtraSubmitted, "adopted"},
		// While the daemon was down between sbatch and its record, the
		// job's owner raised its time limit or its GPUs (scontrol update,
		// helper 69's attack on recorded jobs): adopted, it is held to what
		// its intent lent.
		{"an unrecorded extra job whose owner raised its time limit before the restart is adopted and cancelled",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				intendLent(t, td, "10", "n2", td.now.Add(-time.Second), 20*time.Minute, 1)
				return td.fake.extra("11", "10", "n2", 1, 48*time.Hour).id
			}, "hard", backfillstore.ExtraEnded, "time limit"},
		{"an unrecorded pending extra job whose owner raised its GPUs before the restart is adopted and cancelled",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				intendLent(t, td, "10", "n2", td.now.Add(-time.Second), 20*time.Minute, 1)
				return td.fake.extra("11", "10", "", 2, 20*time.Minute).id
			}, "hard", backfillstore.ExtraEnded, "2 GPUs (lent 1"},
		{"an unrecorded extra-form job without a submission intent is neither adopted nor cancelled",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				return td.fake.extra("11", "10", "n2", 1, 20*time.Minute).id
			}, "", "", ""},
		{"an unrecorded extra job of its submission intent whose parent is gone is adopted and cancelled",
			func(t *testing.T, td *testDaemon) string {
				intend(t, td, "10", "n2", td.now.Add(-time.Second))
				return td.fake.extra("11", "10", "n2", 1, 20*time.Minute).id
			}, "hard", backfillstore.ExtraEnded, "parent job 10"},
		{"an unrecorded extra job whose parent is gone and that no intent matches is left alone",
			func(t *testing.T, td *testDaemon) string {
				return td.fake.extra("11", "10", "n2", 1, 20*time.Minute).id
			}, "", "", ""},
		{"an unrecorded pending extra job of its submission intent is adopted and counted",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				intend(t, td, "10", "n2", td.now.Add(-time.Second))
				return td.fake.extra("11", "10", "", 0, 20*time.Minute).id
			}, "", backfillstore.ExtraSubmitted, "adopted"},
		{"an extra job signalled before the restart is cancelled once its grace period is over",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
				// submitted and started a minute ago: it ends when its record says
				td.fake.set(func() { j.start, j.end = j.start.Add(-time.Minute), j.end.Add(-time.Minute) })
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, State: backfillstore.ExtraSignalled,
					Submitted: td.now.Add(-time.Minute), End: td.now.Add(19 * time.Minute), Signalled: td.now.Add(-20 * time.Second)})
				return j.id
			}, "hard", backfillstore.ExtraSignalled, ""},
		{"a recorded extra job Slurm shows PREEMPTED is marked ended PREEMPTED",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
				td.fake.set(func() { j.state = "PREEMPTED" })
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute)})
				return j.id
			}, "", backfillstore.ExtraEnded, "PREEMPTED"},
		{"a recorded extra job Slurm no longer lists is marked gone",
			func(t *testing.T, td *testDaemon) string {
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute)})
				return "11"
			}, "", backfillstore.ExtraEnded, "gone"},
		{"a recorded extra job its owner moved to another account is cancelled",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				j := td.fake.extra("11", "10", "", 1, 20*time.Minute)
				td.fake.set(func() { j.account = "other" })
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute),
					Lent: 20 * time.Minute})
				return j.id
			}, "hard", backfillstore.ExtraEnded, `account proj into "other"`},
		// A helper's way round the account check: the parent's comment
		// changed so that it no longer reads as an elastic job.
		{"a recorded extra job moved to another account is cancelled though its parent no longer reads as elastic",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", "plain", "n1", 1, time.Hour, rendezvous(t, "10"))
				j := td.fake.extra("11", "10", "", 1, 20*time.Minute)
				td.fake.set(func() { j.account = "other" })
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute),
					Lent: 20 * time.Minute})
				return j.id
			}, "hard", backfillstore.ExtraEnded, `account proj into "other"`},
		{"a recorded running extra job of a running parent is kept",
			func(t *testing.T, td *testDaemon) string {
				td.fake.running("10", "es-req min=1 max=2 lw=4 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
				td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute)})
				return "11"
			}, "", backfillstore.ExtraSubmitted, ""},
	}
	// An LDAP or sssd outage: Slurm prints a stand-in for a name it cannot
	// resolve (24.11 the uid, 22.05 "nobody"); squeue's UserId is still the
	// owner's. A record written before schema version 10 has no uid: the
	// job is still the daemon's, so its record must not end as for a
	// reused id (the job would run on unmanaged), and it waits. A record
	// with the owner's uid is compared by it and acted on as usual. A
	// record of the real account nobody is not matched by another user's
	// job printed as 22.05's stand-in nobody (a helper's finding: with a
	// reused id and an outage at once, that job was cancelled).
	for _, standIn := range []string{"1000", "nobody"} {
		for _, withUID := range []bool{false, true} {
			tc := struct {
				name        string
				setup       func(t *testing.T, td *testDaemon) string
				wantScancel string
				wantState   backfillstore.ExtraState
				wantReason  string
			}{"a recorded extra job without its owner's uid, listed under the stand-in " + standIn + ", is left as it is, its record kept",
				func(t *testing.T, td *testDaemon) string {
					td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
					j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
					td.fake.set(func() { j.user, j.uid, j.account = standIn, fakeUID("alice"), "other" })
					td.fake.unresolve("alice") // the outage that makes squeue print a stand-in
					x := backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute),
						Lent: 20 * time.Minute}
					if withUID {
						x.UID = fakeUID("alice")
					}
					record(t, td, x)
					return j.id
				}, "", backfillstore.ExtraSubmitted, ""}
			if withUID {
				tc.name = "a recorded extra job with its owner's uid, listed under the stand-in " + standIn + ", is reconciled: moved to another account, it is cancelled"
				tc.wantScancel, tc.wantState, tc.wantReason = "hard", backfillstore.ExtraEnded, `account proj into "other"`
			}
			tests = append(tests, tc)
		}
	}
	// A record of the real nobody, with its uid or written before schema 10
	// without one (compared by the uid nobody's name gives), is not matched
	// by another user's job under its id that 22.05 prints as the stand-in
	// nobody (helpers' findings: with a reused id and an outage at once,
	// that job was cancelled).
	for _, uid := range []string{"65534", ""} {
		tests = append(tests, struct {
			name        string
			setup       func(t *testing.T, td *testDaemon) string
			wantScancel string
			wantState   backfillstore.ExtraState
			wantReason  string
		}{fmt.Sprintf("a record of the real nobody (uid %q) does not match another user's job under its id printed as the stand-in nobody: the job is left alone", uid),
			func(t *testing.T, td *testDaemon) string {
				j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute) // its parent is gone: the daemon's own would be cancelled
				td.fake.set(func() { j.user, j.uid = "nobody", "4242" })
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", User: "nobody", UID: uid, Node: "n2", GPUs: 1,
					Submitted: td.now.Add(-time.Hour), End: td.now.Add(-40 * time.Minute), Lent: 20 * time.Minute})
				return j.id
			}, "", backfillstore.ExtraEnded, "gone"})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			id := tc.setup(t, td)
			td.cycle(t)
			got := td.fake.commands("scancel")
			switch tc.wantScancel {
			case "":
				if len(got) != 0 {
					t.Errorf("scancel %v, want none", got)
				}
				if tc.wantState == "" && td.fake.job(id).state != "RUNNING" && td.fake.job(id).state != "PENDING" {
					t.Errorf("job %s is %s, want it left alone", id, td.fake.job(id).state)
				}
			case "hard":
				if !slices.Contains(got, "scancel "+id) {
					t.Errorf("scancel %v, want scancel %s", got, id)
				}
			}
			x, err := td.db.Extra(context.Background(), id)
			if tc.wantState == "" {
				if err == nil {
					t.Errorf("record %+v, want none: the daemon did not submit it", x)
				}
				return
			}
			if err != nil || x.State != tc.wantState || !strings.Contains(x.Reason, tc.wantReason) {
				t.Errorf("record %+v (%v), want state %s with reason containing %q", x, err, tc.wantState, tc.wantReason)
			}
		})
	}
}

// record writes x as the daemon would have recorded its submission: user
// alice (the fake's), partition low, and the extra job form of its parent
// unless x says otherwise.
func record(t *testing.T, td *testDaemon, x backfillstore.ExtraJob) {
	t.Helper()
	if x.User == "" {
		x.User = "alice"
	}
	if x.Partition == "" {
		x.Partition = "low"
	}
	if x.Name == "" {
		x.Name, x.Comment = ExtraJobName(x.Parent), ExtraComment(x.Parent)
	}
	if err := td.db.RecordExtra(context.Background(), x); err != nil {
		t.Fatal(err)
	}
}

// intend writes the submission intent the daemon writes before sbatch, for
// an extra job of parent on node at time at (user alice, partition low),
// as written before schema version 9: no time lent, no GPUs.
func intend(t *testing.T, td *testDaemon, parent, node string, at time.Time) {
	t.Helper()
	intendLent(t, td, parent, node, at, 0, 0)
}

// intendLent is intend for a lend of gpus GPUs for lent.
func intendLent(t *testing.T, td *testDaemon, parent, node string, at time.Time, lent time.Duration, gpus int) {
	t.Helper()
	in := backfillstore.Intent{Parent: parent, User: "alice", Name: ExtraJobName(parent), Comment: ExtraComment(parent),
		Partition: "low", Node: node, Lent: lent, GPUs: gpus, Time: at}
	if _, err := td.db.RecordIntent(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

func TestExtraJobsOfJobsOutsideTheManagedNodesAreLeftAlone(t *testing.T) {
	td := newTestDaemon(t, `nodes = ["n3", "n4"]`)
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
	td.cycle(t)
	if got := td.fake.commands(""); len(got) != 0 {
		t.Fatalf("acted on another daemon's jobs: %v", got)
	}
	if xs := td.active(t); len(xs) != 0 {
		t.Errorf("recorded %+v", xs)
	}
}

func TestUnreachableSlurmctldChangesNothing(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	r := td.cycle(t)
	td.fake.set(func() { td.fake.down = true })
	td.advance(2 * time.Second)
	_, err := td.Cycle(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Fatalf("cycle error %v, want ErrUnreachable with Slurm's message", err)
	}
	if xs := td.active(t); len(xs) != 1 || xs[0].ID != r.Submitted[0] || xs[0].State != backfillstore.ExtraSubmitted {
		t.Errorf("state changed while Slurm was down: %+v", xs)
	}
	if got := value(td.Metrics().SlurmFailures); got != 1 {
		t.Errorf("slurm_failures_total %v, want 1", got)
	}
	td.fake.set(func() { td.fake.down = false })
	td.cycle(t)
	if got := td.fake.commands("scancel"); len(got) != 0 {
		t.Errorf("scancel %v after Slurm came back", got)
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		want     time.Duration
	}{
		{"the first failure waits one poll interval", 1, 2 * time.Second},
		{"the second waits twice that", 2, 4 * time.Second},
		{"the third waits four times", 3, 8 * time.Second},
		{"the fourth reaches the cap", 4, 10 * time.Second},
		{"the hundredth stays at the cap", 100, 10 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Backoff(2*time.Second, 10*time.Second, tc.failures); got != tc.want {
				t.Fatalf("Backoff(2s, 10s, %d) = %v, want %v", tc.failures, got, tc.want)
			}
		})
	}
}

func TestDryRunRecordsDecisionsButSubmitsNothing(t *testing.T) {
	td := newTestDaemon(t, "dry_run = true")
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	td.cycle(t)
	if got := td.fake.commands(""); len(got) != 0 {
		t.Fatalf("dry run ran %v", got)
	}
	ds, _ := td.db.Decisions(context.Background(), 0, 0)
	if len(ds) != 1 || ds[0].Kind != "grow" || !ds[0].DryRun {
		t.Errorf("decisions %+v, want one dry-run grow", ds)
	}
}

func TestAFailedSbatchIsRecordedAndTheCycleGoesOn(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.sbatchFails = "sbatch: error: Batch job submission failed: Invalid partition name specified"
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	td.cycle(t)
	ds, _ := td.db.Decisions(context.Background(), 0, 0)
	if len(ds) != 2 || ds[1].Kind != "grow-failed" || !strings.Contains(ds[1].Detail, "Invalid partition") {
		t.Fatalf("decisions %+v, want grow then grow-failed with sbatch's message", ds)
	}
	if xs := td.active(t); len(xs) != 0 {
		t.Errorf("recorded %+v for a failed submission", xs)
	}
}

func TestRunServesMetricsAndStopsWithTheContext(t *testing.T) {
	td := newTestDaemon(t, "")
	td.cfg.MetricsAddress = "127.0.0.1:0"
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- td.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	// The cycle counts itself ok after its grows: wait for both.
	for value(td.Metrics().Grows) < 1 || value(td.Metrics().Cycles.WithLabelValues("ok")) < 1 || td.MetricsAddr() == nil {
		if time.Now().After(deadline) {
			t.Fatal("no grow and whole cycle within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get("http://" + td.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{"easyscale_backfill_grows_total 1", "easyscale_backfill_gaps_found_total",
		"easyscale_backfill_planning_seconds_bucket", "easyscale_backfill_gpus_lent", "easyscale_backfill_cycles_total{result=\"ok\"}"} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %q", series)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestRunRefusesAMetricsAddressInUse(t *testing.T) {
	td := newTestDaemon(t, "")
	td.cfg.MetricsAddress = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { td.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(5 * time.Second); td.MetricsAddr() == nil; time.Sleep(5 * time.Millisecond) {
		select {
		case <-done:
			t.Fatal("the first daemon stopped before serving metrics")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the first daemon serves no metrics after 5 s")
		}
	}
	td2 := newTestDaemon(t, "")
	td2.cfg.MetricsAddress = td.MetricsAddr().String()
	if err := td2.Run(ctx); err == nil || !strings.Contains(err.Error(), "metrics_address") {
		t.Fatalf("Run = %v, want an error naming metrics_address", err)
	}
}

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		panic(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

func TestOnlyExtraJobsTheDaemonOwnsAreActedOn(t *testing.T) {
	tests := []struct {
		name string
		// setup adds the job under test (id 11) and what it needs.
		setup      func(t *testing.T, td *testDaemon) *fakeJob
		wantCancel bool
	}{
		{"a user's job that only borrows the extra comment is left alone",
			func(t *testing.T, td *testDaemon) *fakeJob {
				j := td.fake.running("11", "es-extra parent=1", "n2", 1, 20*time.Minute, "")
				td.fake.set(func() { j.name, j.user = "important-sim", "bob" })
				return j
			}, false},
		{"an extra-named job outside extra.partition is left alone",
			func(t *testing.T, td *testDaemon) *fakeJob {
				j := td.fake.extra("11", "1", "n2", 1, 20*time.Minute)
				td.fake.set(func() { j.partition = "normal" })
				return j
			}, false},
		{"an extra-named job whose comment has more words is left alone",
			func(t *testing.T, td *testDaemon) *fakeJob {
				j := td.fake.extra("11", "1", "n2", 1, 20*time.Minute)
				td.fake.set(func() { j.comment += " keep" })
				return j
			}, false},
		{"an extra-shaped job of another user than its running parent's is left alone",
			func(t *testing.T, td *testDaemon) *fakeJob {
				td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
				j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
				td.fake.set(func() { j.user = "mallory" })
				return j
			}, false},
		{"an extra-shaped job of another user than its ended parent's is left alone",
			func(t *testing.T, td *testDaemon) *fakeJob {
				p := td.fake.running("10", elasticComment, "n1", 1, time.Hour, "")
				j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
				td.fake.set(func() { p.state, j.user = "COMPLETED", "mallory" })
				return j
			}, false},
		{"an orphan in the exact extra form on a managed node that this daemon did not submit is left alone",
			func(t *testing.T, td *testDaemon) *fakeJob {
				return td.fake.extra("11", "1", "n2", 1, 20*time.Minute)
			}, false},
		{"an orphan of this daemon's submission intent is cancelled",
			func(t *testing.T, td *testDaemon) *fakeJob {
				intend(t, td, "1", "n2", td.now.Add(-time.Second))
				return td.fake.extra("11", "1", "n2", 1, 20*time.Minute)
			}, true},
		{"an orphan whose submission intent names another user is left alone",
			func(t *testing.T, td *testDaemon) *fakeJob {
				intend(t, td, "1", "n2", td.now.Add(-time.Second))
				j := td.fake.extra("11", "1", "n2", 1, 20*time.Minute)
				td.fake.set(func() { j.user = "mallory" })
				return j
			}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			j := tc.setup(t, td)
			for range 3 {
				td.cycle(t)
				td.advance(2 * time.Second)
			}
			cancelled := slices.Contains(td.fake.commands("scancel"), "scancel 11")
			if cancelled != tc.wantCancel {
				t.Fatalf("job %s (name %s, partition %s, user %s, comment %q): cancelled=%v, want %v; scancel calls %v",
					j.id, j.name, j.partition, j.user, j.comment, cancelled, tc.wantCancel, td.fake.commands("scancel"))
			}
			if x, err := td.db.Extra(context.Background(), "11"); !tc.wantCancel && err == nil {
				t.Errorf("recorded (adopted) a job that is not the daemon's: %+v", x)
			}
			if !tc.wantCancel && len(td.noted) != 1 {
				t.Errorf("noted %v, want the job logged as left alone", td.noted)
			}
		})
	}
}

func TestASecondDaemonAdoptsNoExtraJobItDidNotSubmit(t *testing.T) {
	tests := []struct {
		name      string
		nodes     string // the second daemon's nodes
		wantAdopt bool
	}{
		{"the parent in scope but the extra job's node outside it is left alone", `nodes = ["n1"]`, false},
		{"the extra job's node in scope but the parent outside it is left alone", `nodes = ["n2"]`, false},
		{"parent and node both outside the scope are left alone", `nodes = ["n3", "n4"]`, false},
		{"parent and node both inside the scope are left alone (another daemon's submission)", `nodes = ["n1", "n2"]`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, tc.nodes)
			td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
			td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
			r := td.cycle(t)
			if got := slices.Contains(r.Adopted, "11"); got != tc.wantAdopt {
				t.Fatalf("adopted %v, want adopted=%v", r.Adopted, tc.wantAdopt)
			}
			if got := td.fake.commands("scancel"); len(got) != 0 {
				t.Errorf("cancelled %v: another daemon's extra job", got)
			}
		})
	}
}

func TestExtraJobsRunOneWorkerTaskPerLentGPUAndNeverExceedTheMaximum(t *testing.T) {
	tests := []struct {
		name        string
		comment     string
		gpusPerNode int
		wantCap     int // physical workers: own GPUs plus extra tasks
	}{
		{"one GPU, max=4 nodes: at most four workers", "es-req min=1 max=4 lw=8 d1", 1, 4},
		{"one GPU, max=3 nodes: at most three workers", "es-req min=1 max=3 lw=8 d1", 1, 3},
		{"two GPUs per node, max=2 nodes, lw=3: at most three workers", "es-req min=1 max=2 lw=3 d1", 2, 3},
		{"four GPUs per node, max=2 nodes, lw=6: at most six workers", "es-req min=1 max=2 lw=6 d1", 4, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			td.fake.running("10", tc.comment, "n1", tc.gpusPerNode, time.Hour, rendezvous(t, "10"))
			for range 5 {
				td.cycle(t)
				td.advance(2 * time.Second)
			}
			subs := td.fake.commands("sbatch")
			if len(subs) == 0 {
				t.Fatal("no extra job submitted")
			}
			workers := tc.gpusPerNode
			for _, c := range subs {
				gres := strings.Split(argValue(c, "gres"), ":")
				if argValue(c, "ntasks") != gres[len(gres)-1] || argValue(c, "export") != "ALL,SLURM_GPUS_PER_TASK=1" {
					t.Errorf("%s: want --ntasks equal to the lent GPUs and SLURM_GPUS_PER_TASK=1 exported", c)
				}
				n, _ := strconv.Atoi(argValue(c, "ntasks"))
				workers += n
			}
			if workers > tc.wantCap {
				t.Errorf("%d physical workers after %d extra jobs %v, want at most %d", workers, len(subs), subs, tc.wantCap)
			}
		})
	}
}

func TestAJobsExtraJobsSpreadOverIdleNodesInsteadOfStacking(t *testing.T) {
	// Job 10 holds one v100 on n1; n1 has 3 idle v100s, n2 4. The planner
	// fills n1 first; the second extra job must go to the idle n2.
	td := newTestDaemon(t, `gpu_types = ["v100"]`)
	td.fake.running("10", "es-req min=1 max=4 lw=8 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
	for range 2 {
		td.cycle(t)
		td.advance(2 * time.Second)
	}
	subs := td.fake.commands("sbatch")
	if len(subs) != 2 {
		t.Fatalf("submitted %v, want two extra jobs", subs)
	}
	if a, b := argValue(subs[0], "nodelist"), argValue(subs[1], "nodelist"); a == b {
		t.Fatalf("both extra jobs on %s while another v100 node idled: %v", a, subs)
	}
}

func TestAnExtraJobStaysOnItsNodeWhenNoOtherNodeCanTakeIt(t *testing.T) {
	td := newTestDaemon(t, `nodes = ["n1"]`)
	td.fake.running("10", "es-req min=1 max=4 lw=8 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
	// A queued job (no planned nodes) keeps growth at doubling per round, so
	// the job grows in two extra jobs.
	td.fake.pending("20", "", 1, time.Time{})
	for range 2 {
		td.cycle(t)
		td.advance(2 * time.Second)
	}
	subs := td.fake.commands("sbatch")
	if len(subs) != 2 || argValue(subs[1], "nodelist") != "n1" {
		t.Fatalf("submitted %v, want a second extra job stacked on n1 (the only managed node)", subs)
	}
}

// TestGPUsAJobStartedOnBetweenSinfoAndSqueueAreNotLent: the daemon reads
// sinfo, then squeue. A job pinned to both v100 nodes that starts between
// the two (as on the lab, the moment the extra jobs it preempted are gone)
// runs on GPUs sinfo still counted idle; the planner takes the smaller of
// the two accounts (planner.FreeGPUs), so no extra job goes there.
func TestGPUsAJobStartedOnBetweenSinfoAndSqueueAreNotLent(t *testing.T) {
	// Job 10 on the T4s would otherwise be moved to the idle V100s
	// (move_to_faster) instead of lent them.
	td := newTestDaemon(t, "move_to_faster = false\n")
	td.fake.running("10", "es-req min=1 max=2 lw=8 d2", "n3", 4, time.Hour, rendezvous(t, "10"))
	td.fake.running("11", "", "n4", 4, time.Hour, "") // the t4 nodes are full: only v100 is idle
	pinned := td.fake.pending("20", "", 4, time.Time{})
	td.fake.set(func() {
		pinned.nodes = 2
		td.fake.afterSinfo = func() {
			pinned.state, pinned.nodeList, pinned.start, pinned.end = "RUNNING", "n[1-2]", td.fake.now, td.fake.now.Add(time.Hour)
		}
	})
	td.cycle(t)
	if subs := td.fake.commands("sbatch"); len(subs) != 0 {
		t.Fatalf("submitted %v onto GPUs job 20 holds, want nothing", subs)
	}
	// Without the race the same cluster lends nothing either, and once job
	// 20 ends its GPUs are lent.
	td.advance(2 * time.Second)
	td.cycle(t)
	td.fake.set(func() { pinned.state = "COMPLETED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	if subs := td.fake.commands("sbatch"); len(subs) == 0 {
		t.Fatal("no extra job once job 20 ended, want the v100 GPUs lent")
	}
}

func TestAD1JobGrowsOnlyOntoTheGPUTypeItRunsOn(t *testing.T) {
	tests := []struct {
		name string
		// comment of job 10 (one v100 on n1); n2's v100s are taken when busyN2.
		comment  string
		asked    string // the GPU type job 10 asked for (--gres=gpu:TYPE:1), "" none
		busyN2   bool
		speeds   string
		wantType string // "" = no extra job
	}{
		{"a d1 job on v100 is not grown onto idle t4 nodes", "es-req min=1 max=4 lw=8 d1", "v100", true, "", ""},
		{"a d2 job on v100 may grow onto t4 nodes", "es-req min=1 max=4 lw=8 d2", "", true, "", "t4"},
		// A tester's finding (in the simulator, the same rule): a d2 job's
		// extra jobs ignored the type its owner asked for.
		{"a d2 job that asked for v100 GPUs is not grown onto t4 nodes", "es-req min=1 max=4 lw=8 d2", "v100", true, "", ""},
		{"a d1 job offered a faster foreign type gets its own type instead", "es-req min=1 max=4 lw=8 d1", "v100", false,
			"[speeds]\nt4 = 3.0", "v100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, tc.speeds)
			n1 := td.fake.running("10", tc.comment, "n1", 1, time.Hour, rendezvous(t, "10"))
			td.fake.set(func() { n1.gpuType = tc.asked })
			td.fake.running("20", "", "n1", 3, time.Hour, "") // n1 is full
			if tc.busyN2 {
				td.fake.running("21", "", "n2", 4, time.Hour, "")
			}
			td.cycle(t)
			subs := td.fake.commands("sbatch")
			if tc.wantType == "" {
				if len(subs) != 0 {
					t.Fatalf("submitted %v, want nothing", subs)
				}
				return
			}
			if len(subs) == 0 {
				t.Fatalf("no extra job, want one on %s", tc.wantType)
			}
			for _, c := range subs {
				if gres := argValue(c, "gres"); !strings.HasPrefix(gres, "gpu:"+tc.wantType+":") {
					t.Errorf("extra job with --gres=%s, want type %s: %s", gres, tc.wantType, c)
				}
			}
		})
	}
}

func TestRetryWaitNeverDelaysAScheduledShrink(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		failures  int
		shrinkDue time.Time
		want      time.Duration
	}{
		{"without a shrink the fifth failure waits 16 poll intervals", 5, time.Time{}, 32 * time.Second},
		{"a shrink due in 10 s cuts the wait to 10 s", 5, now.Add(10 * time.Second), 10 * time.Second},
		{"an overdue shrink retries after one poll interval", 5, now.Add(-time.Minute), 2 * time.Second},
		{"a shrink due after the backoff changes nothing", 2, now.Add(time.Hour), 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RetryWait(2*time.Second, 5*time.Minute, tc.failures, tc.shrinkDue, now); got != tc.want {
				t.Fatalf("RetryWait = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRunProbesAnUnreachableControllerEveryPollAndCyclesAsSoonAsItAnswers(t *testing.T) {
	td := newTestDaemon(t, `max_backoff = "1h"`)
	var mu sync.Mutex
	var waits []time.Duration
	td.after = func(d time.Duration) <-chan time.Time {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	td.fake.set(func() { td.fake.down, td.fake.upAtPing = true, 8 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- td.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for value(td.Metrics().Cycles.WithLabelValues("ok")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no good cycle within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i, w := range waits {
		if w > 2*time.Second {
			t.Fatalf("wait %d was %v while slurmctld was down: beyond the 2s poll interval (waits %v)", i, w, waits)
		}
	}
	if got := value(td.Metrics().SlurmFailures); got != 1 {
		t.Errorf("slurm_failures_total %v, want 1 (one failed cycle, then cheap pings)", got)
	}
}

// countLogs counts the JSON log lines of buf whose message starts with msg
// and whose job_id is id.
func countLogs(t *testing.T, buf *bytes.Buffer, msg, id string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if s, _ := m["@message"].(string); strings.HasPrefix(s, msg) && (id == "" || m["job_id"] == id || m["extra_id"] == id) {
			n++
		}
	}
	return n
}

func TestAJobWhoseRecordCannotBeReadIsSkippedWithOneWarningAndTheCycleGoesOn(t *testing.T) {
	td := newTestDaemon(t, `nodes = ["n1", "n2"]`)
	var logs bytes.Buffer
	td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
	bad := td.fake.running("30", "", "n3", 1, time.Hour, "")
	td.fake.set(func() { bad.unreadable, bad.user = true, "bob" })
	// A recorded extra job whose record cannot be read this cycle is not
	// taken for gone.
	td.fake.running("20", elasticComment, "n4", 1, time.Hour, rendezvous(t, "20"))
	x := td.fake.extra("21", "20", "n4", 1, 20*time.Minute)
	td.fake.set(func() { x.unreadable = true })
	record(t, td, backfillstore.ExtraJob{ID: "21", Parent: "20", Node: "n4", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute)})
	td.fake.running("10", "es-req min=1 max=2 lw=8 d1", "n1", 4, time.Hour, rendezvous(t, "10"))
	r := td.cycle(t)
	if len(r.Submitted) == 0 {
		t.Fatal("no extra job submitted beside a job whose record cannot be read")
	}
	// A reservation already due: the same cycle that reads the bad record
	// again signals the extra jobs.
	td.fake.pending("50", "n2", 4, td.now.Add(30*time.Second))
	td.advance(2 * time.Second)
	td.cycle(t)
	signals := 0
	for _, c := range td.fake.commands("scancel") {
		if strings.HasPrefix(c, "scancel --signal=TERM ") && slices.Contains(r.Submitted, strings.Fields(c)[2]) {
			signals++
		}
		if strings.HasSuffix(c, " 21") {
			t.Errorf("%s: acted on a recorded job whose record could not be read", c)
		}
	}
	if signals != len(r.Submitted) {
		t.Errorf("signalled %d of %d extra jobs before the reservation; scancel calls %v", signals, len(r.Submitted), td.fake.commands("scancel"))
	}
	td.advance(2 * time.Second)
	td.cycle(t)
	for _, id := range []string{"30", "21"} {
		if n := countLogs(t, &logs, "skipping a job squeue printed", id); n != 1 {
			t.Errorf("job %s: %d warnings in 3 cycles, want one", id, n)
		}
	}
	if rec, err := td.db.Extra(context.Background(), "21"); err != nil || rec.State != backfillstore.ExtraSubmitted {
		t.Errorf("record of the unreadable extra job 21: %+v, %v; want it kept as submitted", rec, err)
	}
}

func TestNothingIsCancelledOrSignalledWhenSlurmsJobIsNotTheOneSubmitted(t *testing.T) {
	tests := []struct {
		name   string
		change func(j *fakeJob)
		want   bool // cancelled
		// kept: the record stays active.
		kept bool
	}{
		{"the recorded job unchanged is cancelled", func(j *fakeJob) {}, true, false},
		// Its name, comment and partition are its owner's to change: the
		// re-read checks the id and user only (a tester's rename race).
		{"another job name is cancelled", func(j *fakeJob) { j.name = "es-extra-99" }, true, false},
		{"another comment is cancelled", func(j *fakeJob) { j.comment = "es-extra parent=99" }, true, false},
		{"another partition is cancelled", func(j *fakeJob) { j.partition = "normal" }, true, false},
		// Another user: not the job submitted (the id was reused); left
		// alone, and by the next cycle its record ends as for a job gone.
		{"another user is left alone", func(j *fakeJob) { j.user = "bob" }, false, false},
		{"an unreadable re-read is left alone", nil, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			var logs bytes.Buffer
			td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
			// Job 11 was submitted for parent 10, which is gone: it is to be cancelled.
			j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
			record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now, End: td.now.Add(20 * time.Minute)})
			// Slurm's job 11 changes between the snapshot and the re-read.
			td.fake.set(func() {
				td.fake.onJobs = func() {
					if tc.change == nil {
						j.unreadable = true
					} else {
						tc.change(j)
					}
				}
			})
			td.cycle(t)
			td.advance(2 * time.Second)
			cancelled := slices.Contains(td.fake.commands("scancel"), "scancel 11")
			if cancelled != tc.want {
				t.Fatalf("cancelled=%v, want %v; scancel calls %v", cancelled, tc.want, td.fake.commands("scancel"))
			}
			td.cycle(t)
			td.advance(2 * time.Second)
			if cancelled = slices.Contains(td.fake.commands("scancel"), "scancel 11"); cancelled != tc.want {
				t.Fatalf("next cycle: cancelled=%v, want %v; scancel calls %v", cancelled, tc.want, td.fake.commands("scancel"))
			}
			if !tc.want {
				if n := countLogs(t, &logs, "not cancelling: Slurm's job 11 is not the extra job this daemon submitted", "11"); n != 1 {
					t.Errorf("%d error lines about job 11 in 2 cycles, want one:\n%s", n, logs.String())
				}
				if rec, _ := td.db.Extra(context.Background(), "11"); tc.kept && rec.State == backfillstore.ExtraEnded {
					t.Errorf("record %+v marked ended though nothing was cancelled", rec)
				}
			}
		})
	}
}

func TestASignalIsNotSentWhenSlurmsJobIsNotTheOneSubmitted(t *testing.T) {
	td, extras := shrinkSetup(t)
	j50, x := td.fake.job("50"), td.fake.job(extras[0])
	td.fake.set(func() {
		j50.start = td.now.Add(30 * time.Second)   // due now
		td.fake.onJobs = func() { x.user = "bob" } // runs under the fake's lock
	})
	td.cycle(t)
	for _, c := range td.fake.commands("scancel") {
		if strings.HasSuffix(c, " "+extras[0]) {
			t.Fatalf("%s: signalled a job that is no longer the one submitted", c)
		}
	}
}

// TestARunningJobWithAnUnreadableRequestIsWarnedAboutOnceAndNotGrown: a
// job whose comment starts as an EasyScale request but does not parse (its
// owner ran `scontrol update Comment=`) is not grown, and the daemon says
// so once, naming the job and the field, while an ordinary job's comment
// says nothing.
func TestARunningJobWithAnUnreadableRequestIsWarnedAboutOnceAndNotGrown(t *testing.T) {
	td := newTestDaemon(t, "")
	var logs bytes.Buffer
	td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
	td.fake.running("10", "es-req min=1 max=two lw=8 d1", "n1", 1, 30*time.Minute, rendezvous(t, "10"))
	td.fake.running("11", "nightly build", "n3", 1, 30*time.Minute, "")
	for range 3 {
		if r := td.cycle(t); len(r.Submitted) != 0 {
			t.Fatalf("submitted %v for a job whose request cannot be read", r.Submitted)
		}
		td.advance(2 * time.Second)
	}
	const msg = "a running job's EasyScale request cannot be read"
	if n := countLogs(t, &logs, msg, "10"); n != 1 {
		t.Errorf("job 10: %d warnings in 3 cycles, want one; logs:\n%s", n, logs.String())
	}
	if n := countLogs(t, &logs, msg, "11"); n != 0 {
		t.Errorf("job 11 (an ordinary comment): %d warnings, want none", n)
	}
	if !strings.Contains(logs.String(), `max=two`) {
		t.Errorf("the warning does not name the bad field:\n%s", logs.String())
	}
}

// TestAnIntentWaitsOutAnUnresolvedOwner: an extra job submitted just before
// a crash whose owner squeue prints as a uid (the name service does not
// resolve it) is neither adopted nor left to lose its intent: the intent
// outlives its 10 minutes while that lasts, and the job is adopted, held
// to what was lent, once the name is printed again (a helper's finding on
// 24.11: the intent expired and the job ran on unmanaged).
func TestAnIntentWaitsOutAnUnresolvedOwner(t *testing.T) {
	td := newTestDaemon(t, "")
	ctx := context.Background()
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	intendLent(t, td, "10", "n2", td.now.Add(-11*time.Minute), 5*time.Minute, 1) // older than intentTTL
	j := td.fake.extra("11", "10", "", 1, 20*time.Minute)                        // its owner raised its limit
	td.fake.set(func() { j.user, j.uid = "1000", fakeUID("alice") })
	td.fake.unresolve("alice")
	td.cycle(t)
	if in, err := td.db.Intents(ctx); err != nil || len(in) != 1 {
		t.Fatalf("intents %+v, %v while squeue printed a uid; want the one kept", in, err)
	}
	if got := td.fake.commands("scancel"); len(got) != 0 {
		t.Fatalf("scancel %v while squeue printed a uid, want none", got)
	}
	td.fake.set(func() { j.user = "alice" })
	td.fake.resolve()
	r := td.cycle(t)
	if !slices.Equal(r.Adopted, []string{"11"}) || !slices.Contains(td.fake.commands("scancel"), "scancel 11") {
		t.Fatalf("adopted %v, scancel %v once the name is back; want 11 adopted and cancelled (time limit raised)", r.Adopted, td.fake.commands("scancel"))
	}
	if x, err := td.db.Extra(ctx, "11"); err != nil || !strings.Contains(x.Reason, "time limit") {
		t.Errorf("record %+v, %v; want it ended for its time limit", x, err)
	}
}

// TestAnIntentWithTheOwnersUIDMatchesAJobListedUnderAStandIn: an intent
// written since schema version 10 holds the parent's owner's uid, so an
// extra job submitted just before a crash and listed under a stand-in name
// (the name service does not resolve its owner) is adopted at once, held to
// what was lent; a job of another uid printed as the same stand-in matches
// no intent and is left alone.
func TestAnIntentWithTheOwnersUIDMatchesAJobListedUnderAStandIn(t *testing.T) {
	for _, tc := range []struct {
		name, standIn, uid string
		adopted            bool
	}{
		{"24.11's stand-in, the owner's uid", "1000", fakeUID("alice"), true},
		{"22.05's stand-in, the owner's uid", "nobody", fakeUID("alice"), true},
		{"another uid printed as nobody", "nobody", "4242", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			ctx := context.Background()
			td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
			in := backfillstore.Intent{Parent: "10", User: "alice", UID: fakeUID("alice"), Name: ExtraJobName("10"), Comment: ExtraComment("10"),
				Partition: "low", Node: "n2", Lent: 5 * time.Minute, GPUs: 1, Time: td.now.Add(-time.Second)}
			if _, err := td.db.RecordIntent(ctx, in); err != nil {
				t.Fatal(err)
			}
			j := td.fake.extra("11", "10", "", 1, 20*time.Minute) // its owner raised its limit
			td.fake.set(func() { j.user, j.uid = tc.standIn, tc.uid })
			r := td.cycle(t)
			cancelled := slices.Contains(td.fake.commands("scancel"), "scancel 11")
			if got := slices.Equal(r.Adopted, []string{"11"}); got != tc.adopted || cancelled != tc.adopted {
				t.Fatalf("adopted %v, scancel %v; want adopted and cancelled (time limit raised): %v", r.Adopted, td.fake.commands("scancel"), tc.adopted)
			}
			if !tc.adopted {
				return
			}
			if x, err := td.db.Extra(ctx, "11"); err != nil || x.UID != fakeUID("alice") || !strings.Contains(x.Reason, "time limit") {
				t.Errorf("record %+v, %v; want alice's uid, ended for its time limit", x, err)
			}
		})
	}
}
