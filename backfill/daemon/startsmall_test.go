package daemon

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
	"github.com/hashicorp/go-hclog"
)

// smallCluster is the fake cluster of the start-small tests: rigid job 10
// (alice) runs on v100 node n2 for 2 h; job 20 (bob, elastic: es-req
// min=1 max=2) is the queue head, asking for both v100 nodes for 30 min,
// planned by Slurm on n1,n2 when job 10 ends. n1 is idle now; the t4 nodes
// n3 and n4 are idle but of another type.
func smallCluster(t *testing.T, toml, comment string) *testDaemon {
	t.Helper()
	td := newTestDaemon(t, toml)
	td.fake.running("10", "rigid", "n2", 4, 2*time.Hour, "")
	q := td.fake.pending("20", "n1,n2", 4, td.now.Add(2*time.Hour))
	td.fake.set(func() {
		q.gpuType, q.reason, q.timeLimit, q.comment = "v100", "Resources", 30*time.Minute, comment
	})
	return td
}

func TestStartSmall(t *testing.T) {
	const before = "[start_small]\nrule = \"before-reservation\"\n"
	const earlier = "[start_small]\nrule = \"ends-earlier\"\n"
	const elastic = "es-req min=1 max=2 lw=8 d1"
	// The rules decide on the time the job may hold the node, what its
	// raised limit allows for a job that scales linearly
	// (planner.RaisedTimeLimit): 30 min on 2 nodes is 60 on 1; its limit
	// adds max(60 s safety margin, 10 % time_limit_margin): 66 min. Its own
	// lw= does not change that (TestStartSmallDecidesOnTheLimitNotTheJobsModel).
	started := []string{"scontrol update JobId=20 TimeLimit=66", "scontrol update JobId=20 NumNodes=1"}
	tests := []struct {
		name, toml, comment string
		setup               func(t *testing.T, td *testDaemon)
		want                []string
		skipped             bool // a start-small-skip decision is recorded
	}{
		{name: "on by default (ends-earlier): 60 min on the idle node ends before 120 + 30 min by waiting", toml: "", comment: elastic,
			want: started},
		{name: "off: the queue head waits for the nodes it asked for", toml: "[start_small]\nrule = \"off\"\n", comment: elastic},
		{name: "before-reservation starts the head now on the idle node when it ends there before its reserved start",
			toml: before, comment: elastic, want: started},
		{name: "before-reservation leaves the head waiting when it would not end before its reserved start",
			toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.start = td.now.Add(40 * time.Minute) })
			}},
		{name: "on Slurm 24.11 too: a pending job's node count is lowered with NumNodes alone (its task count follows)",
			toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.keepTasks = true }) },
			want:  started},
		{name: "ends-earlier starts it then: 60 min on one node ends before 40 + 30 min by waiting",
			toml: earlier, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.start = td.now.Add(40 * time.Minute) })
			},
			want: started},
		{name: "ends-earlier never makes the job it starts small the one that ends last (60 min on one node, every other job ends in 40)",
			toml: earlier, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				q, r := td.fake.job("20"), td.fake.job("10")
				td.fake.set(func() { q.start, r.end = td.now.Add(40*time.Minute), td.now.Add(40*time.Minute) })
			}},
		{name: "a job behind the queue head starts small on a node no reservation names",
			toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				// Rigid job 16 holds t4 node n3 for 110 min; rigid job 15, the head,
				// waits for n3 and n4 until then. Job 20 may take n1.
				td.fake.running("16", "rigid", "n3", 4, 110*time.Minute, "")
				h := td.fake.pending("15", "n3,n4", 4, td.now.Add(110*time.Minute))
				td.fake.set(func() { h.gpuType, h.reason, h.timeLimit = "t4", "Resources", time.Hour })
			},
			want: started},
		{name: "a job behind one whose reservation names no nodes waits (the nodes that job needs are unknown)",
			toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				// Rigid job 15, ahead of 20, waits for 2 v100 nodes from +1 h but
				// Slurm's backfill has not planned its nodes yet.
				h := td.fake.pending("15", "", 4, td.now.Add(time.Hour))
				td.fake.set(func() { h.gpuType, h.reason, h.timeLimit, h.nodes = "v100", "Resources", time.Hour, 2 })
			}},
		{name: "only in the partitions listed", toml: before + "partitions = [\"gpu\"]\n", comment: elastic},
		{name: "never below the request's minimum", toml: before, comment: "es-req min=2 max=2 lw=8 d1"},
		{name: "a head that is not an elastic EasyScale job is never touched", toml: before, comment: "my training run"},
		{name: "a head with a fixed-size EasyScale request is never touched", toml: before, comment: "es-req lw=8 d1"},
		{name: "a head that excludes the idle node is not started small (it could not start there)", toml: earlier, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) { q := td.fake.job("20"); td.fake.set(func() { q.excNodes = "n1" }) }},
		{name: "a head asking node features is not started small", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) { q := td.fake.job("20"); td.fake.set(func() { q.features = "ib" }) }},
		{name: "a head in a partition without the idle node is not started small", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.partition = "debug" })
			}},
		{name: "a head in the preemptible extra partition is not started small", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.partition = "low" })
			}},
		{name: "a node another job's reservation names is not idle for it", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				p := td.fake.pending("30", "n1", 4, td.now.Add(time.Hour))
				td.fake.set(func() { p.reason = "Priority" })
			}},
		{name: "a node in an advance reservation is not idle for it (Slurm would keep it pending)", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() {
					td.fake.reservations = []string{fakeReservation("maint", "n1", td.now, td.now.Add(30*time.Minute), time.Hour, "MAINT,SPEC_NODES")}
				})
			}},
		{name: "a head that must run in an advance reservation (--reservation) is not started small", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.reservation = "R1" })
			}},
		{name: "nor while the advance reservations cannot be read", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.reservationsFail = "slurm_load_reservations error: Socket timed out" })
			}},
		{name: "a node reserved for a job whose GPUs squeue does not show (--gpus-per-task, or none) is not idle for it",
			toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				p := td.fake.pending("30", "n1", 0, td.now.Add(time.Hour))
				td.fake.set(func() { p.reason = "Priority" })
			}},
		{name: "a head whose comment changes before the re-read by id is not changed", toml: before, comment: elastic,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.onJobs = func() { q.comment = "es-req d1" }
			}, skipped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := smallCluster(t, tt.toml, tt.comment)
			if tt.setup != nil {
				tt.setup(t, td)
			}
			r := td.cycle(t)
			got := td.fake.commands("scontrol update")
			if !slices.Equal(got, tt.want) {
				t.Fatalf("scontrol updates %q, want %q", got, tt.want)
			}
			ds, _ := td.db.Decisions(context.Background(), 0, 0)
			if got := slices.ContainsFunc(ds, func(d backfillstore.Decision) bool { return d.Kind == "start-small-skip" }); got != tt.skipped {
				t.Errorf("a start-small-skip decision recorded: %v, want %v (%+v)", got, tt.skipped, ds)
			}
			if tt.want == nil {
				if len(r.StartedSmall) != 0 || td.fake.job("20").nodes != 2 {
					t.Fatalf("started small %v, job 20 on %d nodes; want it untouched at 2", r.StartedSmall, td.fake.job("20").nodes)
				}
				return
			}
			if !slices.Equal(r.StartedSmall, []string{"20"}) || td.fake.job("20").nodes != 1 {
				t.Fatalf("started small %v, job 20 asks %d nodes; want 20 on 1", r.StartedSmall, td.fake.job("20").nodes)
			}
			if len(r.Submitted) != 0 {
				t.Errorf("the cycle also lent %v on the state it read before starting a job small", r.Submitted)
			}
			if !slices.ContainsFunc(ds, func(d backfillstore.Decision) bool {
				return d.Kind == "start-small" && d.Job == "20" && strings.Contains(d.Detail, "1 of its 2 nodes")
			}) {
				t.Errorf("decisions %+v, want a start-small of job 20", ds)
			}
		})
	}
}

// TestAJobStartedSmallGetsALimitThatOutlastsLinearScaling is issue 20's
// item 5 as the lab showed it: a job asking 2 nodes for 5 minutes, started
// on 1, had its limit raised to 10 minutes (the default speed model's
// 9.3 minutes plus a 10 s safety margin, rounded up), so a job that scales
// linearly and uses its whole limit, which needs exactly 10 minutes on one
// node, was killed at its end. The limit must cover the remaining work at
// the smaller size by the proportional rule plus a margin
// (planner.RaisedTimeLimit: 10 min + max(10 s, 10 % of 10 min) = 11 min).
func TestAJobStartedSmallGetsALimitThatOutlastsLinearScaling(t *testing.T) {
	td := smallCluster(t, "[start_small]\nrule = \"before-reservation\"\n", "es-req min=1 max=2 lw=8 d1")
	td.cfg.SafetyMargin.Duration = 10 * time.Second // the lab's
	q := td.fake.job("20")
	td.fake.set(func() { q.timeLimit = 5 * time.Minute })
	r := td.cycle(t)
	if !slices.Equal(r.StartedSmall, []string{"20"}) {
		t.Fatalf("started small %v, want job 20", r.StartedSmall)
	}
	got := td.fake.commands("scontrol update")
	if len(got) != 2 || !strings.HasPrefix(got[0], "scontrol update JobId=20 TimeLimit=") {
		t.Fatalf("scontrol updates %q, want the time limit raised, then the node count lowered", got)
	}
	limit, err := strconv.Atoi(strings.TrimPrefix(got[0], "scontrol update JobId=20 TimeLimit="))
	if err != nil {
		t.Fatal(err)
	}
	const linear = 10 // minutes: 5 on 2 nodes is 10 on 1
	if limit <= linear {
		t.Errorf("raised time limit %d min: a job that scales linearly and uses its whole 5 min on 2 nodes needs %d min on 1, and is killed at its end", limit, linear)
	}
	if limit != 11 {
		t.Errorf("raised time limit %d min, want 11 (10 min at the smaller size plus max(safety_margin 10 s, 10 %%), whole minutes)", limit)
	}
}

// TestStartSmallDecidesOnTheLimitNotTheJobsModel: a job's own lw= must not
// buy it a start-small the rule would refuse on the time it may hold the
// nodes. With lw=4 on 2 nodes of 4 GPUs, the default model runs it as fast
// on one node as on two, but its raised limit (linear scaling) lets it hold
// the node 220 min: past the horizon (every running job ends by 120 min)
// it must wait, whatever lw says.
func TestStartSmallDecidesOnTheLimitNotTheJobsModel(t *testing.T) {
	for _, lw := range []int{4, 8} {
		t.Run(fmt.Sprintf("lw=%d", lw), func(t *testing.T) {
			td := newTestDaemon(t, "")
			td.fake.running("10", "rigid", "n2", 4, 2*time.Hour, "")
			q := td.fake.pending("20", "n1,n2", 4, td.now.Add(2*time.Hour))
			td.fake.set(func() {
				q.gpuType, q.reason, q.timeLimit, q.comment = "v100", "Resources", 100*time.Minute, fmt.Sprintf("es-req min=1 max=2 lw=%d d1", lw)
			})
			r := td.cycle(t)
			if len(r.StartedSmall) != 0 {
				t.Errorf("started small %v with limit %v, past every running job's end at +2h", r.StartedSmall, td.fake.job("20").timeLimit)
			}
		})
	}
}

// TestStartSmallNeverRaisesALimitPastThePartitionsMaxTime: the hostile
// finding. The daemon raises limits as root, past Slurm's check of the
// partition's MaxTime; a job asking 2 nodes for 12 h would get 26.4 h on
// one (24 h at the smaller size plus 10 %), so with MaxTime 12 h it waits,
// and with an UNLIMITED partition, or a MaxTime above 26.4 h, it starts
// small. Job 10 runs 30 h, so the horizon and the ends-earlier rule allow
// it (26.4 h < 30 h + 12 h).
func TestStartSmallNeverRaisesALimitPastThePartitionsMaxTime(t *testing.T) {
	tests := []struct {
		name    string
		maxTime map[string]string
		started bool
		why     string // in the debug log, when not started
	}{
		{"MaxTime 12 h: not started small", map[string]string{"normal": "12:00:00"}, false,
			"the time limit it would need, 26h24m0s, exceeds the MaxTime 12h0m0s of its partition normal"},
		{"UNLIMITED: started small", nil, true, ""},
		{"MaxTime 1-06:00:00 (30 h): started small", map[string]string{"normal": "1-06:00:00"}, true, ""},
		{"MaxTime unreadable: not started small", map[string]string{"normal": "NOT_SET"}, false, "the MaxTime of its partition normal is unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			td.fake.running("10", "rigid", "n2", 4, 30*time.Hour, "")
			q := td.fake.pending("20", "n1,n2", 4, td.now.Add(30*time.Hour))
			td.fake.set(func() {
				q.gpuType, q.reason, q.timeLimit, q.comment = "v100", "Resources", 12*time.Hour, "es-req min=1 max=2 d1"
				td.fake.maxTime = tc.maxTime
			})
			var logs bytes.Buffer
			td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
			r := td.cycle(t)
			got := td.fake.commands("scontrol update")
			if !tc.started {
				if len(r.StartedSmall) != 0 || len(got) != 0 {
					t.Fatalf("started small %v with %q, past MaxTime %v", r.StartedSmall, got, tc.maxTime)
				}
				if !strings.Contains(logs.String(), tc.why) {
					t.Errorf("log does not say %q:\n%s", tc.why, logs.String())
				}
				return
			}
			want := []string{"scontrol update JobId=20 TimeLimit=1584", "scontrol update JobId=20 NumNodes=1"}
			if !slices.Equal(r.StartedSmall, []string{"20"}) || !slices.Equal(got, want) {
				t.Fatalf("started small %v with %q, want job 20 with %q", r.StartedSmall, got, want)
			}
		})
	}
}

// TestStartSmallsHorizonLeavesOutTheQueuedUsersOwnJobs: a tester's F3. A
// user's own long job must not loosen the bound on how long their queued
// job may hold nodes started small. bob's job 20 asks 2 v100 nodes for 12
// h (26.4 h on one); alice's job 11 on a t4 node ends in 20 h. With bob's
// own 30 h job 10 on n2 counted, the horizon was 30 h and job 20 started
// small past every other user's job; it must wait. A 30 h job of alice's
// allows it, as before (the median time left, 20 h, bounds it at 40 h:
// planner.WithinPeerBound).
func TestStartSmallsHorizonLeavesOutTheQueuedUsersOwnJobs(t *testing.T) {
	for _, tc := range []struct {
		longJobUser string
		started     bool
	}{{"bob", false}, {"alice", true}} {
		t.Run("the 30 h job is "+tc.longJobUser+"'s", func(t *testing.T) {
			td := newTestDaemon(t, "")
			long := td.fake.running("10", "rigid", "n2", 4, 30*time.Hour, "")
			td.fake.running("11", "rigid", "n3", 4, 20*time.Hour, "")
			q := td.fake.pending("20", "n1,n2", 4, td.now.Add(30*time.Hour))
			td.fake.set(func() {
				long.user = tc.longJobUser
				q.gpuType, q.reason, q.timeLimit, q.comment = "v100", "Resources", 12*time.Hour, "es-req min=1 max=2 d1"
			})
			r := td.cycle(t)
			if started := len(r.StartedSmall) != 0; started != tc.started {
				t.Fatalf("started small: %v (%q), want %v", r.StartedSmall, td.fake.commands("scontrol update"), tc.started)
			}
		})
	}
}

// TestStartSmallAsksAtMostABoundedNumberOfJobsPerCycle: helper 37's
// finding 4. Each job put to the planner may weigh up to
// planner.CriticalDelayJobs queued jobs against every running job's limit
// end, and anyone may queue many elastic jobs: a cycle asks the first
// startSmallAsksPerCycle in queue order and says so for the rest. Here 70
// jobs are each refused by the planner (the idle node n1 is named by the
// other jobs' reservations).
func TestStartSmallAsksAtMostABoundedNumberOfJobsPerCycle(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", "rigid", "n2", 4, 30*time.Hour, "")
	const n = startSmallAsksPerCycle + 6
	for i := range n {
		q := td.fake.pending(fmt.Sprint(100+i), "n1,n2", 4, td.now.Add(30*time.Hour+time.Duration(i)*time.Minute))
		td.fake.set(func() {
			q.gpuType, q.reason, q.timeLimit, q.comment = "v100", "Resources", 12*time.Hour, "es-req min=1 max=2 d1"
		})
	}
	var logs bytes.Buffer
	td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	r := td.cycle(t)
	if len(r.StartedSmall) != 0 {
		t.Fatalf("started small %v; no job has a whole idle node no reservation names", r.StartedSmall)
	}
	last, first := fmt.Sprint(100+startSmallAsksPerCycle-1), fmt.Sprint(100+startSmallAsksPerCycle)
	for _, want := range []string{
		"job " + last + ": 0 whole idle nodes for it",
		fmt.Sprintf("queued job %s and the jobs behind it: %d jobs were asked this cycle", first, startSmallAsksPerCycle),
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not say %q", want)
		}
	}
	if strings.Contains(logs.String(), "job "+first+": 0 whole idle nodes") {
		t.Errorf("job %s, past the bound, was asked", first)
	}
}

// TestStartSmallIsNotVetoedByAJobPinnedElsewhere: helper 38's finding.
// Elastic job 20 (2 v100 nodes, 90 min, reserved in 2 h when rigid job 10
// frees n2) would hold n1 for 198 min; the t4 nodes are held for 10 h.
// Job 21 (one v100 node, 11 h) that may start on n1 would be delayed 120
// min by that, more than job 20 saves, so job 20 waits; the same job
// pinned to n2 (--nodelist, or --exclude=n1) waits for n2 either way and
// must not stop job 20 from starting small.
func TestStartSmallIsNotVetoedByAJobPinnedElsewhere(t *testing.T) {
	tests := []struct {
		name      string
		pin       func(j *fakeJob)
		startedOn bool
	}{
		{"21 may start on n1: 20 waits", func(*fakeJob) {}, false},
		{"21 pinned to n2 by --nodelist: 20 starts small", func(j *fakeJob) { j.reqNode = "n2" }, true},
		{"21 excludes n1: 20 starts small", func(j *fakeJob) { j.excNodes = "n1" }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			weighedQueue(td, 1, tc.pin)
			r := td.cycle(t)
			if started := slices.Equal(r.StartedSmall, []string{"20"}); started != tc.startedOn {
				t.Fatalf("started small: %v, want job 20 started small: %v", r.StartedSmall, tc.startedOn)
			}
		})
	}
}

// weighedQueue sets up the weighing's cluster: rigid job 10 holds v100
// node n2 for 2 h and job 30 the t4 nodes for 10 h; elastic job 20 asks
// both v100 nodes for 90 min (reserved in 2 h), and job 21 waits behind it
// for nodes21 v100 nodes for 11 h, changed by change.
func weighedQueue(td *testDaemon, nodes21 int, change func(*fakeJob)) {
	td.fake.running("10", "rigid", "n2", 4, 2*time.Hour, "")
	td.fake.running("30", "rigid", "n3,n4", 4, 10*time.Hour, "")
	q := td.fake.pending("20", "n1,n2", 4, td.now.Add(2*time.Hour))
	l := td.fake.pending("21", "", 4, time.Time{})
	td.fake.set(func() {
		q.gpuType, q.reason, q.timeLimit, q.comment = "v100", "Resources", 90*time.Minute, "es-req min=1 max=2 lw=8 d1"
		l.gpuType, l.reason, l.timeLimit, l.nodes = "v100", "Priority", 11*time.Hour, nodes21
		change(l)
	})
}

// TestAJobIsStartedSmallOnceAndItsRaiseUndoneWhenItsOwnerSetsItsNodesBack:
// a tester's finding on the lab. Start-small computes its raise from the
// job's limit and node count; an owner who set the node count back while
// the job waited had it started small again, cycle after cycle, the limit
// growing each time (10 → 17 → 29 → 48 min for 3 nodes asked). A job is
// now started small once (a state_db record), and an owner who sets its
// node count back gets its own limit back: the raise covered its work on
// fewer nodes only.
func TestAJobIsStartedSmallOnceAndItsRaiseUndoneWhenItsOwnerSetsItsNodesBack(t *testing.T) {
	td := smallCluster(t, "", "es-req min=1 max=2 lw=8 d1")
	r := td.cycle(t)
	if !slices.Equal(r.StartedSmall, []string{"20"}) || td.fake.job("20").timeLimit != 66*time.Minute {
		t.Fatalf("first cycle: started small %v, limit %v; want job 20 at 66 min (TestStartSmall)", r.StartedSmall, td.fake.job("20").timeLimit)
	}
	q := td.fake.job("20")
	td.fake.set(func() { q.nodes = 2 }) // the owner: scontrol update JobId=20 NumNodes=2
	before := len(td.fake.commands("scontrol update"))
	r = td.cycle(t)
	got := td.fake.commands("scontrol update")[before:]
	if len(r.StartedSmall) != 0 || !slices.Equal(got, []string{"scontrol update JobId=20 TimeLimit=30"}) ||
		!slices.Equal(r.StartSmallRestored, []string{"20"}) {
		t.Fatalf("after the owner set 2 nodes back: started small %v, restored %v, updates %q; want none started, job 20's limit put back to 30 min",
			r.StartedSmall, r.StartSmallRestored, got)
	}
	before = len(td.fake.commands("scontrol update"))
	r = td.cycle(t)
	if got := td.fake.commands("scontrol update")[before:]; len(got) != 0 || len(r.StartedSmall) != 0 || len(r.StartSmallRestored) != 0 {
		t.Fatalf("third cycle: updates %q, started small %v, restored %v; want nothing more", got, r.StartedSmall, r.StartSmallRestored)
	}
	if q.timeLimit != 30*time.Minute || q.nodes != 2 {
		t.Errorf("job 20 ends with %d nodes and %v; want what its owner asked: 2 nodes, 30 min", q.nodes, q.timeLimit)
	}
}

// TestAStartSmallRecordOfAReusedJobIDDoesNotBlockAnotherUsersJob: the
// record names the job's owner; a job id Slurm lists under another user is
// another job (ids wrap), which may start small, and the stale record goes.
func TestAStartSmallRecordOfAReusedJobIDDoesNotBlockAnotherUsersJob(t *testing.T) {
	td := smallCluster(t, "", "es-req min=1 max=2 lw=8 d1")
	ctx := context.Background()
	if err := td.db.PutStartedSmall(ctx, backfillstore.StartedSmall{Job: "20", User: "mallory", FromNodes: 2, ToNodes: 1,
		OldLimit: time.Minute, NewLimit: 2 * time.Minute, At: td.now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r := td.cycle(t)
	if !slices.Equal(r.StartedSmall, []string{"20"}) {
		t.Fatalf("started small %v, want job 20 (bob's; the record was mallory's job 20)", r.StartedSmall)
	}
	recs, err := td.db.StartedSmallJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec := recs["20"]; rec.User != td.fake.job("20").user || rec.OldLimit != 30*time.Minute || rec.NewLimit != 66*time.Minute {
		t.Errorf("record %+v, want bob's job 20 started small from 30 to 66 min", rec)
	}
}

// TestSetBack: when a job started small holds or asks for more nodes than
// the daemon set, with a limit within the daemon's raise, the raise goes
// (a tester's ways round the first check: lowering the limit by a minute,
// and a requeued job whose new node count Slurm 22.05 lists only once it
// runs, or one that starts before the daemon sees it wait).
func TestSetBack(t *testing.T) {
	rec := backfillstore.StartedSmall{Job: "20", User: "bob", FromNodes: 2, ToNodes: 1, GPUs: 1, OldLimit: 2 * time.Minute, NewLimit: 5 * time.Minute}
	for _, tc := range []struct {
		name                   string
		state, limit, nodeList string
		nodes                  int
		gres                   string // squeue's tres-per-node ("+job:N": and tres-per-job N); "" is the recorded gres:gpu:t4:1
		unrecordedGPUs         bool   // a record of before schema 8
		want                   bool
	}{
		{"waiting with its nodes set back and the raised limit", "PENDING", "5:00", "", 2, "", false, true},
		{"the limit lowered by a minute is still within the raise", "PENDING", "4:00", "", 2, "", false, true},
		{"running on more nodes than the daemon set", "RUNNING", "5:00", "n3,n4", 1, "", false, true},
		{"running on the nodes the daemon set", "RUNNING", "5:00", "n3", 1, "", false, false},
		{"waiting on the nodes the daemon set", "PENDING", "5:00", "", 1, "", false, false},
		{"the limit asked for already", "PENDING", "2:00", "", 2, "", false, false},
		{"a limit an admin raised past the daemon's", "PENDING", "1:00:00", "", 2, "", false, false},
		{"ended", "COMPLETED", "5:00", "n3,n4", 2, "", false, false},
		{"an unreadable limit", "PENDING", "soon", "", 2, "", false, false},
		// A tester's finding: requeued, then `scontrol update Gres=gpu:t4:4`.
		{"running on the nodes the daemon set with more GPUs per node", "RUNNING", "5:00", "n3", 1, "gres:gpu:t4:4", false, true},
		{"waiting with more GPUs per node", "PENDING", "5:00", "", 1, "gres/gpu:4", false, true},
		{"fewer GPUs per node", "RUNNING", "5:00", "n3", 1, "gres:gpu:t4:0", false, false},
		{"more GPUs per node, the record of before schema 8", "RUNNING", "5:00", "n3", 1, "gres:gpu:t4:4", true, false},
		{"an unreadable request", "RUNNING", "5:00", "n3", 1, "gres:gpu:t4:many", false, false},
		// A tester's job: --gpus=2 kept beside Gres=gpu:t4:4 ran with 4.
		{"a per-job count beside more GPUs per node", "RUNNING", "5:00", "n3", 1, "gres:gpu:t4:4+job:2", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gres, rec := tc.gres, rec
			if gres == "" {
				gres = "gres:gpu:t4:1"
			}
			if tc.unrecordedGPUs {
				rec.GPUs = 0
			}
			perJob := ""
			if g, job, ok := strings.Cut(gres, "+job:"); ok {
				gres, perJob = g, "gres:gpu:"+job
			}
			j := slurmcli.Job{ID: "20", User: "bob", State: tc.state, TimeLimit: tc.limit, NodeList: tc.nodeList, Nodes: tc.nodes,
				TRESPerNode: gres, TRESPerJob: perJob}
			if _, _, got := setBack(j, rec); got != tc.want {
				t.Errorf("setBack(%s, limit %s, %d nodes %q) = %v, want %v", tc.state, tc.limit, tc.nodes, tc.nodeList, got, tc.want)
			}
		})
	}
}

// A job started small on 1 of its 2 nodes (4 GPUs each) whose owner asks
// for 8 GPUs per node instead of a second node (requeued, then `scontrol
// update Gres=`; a tester's finding) loses the raise once it runs so: the
// record holds the 4 GPUs the daemon left it.
func TestAJobStartedSmallThatRunsWithMoreGPUsPerNodeLosesTheRaise(t *testing.T) {
	td := smallCluster(t, "", "es-req min=1 max=2 lw=8 d1")
	if r := td.cycle(t); !slices.Equal(r.StartedSmall, []string{"20"}) {
		t.Fatalf("started small %v, want job 20", r.StartedSmall)
	}
	recs, err := td.db.StartedSmallJobs(context.Background())
	if err != nil || recs["20"].GPUs != 4 || recs["20"].ToNodes != 1 {
		t.Fatalf("start-small record %+v (%v), want 1 node, 4 GPUs", recs["20"], err)
	}
	q := td.fake.job("20")
	td.fake.set(func() {
		q.state, q.nodeList, q.nodes, q.gpusPerNode, q.start, q.end = "RUNNING", "n1", 1, 8, td.now, td.now.Add(q.timeLimit)
	})
	before := len(td.fake.commands("scontrol update"))
	r := td.cycle(t)
	if got := td.fake.commands("scontrol update")[before:]; !slices.Contains(got, "scontrol update JobId=20 TimeLimit=30") ||
		!slices.Equal(r.StartSmallRestored, []string{"20"}) {
		t.Fatalf("updates %q, restored %v; want job 20's limit put back to 30 min", got, r.StartSmallRestored)
	}
}

// A job started small that its owner got onto more nodes before the daemon
// saw it wait (held, set back, released while a node freed) loses the raise
// once it runs.
func TestARunningJobStartedSmallOnMoreNodesLosesTheRaise(t *testing.T) {
	td := smallCluster(t, "", "es-req min=1 max=2 lw=8 d1")
	if r := td.cycle(t); !slices.Equal(r.StartedSmall, []string{"20"}) {
		t.Fatalf("started small %v, want job 20", r.StartedSmall)
	}
	q := td.fake.job("20")
	td.fake.set(func() {
		q.state, q.nodeList, q.nodes, q.start, q.end = "RUNNING", "n1,n2", 2, td.now, td.now.Add(q.timeLimit)
	})
	before := len(td.fake.commands("scontrol update"))
	r := td.cycle(t)
	if got := td.fake.commands("scontrol update")[before:]; !slices.Contains(got, "scontrol update JobId=20 TimeLimit=30") ||
		!slices.Equal(r.StartSmallRestored, []string{"20"}) {
		t.Fatalf("updates %q, restored %v; want job 20's limit put back to 30 min", got, r.StartSmallRestored)
	}
}

// A start-small record of a job squeue lists under a stand-in name (its
// owner's name does not resolve: an LDAP outage) is kept, not taken for a
// reused id's: once the name is back, the job is not started small a
// second time. The record holds the owner's uid, which squeue still
// prints; a record written before schema version 10 has none and waits
// for the name. A job of another uid under the id is a reused id's: the
// record goes.
func TestAStartSmallRecordOfAJobListedUnderAStandInIsKept(t *testing.T) {
	for _, tc := range []struct {
		name, standIn string
		recordUID     bool
		otherUID      bool
		wantKept      bool
	}{
		{"24.11's stand-in, the record with the uid", "1001", true, false, true},
		{"22.05's stand-in, the record with the uid", "nobody", true, false, true},
		{"24.11's stand-in, a record without a uid (schema 9)", "1001", false, false, true},
		{"22.05's stand-in, a record without a uid (schema 9)", "nobody", false, false, true},
		{"another uid printed as the stand-in nobody: a reused id", "nobody", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := smallCluster(t, "", "es-req min=1 max=2 lw=8 d1")
			ctx := context.Background()
			if r := td.cycle(t); !slices.Equal(r.StartedSmall, []string{"20"}) {
				t.Fatalf("started small %v, want job 20", r.StartedSmall)
			}
			q := td.fake.job("20")
			owner := q.user
			recs, err := td.db.StartedSmallJobs(ctx)
			if err != nil || recs["20"].UID != fakeUID(owner) {
				t.Fatalf("start-small records %+v (%v); want job 20's with %s's uid %s", recs, err, owner, fakeUID(owner))
			}
			if !tc.recordUID {
				rec := recs["20"]
				rec.UID = ""
				if err := td.db.PutStartedSmall(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			uid := fakeUID(owner)
			if tc.otherUID {
				uid = "4242"
			}
			td.fake.set(func() { q.user, q.uid = tc.standIn, uid })
			td.fake.unresolve(owner) // the outage that makes squeue print a stand-in
			td.cycle(t)
			recs, err = td.db.StartedSmallJobs(ctx)
			if _, kept := recs["20"]; err != nil || kept != tc.wantKept {
				t.Fatalf("start-small records %+v (%v) while squeue printed %s (uid %s); want job 20's kept: %v", recs, err, tc.standIn, uid, tc.wantKept)
			}
			if !tc.wantKept {
				return
			}
			td.fake.set(func() { q.user, q.uid = owner, "" })
			td.fake.resolve()
			if r := td.cycle(t); len(r.StartedSmall) != 0 {
				t.Errorf("started small %v once the name resolved again, want none: job 20 was started small already", r.StartedSmall)
			}
		})
	}
}
