package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// failExtras ends every running or pending extra job of parent at once, as
// an extra job whose worker cannot join does: squeue lists it FAILED, or,
// with forget, no longer lists it at all (squeue forgets ended jobs after
// MinJobAge, and sacct is not always there). It returns how many it ended.
func failExtras(f *fakeSlurm, parent string, forget bool) int {
	n := 0
	f.set(func() {
		kept := f.jobs[:0]
		for _, j := range f.jobs {
			if j.name == ExtraJobName(parent) && (j.state == "RUNNING" || j.state == "PENDING") {
				n++
				j.state = "FAILED"
				if forget {
					continue
				}
			}
			kept = append(kept, j)
		}
		f.jobs = kept
	})
	return n
}

// metricValue reads the value of the series name (without labels) from the
// daemon's registry; -1 when it is not registered.
func metricValue(t *testing.T, td *testDaemon, name string) float64 {
	t.Helper()
	mfs, err := td.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return sum
	}
	return -1
}

// rewriteCoordinator publishes a new coordinator address for job id in work
// the way the runtime does (a temp file renamed over the old one).
func rewriteCoordinator(t *testing.T, work, id, addr string) {
	t.Helper()
	dir := filepath.Join(work, ".easyscale", id)
	tmp := filepath.Join(dir, ".coordinator.tmp")
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "coordinator")); err != nil {
		t.Fatal(err)
	}
}

// TestExtraJobsThatFailAtOnceBackOffAndStopUntilTheJobsStatusChanges is
// issue 20 item 2: a job whose every extra job fails at once (its
// rendezvous points at a dead coordinator) was grown again every cycle.
// Now, over 100 cycles 2 s apart with [retry] base 10s, max 40s,
// stop_after 5, the extra jobs follow the doubling waits (seen failed at
// 2 s, 14 s, 36 s, 78 s, 120 s: next lend 10 s, 20 s, 40 s, 40 s after),
// then stop with one log line and the metrics set; rewriting the
// coordinator file (the job's status changes) gets it one more lend, not a
// lend a cycle. It holds whether squeue still lists the failed jobs or has
// forgotten them.
func TestExtraJobsThatFailAtOnceBackOffAndStopUntilTheJobsStatusChanges(t *testing.T) {
	for _, forget := range []bool{false, true} {
		name := "squeue lists them FAILED"
		if forget {
			name = "squeue no longer lists them"
		}
		t.Run(name, func(t *testing.T) {
			td := newTestDaemon(t, "nodes = [\"n1\", \"n2\"]\n[retry]\nbase = \"10s\"\nmax = \"40s\"\nstop_after = 5\n")
			var logs bytes.Buffer
			td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
			work := rendezvous(t, "10")
			td.fake.running("10", "es-req min=1 max=2 lw=2 d1", "n1", 1, time.Hour, work)
			start := td.now
			var lends []int // seconds from the start of each cycle that submitted
			failed := 0
			run := func(cycles int) {
				for range cycles {
					r := td.cycle(t)
					if len(r.Submitted) > 0 {
						lends = append(lends, int(td.now.Sub(start).Seconds()))
					}
					td.advance(2 * time.Second)
					failed += failExtras(td.fake, "10", forget)
				}
			}
			run(5)
			if r := td.cycle(t); !slices.Equal(r.Held, []string{"10"}) || !r.Snapshot.Running[0].NoGrow {
				t.Errorf("after a failure the cycle held %v (snapshot NoGrow %v), want job 10 waiting out its backoff",
					r.Held, r.Snapshot.Running[0].NoGrow)
			}
			td.advance(2 * time.Second)
			run(94)
			if want := []int{0, 12, 34, 76, 118}; !slices.Equal(lends, want) {
				t.Fatalf("extra jobs submitted at %v s over 100 cycles, want %v (backoff 10, 20, 40, 40 s, then stop)", lends, want)
			}
			if n := countLogs(t, &logs, "not growing job", "10"); n != 1 {
				t.Errorf("%d log lines saying job 10 is not grown, want 1:\n%s", n, logs.String())
			}
			for name, want := range map[string]float64{
				"easyscale_backfill_jobs_not_grown":      1,
				"easyscale_backfill_growth_stops_total":  1,
				"easyscale_backfill_lend_failures_total": 5,
			} {
				if got := metricValue(t, td, name); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if failed != 5 {
				t.Errorf("%d extra jobs failed, want 5", failed)
			}

			// The job's coordinator is published again: it is grown again,
			// once (the backoff, at its cap, stands), and stopped again.
			rewriteCoordinator(t, work, "10", "n1:40001")
			lends = nil
			start = td.now
			run(50)
			if want := []int{0}; !slices.Equal(lends, want) {
				t.Errorf("after the coordinator changed, extra jobs submitted at %v s over 50 cycles, want %v", lends, want)
			}
			if n := countLogs(t, &logs, "growing job again", "10"); n != 1 {
				t.Errorf("%d log lines saying job 10 is grown again, want 1", n)
			}
			if n := countLogs(t, &logs, "not growing job", "10"); n != 2 {
				t.Errorf("%d log lines saying job 10 is not grown after it failed again, want 2", n)
			}
			if got := metricValue(t, td, "easyscale_backfill_jobs_not_grown"); got != 1 {
				t.Errorf("jobs_not_grown = %v after the sixth failure, want 1", got)
			}
		})
	}
}

// TestAJobWhoseLendsFailIsNotGrownAgainByARestartedDaemon: the failures
// are in state_db, so a daemon restarted after the stop does not lend
// again (nor say so again).
func TestAJobWhoseLendsFailIsNotGrownAgainByARestartedDaemon(t *testing.T) {
	toml := "[retry]\nbase = \"10s\"\nmax = \"10s\"\nstop_after = 2\n"
	td := newTestDaemon(t, toml)
	td.fake.running("10", "es-req min=1 max=2 lw=2 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
	subs := 0
	for range 20 {
		subs += len(td.cycle(t).Submitted)
		td.advance(2 * time.Second)
		failExtras(td.fake, "10", true)
	}
	if subs != 2 {
		t.Fatalf("%d extra jobs before the stop, want 2", subs)
	}
	cfg := *td.cfg
	td.db.Close()
	td2 := newTestDaemonWith(t, td.fake, &cfg)
	td2.now = td.now
	var logs bytes.Buffer
	td2.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
	for range 20 {
		if r := td2.cycle(t); len(r.Submitted) > 0 {
			t.Fatalf("the restarted daemon lent to a stopped job: %v", r.Submitted)
		}
		td2.advance(2 * time.Second)
	}
	if strings.Contains(logs.String(), "not growing job") {
		t.Errorf("the restarted daemon announced the stop again:\n%s", logs.String())
	}
	if got := metricValue(t, td2, "easyscale_backfill_jobs_not_grown"); got != 1 {
		t.Errorf("jobs_not_grown = %v after the restart, want 1", got)
	}
}

// TestAnExtraJobThatRunsToItsLimitIsNoFailure: lends that run to their time
// limit, and lends the daemon shrank, never hold a job back.
func TestAnExtraJobThatRunsToItsLimitIsNoFailure(t *testing.T) {
	td := newTestDaemon(t, "nodes = [\"n1\", \"n2\"]\n[retry]\nstop_after = 1\n")
	td.cfg.MaxLend.Duration = 2 * time.Minute
	td.fake.running("10", "es-req min=1 max=2 lw=2 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
	subs := 0
	for range 200 {
		r := td.cycle(t)
		subs += len(r.Submitted)
		td.advance(2 * time.Second)
		td.fake.set(func() { // Slurm ends each extra job at its time limit
			for _, j := range td.fake.jobs {
				if j.state == "RUNNING" && j.name == ExtraJobName("10") && !td.now.Before(j.end) {
					j.state = "TIMEOUT"
				}
			}
		})
	}
	if subs < 3 {
		t.Errorf("%d extra jobs in 400 s of 2-minute lends that ran to their limit, want one after another", subs)
	}
	if got := metricValue(t, td, "easyscale_backfill_lend_failures_total"); got != 0 {
		t.Errorf("lend_failures_total = %v, want 0", got)
	}
	hs, err := td.db.LendHistories(context.Background())
	if err != nil || len(hs) != 0 {
		t.Errorf("failed lends recorded: %+v, %v", hs, err)
	}
}

// TestTenThousandCyclesLeaveTheDatabaseBounded runs 10,000 cycles in which
// a job's lend fails every cycle ([retry] at its shortest wait and never
// stopping: the most rows a cycle writes) and checks that state_db stays
// under a fixed size: [retention] prunes ended extra jobs and decisions
// every cycle, SQLite reuses their pages, and the failed lends are one
// row per job and node. Each way a lend fails is run: an extra job that
// fails at once (a grow and a failure decision and an extra job each
// time, none of them ever shrunk), an sbatch that Slurm refuses (a grow
// and a grow-failed decision, no extra job), and an extra job cancelled
// after pending_timeout (a grow, a cancel and a failure decision and an
// extra job). Without pruning the file grew by about 240 bytes a cycle
// (2.4 MB here).
func TestTenThousandCyclesLeaveTheDatabaseBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 daemon cycles")
	}
	tests := []struct {
		name  string
		setup func(td *testDaemon)
		fail  func(td *testDaemon)
	}{
		{name: "extra jobs fail at once", fail: func(td *testDaemon) { failExtras(td.fake, "10", true) }},
		{name: "sbatch refuses them", setup: func(td *testDaemon) {
			td.fake.sbatchFails = "sbatch: error: Batch job submission failed: Invalid partition name specified"
		}},
		{name: "they stay pending past pending_timeout", setup: func(td *testDaemon) {
			td.fake.startPending, td.fake.pendingReason = true, "Resources"
			td.cfg.PendingTimeout.Duration = time.Second
		}, fail: func(td *testDaemon) {
			td.fake.set(func() { // Slurm forgets the cancelled ones
				td.fake.jobs = slices.DeleteFunc(td.fake.jobs, func(j *fakeJob) bool { return j.state == "CANCELLED" })
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenThousandCycles(t, tc.setup, tc.fail)
		})
	}
}

func tenThousandCycles(t *testing.T, setup, fail func(td *testDaemon)) {
	// The file's size, not its durability, is under test: on tmpfs the
	// fsyncs of synchronous=FULL cost nothing, and 10,000 cycles take
	// seconds instead of a minute.
	dir := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "easyscale-backfill-test-"); err == nil {
			dir = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)
	fake := newFake(now)
	cfg, err := config.Parse(`
poll_interval = "2s"
metrics_address = "off"
state_db = "` + filepath.Join(dir, "backfill.db") + `"
nodes = ["n1", "n2"]
[retry]
base = "1s"
max = "1s"
stop_after = 0
[retention]
decisions = 100
ended_extras = 100
`)
	if err != nil {
		t.Fatal(err)
	}
	td := newTestDaemonWith(t, fake, cfg)
	td.fake.running("10", "es-req min=1 max=2 lw=2 d1", "n1", 1, 30*24*time.Hour, rendezvous(t, "10"))
	if setup != nil {
		setup(td)
	}
	const cycles = 10000
	const limit = 256 << 10 // the fixed size: what 100 decisions and 100 extra jobs take, with room
	ctx := context.Background()
	start := time.Now()
	for k := range cycles {
		if _, err := td.Cycle(ctx); err != nil {
			t.Fatalf("cycle %d: %v", k, err)
		}
		td.advance(2 * time.Second)
		if fail != nil {
			fail(td)
		}
		if k%1000 == 999 {
			if st, err := os.Stat(cfg.StateDB); err != nil || st.Size() > limit {
				t.Fatalf("after %d cycles state_db is %d bytes (%v), want at most %d", k+1, st.Size(), err, limit)
			}
		}
	}
	lends := len(td.fake.commands("sbatch"))
	if lends < cycles/2 {
		t.Fatalf("only %d extra jobs submitted in %d cycles: the test wants a row-heavy cycle", lends, cycles)
	}
	st, err := os.Stat(cfg.StateDB)
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := td.db.Decisions(ctx, 0, 0)
	xs, _ := td.db.Extras(ctx)
	hs, _ := td.db.LendHistories(ctx)
	rows := 0
	for _, h := range hs {
		rows += 1 + len(h.Nodes)
	}
	t.Logf("%d cycles, %d sbatch runs, %v failed lends in %v: state_db %d bytes, %d decisions, %d extra jobs and %d lend_failures rows kept",
		cycles, lends, metricValue(t, td, "easyscale_backfill_lend_failures_total"), time.Since(start).Round(time.Millisecond),
		st.Size(), len(ds), len(xs), rows)
	if got := metricValue(t, td, "easyscale_backfill_lend_failures_total"); got < cycles/2 {
		t.Errorf("%v failed lends counted in %d cycles, want one every cycle or two", got, cycles)
	}
	if len(ds) > 100 || len(xs) > 101 || rows > 3 {
		t.Errorf("%d decisions, %d extra jobs and %d lend_failures rows kept, want at most 100, 100 (and the live one) and 3 (the job and its 2 nodes)",
			len(ds), len(xs), rows)
	}
	if wal, err := os.Stat(cfg.StateDB + "-wal"); err == nil && wal.Size() > 8<<20 {
		t.Errorf("the write-ahead log is %d bytes: checkpoints do not keep up", wal.Size())
	}
}

// TestAJobsStatusIsItsRunRequestAndRendezvousNotItsProgress: what lifts a
// stop (statusKey). The runtime's progress reports are the same status as
// the request they carry; a requeue, another request, and a coordinator
// or token file published again are not.
func TestAJobsStatusIsItsRunRequestAndRendezvousNotItsProgress(t *testing.T) {
	work := rendezvous(t, "10")
	dir := filepath.Join(work, ".easyscale", "10")
	extra := config.Default().Extra
	stat := func(path string) os.FileInfo {
		fi, err := os.Lstat(path)
		if err != nil {
			return nil
		}
		return fi
	}
	key := func(start, comment string) string {
		c, err := elastic.ParseComment(comment)
		if err != nil {
			t.Fatal(err)
		}
		return statusKey(slurmcli.Job{ID: "10", StartTime: start, Comment: comment}, c.Request, extra,
			stat(filepath.Join(dir, "coordinator")), stat(filepath.Join(dir, "token")))
	}
	base := key("2026-03-01T12:00:00", "es-req min=1 max=2 lw=4 d1")
	// The daemon's [extra] settings are part of it: an admin's fix of the
	// partition that sbatch refused lifts the stops the refusals caused.
	for _, change := range []func(*config.Extra){
		func(e *config.Extra) { e.Partition = "scavenger" },
		func(e *config.Extra) { e.QOS = "lend" },
		func(e *config.Extra) { e.WorkerCommand += " --verbose" },
	} {
		saved := extra
		change(&extra)
		if key("2026-03-01T12:00:00", "es-req min=1 max=2 lw=4 d1") == base {
			t.Errorf("[extra] %+v changed but the status did not", extra)
		}
		extra = saved
	}
	for _, tc := range []struct {
		name, start, comment string
		same                 bool
	}{
		{"the runtime's first progress report", "2026-03-01T12:00:00", "es step=0/100 workers=1/4 d1 req=1-2", true},
		{"a later one with more workers", "2026-03-01T12:00:00", "es step=50/100 workers=2/4 d1 req=1-2", true},
		{"a requeued run", "2026-03-01T12:30:00", "es-req min=1 max=2 lw=4 d1", false},
		{"another request", "2026-03-01T12:00:00", "es-req min=1 max=3 lw=4 d1", false},
	} {
		if got := key(tc.start, tc.comment) == base; got != tc.same {
			t.Errorf("%s: same status %v, want %v", tc.name, got, tc.same)
		}
	}
	rewriteCoordinator(t, work, "10", "n1:40000") // same address, published again
	if key("2026-03-01T12:00:00", "es-req min=1 max=2 lw=4 d1") == base {
		t.Error("a coordinator published again is the same status")
	}
	if len(base) != 64 {
		t.Errorf("status key %q: want 64 hex digits whatever the job wrote", base)
	}
}
