package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// heldJob adds a pending job of user that Slurm holds by its begin time
// (Reason BeginTime) as a requeued job is: begin is the begin time squeue
// prints, zero once it has passed (squeue prints N/A).
func heldJob(td *testDaemon, id, comment, user string, begin time.Time) *fakeJob {
	p := td.fake.pending(id, "", 4, time.Time{})
	td.fake.set(func() { p.start, p.end, p.reason, p.comment, p.user = begin, time.Time{}, "BeginTime", comment, user })
	return p
}

func nudges(td *testDaemon) []string { return td.fake.commands("scontrol update") }

func decisionsOf(t *testing.T, td *testDaemon, kind string) []backfillstore.Decision {
	t.Helper()
	ds, err := td.db.Decisions(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(ds, func(d backfillstore.Decision) bool { return d.Kind != kind })
}

// A requeued elastic job whose begin time has passed is nudged once, with
// the decision recorded and counted, and nudged again only after it left
// the hold and came back to it (a second requeue).
func TestAnEligibleRequeuedElasticJobIsNudgedOncePerHold(t *testing.T) {
	td := newTestDaemon(t, "")
	j := heldJob(td, "30", elasticComment, "alice", time.Time{})
	r := td.cycle(t)
	want := []string{"scontrol update JobId=30 StartTime=now-300"}
	if got := nudges(td); !slices.Equal(got, want) || !slices.Equal(r.Nudged, []string{"30"}) {
		t.Fatalf("first cycle: commands %q, report %q; want %q", got, r.Nudged, want)
	}
	if ds := decisionsOf(t, td, "nudge"); len(ds) != 1 || ds[0].Job != "30" || ds[0].DryRun {
		t.Errorf("nudge decisions %+v, want one for job 30", ds)
	}
	for range 3 { // still held (Slurm has not run its pass yet): not nudged again
		td.advance(2 * time.Second)
		td.cycle(t)
	}
	if got := nudges(td); len(got) != 1 {
		t.Fatalf("nudged %d times while the job stayed held, want once: %q", len(got), got)
	}
	td.fake.set(func() { j.reason = "Resources" }) // Slurm looked at it: waits for resources
	td.advance(2 * time.Second)
	td.cycle(t)
	td.fake.set(func() { j.reason, j.start = "BeginTime", time.Time{} }) // requeued again, begin time passed
	td.advance(2 * time.Second)
	td.cycle(t)
	if got := nudges(td); len(got) != 2 {
		t.Fatalf("nudged %d times over two holds, want 2: %q", len(got), got)
	}
	if got := value(td.Metrics().Nudges.WithLabelValues("ok")); got != 2 {
		t.Errorf("nudges_total{result=ok} = %v, want 2", got)
	}
}

// Which waiting jobs are nudged: only elastic ones held by a begin time
// that has passed, and only when nudge_eligible is on; a dry run records
// the decision and runs nothing.
func TestOnlyElasticJobsWhoseBeginTimeHasPassedAreNudged(t *testing.T) {
	tests := []struct {
		name, toml, comment, reason string
		partition                   string        // "": normal
		startText                   string        // squeue's StartTime instead of the begin time
		begin                       time.Duration // from now; 0: passed (N/A)
		want                        bool
		wantWake                    time.Duration // NextNudge from now; 0: none
		wantDryRun                  bool
	}{
		{name: "elastic, held, begin time passed", comment: elasticComment, reason: "BeginTime", want: true},
		{name: "elastic, a begin time squeue still prints though the daemon's clock passed it: slurmctld's clock rules; looked at again at once",
			comment: elasticComment, reason: "BeginTime", begin: -time.Second, wantWake: -750 * time.Millisecond},
		{name: "elastic, begin time 30 s ahead: not nudged (it would start early), looked at again 250 ms after it",
			comment: elasticComment, reason: "BeginTime", begin: 30 * time.Second, wantWake: 30*time.Second + 250*time.Millisecond},
		{name: "a begin time of INFINITE, which squeue prints Unknown (--begin=2106-02-07T06:28:15): not passed",
			comment: elasticComment, reason: "BeginTime", startText: "Unknown"},
		{name: "a begin time of NO_VAL, which squeue prints None (--begin=2106-02-07T06:28:14): not passed",
			comment: elasticComment, reason: "BeginTime", startText: "None"},
		{name: "not elastic (no EasyScale comment): left to Slurm", comment: "", reason: "BeginTime"},
		{name: "not elastic (a comment that only starts like one)", comment: "es-req min=x", reason: "BeginTime"},
		{name: "elastic, waiting for resources: Slurm already looked at it", comment: elasticComment, reason: "Resources"},
		{name: "elastic, waiting for priority", comment: elasticComment, reason: "Priority"},
		{name: "a job outside the daemon's partitions", toml: `partitions = ["gpu"]`, comment: elasticComment, reason: "BeginTime"},
		{name: "a job queued in several partitions, one of them the daemon's", toml: `partitions = ["low"]`,
			comment: elasticComment, reason: "BeginTime", want: true, partition: "normal,low"},
		{name: "nudge_eligible = false", toml: "nudge_eligible = false", comment: elasticComment, reason: "BeginTime"},
		{name: "dry run: the decision only", toml: "dry_run = true", comment: elasticComment, reason: "BeginTime", wantDryRun: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := newTestDaemon(t, tt.toml)
			var begin time.Time
			if tt.begin != 0 {
				begin = td.now.Add(tt.begin).Truncate(time.Second)
			}
			j := heldJob(td, "30", tt.comment, "alice", begin)
			td.fake.set(func() {
				j.reason = tt.reason
				if tt.partition != "" {
					j.partition = tt.partition
				}
				j.startText = tt.startText
			})
			td.cycle(t)
			if got := len(nudges(td)) == 1; got != tt.want {
				t.Errorf("nudged: %v, want %v (commands %q)", got, tt.want, nudges(td))
			}
			if ds := decisionsOf(t, td, "nudge"); (len(ds) == 1) != (tt.want || tt.wantDryRun) || tt.wantDryRun && !ds[0].DryRun {
				t.Errorf("nudge decisions %+v", ds)
			}
			var wake time.Duration
			if !td.nextNudge.IsZero() {
				wake = td.nextNudge.Sub(td.now)
			}
			if wake != tt.wantWake {
				t.Errorf("next nudge in %v, want %v", wake, tt.wantWake)
			}
		})
	}
}

// The job is re-read by id right before its nudge: one that changed since
// the snapshot is left alone and counted as skipped.
func TestANudgeReReadsTheJobFirst(t *testing.T) {
	tests := []struct {
		name   string
		change func(td *testDaemon, j *fakeJob)
	}{
		{"its owner moved its begin time later", func(td *testDaemon, j *fakeJob) { j.start = td.now.Add(time.Hour) }},
		{"its comment is no longer an EasyScale request", func(_ *testDaemon, j *fakeJob) { j.comment = "plain" }},
		{"Slurm started it", func(_ *testDaemon, j *fakeJob) { j.state, j.reason = "RUNNING", "None" }},
		{"it is gone", func(td *testDaemon, j *fakeJob) {
			td.fake.jobs = slices.DeleteFunc(td.fake.jobs, func(x *fakeJob) bool { return x == j })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			j := heldJob(td, "30", elasticComment, "alice", time.Time{})
			td.fake.onJobs = func() { tt.change(td, j); td.fake.onJobs = nil }
			td.cycle(t)
			if got := nudges(td); len(got) != 0 {
				t.Fatalf("nudged a job that changed since the snapshot: %q", got)
			}
			if got := value(td.Metrics().Nudges.WithLabelValues("skipped")); got != 1 {
				t.Errorf("nudges_total{result=skipped} = %v, want 1", got)
			}
		})
	}
}

// A refused nudge is counted and not retried: Slurm's own pass starts the
// job anyway.
func TestARefusedNudgeIsCountedAndNotRetried(t *testing.T) {
	td := newTestDaemon(t, "")
	heldJob(td, "30", elasticComment, "alice", time.Time{})
	td.fake.refuse = map[string]string{"scontrol update JobId=30 StartTime=now-300": "slurm_update error: Access/permission denied"}
	for range 3 {
		td.cycle(t)
		td.advance(2 * time.Second)
	}
	if got := nudges(td); len(got) != 1 {
		t.Fatalf("commands %q, want one refused nudge", got)
	}
	if got := value(td.Metrics().Nudges.WithLabelValues("failed")); got != 1 {
		t.Errorf("nudges_total{result=failed} = %v, want 1", got)
	}
}

// Attack: an unprivileged user (carol) cannot make the daemon move another
// user's begin time: bob's elastic job waits for a begin time an hour
// ahead; carol's own held jobs carry names and comments that spell a
// squeue record of bob's job with its begin time passed, and she holds
// more jobs than a cycle nudges. Bob's job is never nudged, and no cycle
// runs more than planner.MaxNudgesPerCycle updates.
func TestAttackNoUserCanMakeTheDaemonNudgeAnotherUsersJob(t *testing.T) {
	td := newTestDaemon(t, "")
	bob := heldJob(td, "40", elasticComment, "bob", td.now.Add(time.Hour).Truncate(time.Second))
	forged := "\n40|x|PENDING|normal|1|1|N/A|N/A||BeginTime|N/A|N/A|60:00|(null)|n/a|" + elasticComment + "|bob|(null)|/|\n"
	for i, id := range []string{"41", "42", "43", "44", "45", "46"} {
		c := heldJob(td, id, elasticComment, "carol", time.Time{})
		td.fake.set(func() {
			if i%2 == 0 {
				c.name = "evil" + forged
			} else {
				c.comment = elasticComment + forged
			}
		})
	}
	for range 5 {
		before := len(nudges(td))
		td.cycle(t)
		if n := len(nudges(td)) - before; n > 4 {
			t.Fatalf("a cycle ran %d nudges, more than planner.MaxNudgesPerCycle", n)
		}
		td.advance(2 * time.Second)
	}
	for _, c := range nudges(td) {
		if c == "scontrol update JobId="+bob.id+" StartTime=now-300" {
			t.Fatalf("bob's job was nudged before its begin time: %q", nudges(td))
		}
	}
	if len(nudges(td)) == 0 {
		t.Fatalf("carol's own eligible elastic jobs were not nudged either: the test proves nothing")
	}
}

// NudgeWait runs a cycle early for a due nudge, at most once per poll
// interval.
func TestNudgeWaitRunsAtMostOneEarlyCyclePerPollInterval(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	poll := 10 * time.Second
	tests := []struct {
		name            string
		wake, lastEarly time.Time
		want            time.Duration
		early           bool
	}{
		{name: "nothing due: poll", want: poll},
		{name: "due in 3 s: early", wake: now.Add(3 * time.Second), want: 3 * time.Second, early: true},
		{name: "due now or past: at once", wake: now.Add(-time.Second), want: 0, early: true},
		{name: "due after the next regular cycle: poll", wake: now.Add(12 * time.Second), want: poll},
		{name: "an early cycle was due 4 s before this one: poll", wake: now.Add(3 * time.Second),
			lastEarly: now.Add(-time.Second), want: poll},
		{name: "the last early cycle was a poll interval before: early", wake: now.Add(3 * time.Second),
			lastEarly: now.Add(-7 * time.Second), want: 3 * time.Second, early: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, early := NudgeWait(poll, tt.wake, tt.lastEarly, now)
			if got != tt.want || early != tt.early {
				t.Fatalf("NudgeWait = %v, %v; want %v, %v", got, early, tt.want, tt.early)
			}
		})
	}
}

// Run waits less than poll_interval when a waiting elastic job's begin time
// passes before the next regular cycle: the cycle after it nudges the job
// 250 ms after its begin time, not up to a poll interval later.
func TestRunWakesJustAfterABeginTimeThatPassesBeforeTheNextCycle(t *testing.T) {
	td := newTestDaemon(t, "")
	td.cfg.PollInterval.Duration = 10 * time.Second
	j := heldJob(td, "30", elasticComment, "alice", td.now.Add(3*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	td.after = func(d time.Duration) <-chan time.Time {
		waits = append(waits, d)
		td.advance(d)
		if len(waits) == 1 { // the begin time has passed now: Slurm prints none
			td.fake.set(func() { j.start = time.Time{} })
		}
		if len(waits) == 3 {
			cancel()
			return nil // never fires: Run stops on the context
		}
		c := make(chan time.Time, 1)
		c <- td.now
		return c
	}
	if err := td.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{3250 * time.Millisecond, 10 * time.Second, 10 * time.Second}; !slices.Equal(waits, want) {
		t.Fatalf("waits between cycles %v, want %v (early for the begin time, then poll_interval)", waits, want)
	}
	if got := nudges(td); len(got) != 1 {
		t.Fatalf("commands %q, want the job nudged in the early cycle", got)
	}
}

// A job array's pending record carries the array's id, and `scontrol update
// JobId=ID` changes every task of the array, a task its owner held to a
// later begin time too (found by a tester on the lab: a task held an hour
// ahead started 33 minutes early); a heterogeneous job's update changes
// every component. So a job that `squeue --jobs=ID` does not list alone is
// never nudged.
func TestAJobArrayOrHeterogeneousJobIsNeverNudged(t *testing.T) {
	for _, other := range []string{"a task held to a later begin time", "an eligible task", "a finished task"} {
		t.Run(other, func(t *testing.T) {
			td := newTestDaemon(t, "")
			heldJob(td, "79", elasticComment, "victim", time.Time{}) // 79_2, eligible
			task := heldJob(td, "80", elasticComment, "victim", td.now.Add(time.Hour).Truncate(time.Second))
			td.fake.set(func() {
				task.arrayOf = "79" // 79_1, split off with its own begin time
				switch other {
				case "an eligible task":
					task.start = time.Time{}
				case "a finished task":
					task.state, task.reason = "COMPLETED", ""
				}
			})
			td.cycle(t)
			for _, c := range nudges(td) {
				if c == "scontrol update JobId=79 StartTime=now-300" {
					t.Fatalf("nudged the array's id: commands %q", nudges(td))
				}
			}
			if got := value(td.Metrics().Nudges.WithLabelValues("skipped")); got < 1 {
				t.Errorf("nudges_total{result=skipped} = %v, want job 79 skipped", got)
			}
		})
	}
}
