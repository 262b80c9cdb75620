package daemon

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// movingJob is a d2 elastic job of 4 GPUs (its maximum: it does not grow)
// that runs 5 times faster on a V100 than on a T4, on t4 node n3, with 10
// hours left.
const movingJob = "es-req min=1 max=4 lw=4 d2 speeds=t4:0.2,v100:1"

// A long d2 job on a T4 node while the V100 nodes are idle and nothing
// waits: the daemon records the move, requeues the job, and once it waits
// sets its excluded nodes to its owner's (n4) plus n3, so that Slurm
// restarts it on a V100 node; it lends nothing in that cycle. When the job
// runs again the move is marked ran; when it waits again later (a node
// failure's requeue) the owner's list is put back, and the job is never
// moved again.
func TestTheDaemonMovesALongD2JobOffItsT4ToIdleV100s(t *testing.T) {
	td := newTestDaemon(t, "")
	j := td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
	td.fake.set(func() { j.excNodes = "n4" })
	r := td.cycle(t)
	if got, want := td.fake.commands("scontrol"), []string{"scontrol requeue 10", "scontrol update JobId=10 ExcNodeList=n4,n3"}; !slices.Equal(got, want) {
		t.Fatalf("commands %q, want %q", got, want)
	}
	if !slices.Equal(r.Moved, []string{"10"}) || len(r.Planned.Grows) != 0 || len(td.fake.commands("sbatch")) != 0 {
		t.Fatalf("report moved %q, grows %v; want job 10 moved and nothing lent", r.Moved, r.Planned.Grows)
	}
	if ds := decisionsOf(t, td, "move"); len(ds) != 1 || ds[0].Job != "10" || ds[0].Node != "n1" || ds[0].GPUs != 4 {
		t.Errorf("move decisions %+v, want one for job 10 to n1's 4 GPUs", ds)
	}
	if got := value(td.Metrics().Moves.WithLabelValues("requeued")); got != 1 {
		t.Errorf("moves_total{result=requeued} = %v, want 1", got)
	}
	state := func() backfillstore.Moved {
		t.Helper()
		m, err := td.db.MovedJobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return m["10"]
	}
	if m := state(); m.State != backfillstore.MoveExcluded || !slices.Equal(m.Owner, []string{"n4"}) || !slices.Equal(m.From, []string{"n3"}) {
		t.Fatalf("record %+v, want excluded, owner n4, from n3", m)
	}
	td.advance(20 * time.Second)
	td.fake.set(func() { j.state, j.reason, j.nodeList, j.start = "RUNNING", "", "n1", td.now })
	td.cycle(t)
	if m := state(); m.State != backfillstore.MoveRan {
		t.Fatalf("record %+v after the restart on n1, want ran", m)
	}
	td.advance(time.Hour)
	td.fake.set(func() { j.state, j.reason, j.nodeList = "PENDING", "BeginTime", "" })
	td.cycle(t)
	if got := td.fake.commands("scontrol update JobId=10 ExcNodeList="); !slices.Contains(got, "scontrol update JobId=10 ExcNodeList=n4") {
		t.Fatalf("updates %q; want the owner's n4 put back", got)
	}
	if m := state(); m.State != backfillstore.MoveRestored {
		t.Fatalf("record %+v, want restored", m)
	}
	td.fake.set(func() { j.state, j.reason, j.nodeList, j.start = "RUNNING", "", "n3", td.now })
	for range 3 {
		td.advance(2 * time.Second)
		td.cycle(t)
	}
	if got := td.fake.commands("scontrol requeue"); len(got) != 1 {
		t.Fatalf("requeues %q; a job is moved once", got)
	}
	td.fake.set(func() { j.state = "COMPLETED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	td.fake.set(func() { td.fake.jobs = nil })
	td.advance(2 * time.Second)
	td.cycle(t)
	if m, err := td.db.MovedJobs(t.Context()); err != nil || len(m) != 0 {
		t.Fatalf("records after the job is gone: %+v, %v; want none", m, err)
	}
}

// A long d2 job that grew onto a T4 extra job is moved all the same
// (BENCHMARKS.md, issue 17, E54: such a job kept the T4s' pace to the end
// with every V100 idle): the daemon requeues it, then cancels its extra
// job and records why; its pace counts the extra job's GPUs. A requeue
// Slurm refuses (--no-requeue; helper 73) leaves the extra job running,
// and one scancel fails to end is cancelled by the next cycle.
func TestTheDaemonMovesAJobThatGrewOntoAnExtraJobAndCancelsIt(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", "es-req min=1 max=8 lw=8 d2 speeds=t4:0.2,v100:1", "n3", 4, 10*time.Hour, rendezvous(t, "10"))
	td.fake.extra("30", "10", "n4", 2, time.Hour)
	record(t, td, backfillstore.ExtraJob{ID: "30", Parent: "10", Node: "n4", GPUs: 2, Submitted: td.now, End: td.now.Add(time.Hour)})
	r := td.cycle(t)
	var order []string
	for _, c := range td.fake.calls {
		if strings.HasPrefix(c, "scancel") || strings.HasPrefix(c, "scontrol requeue") {
			order = append(order, c)
		}
	}
	if len(order) != 2 || order[0] != "scontrol requeue 10" || !strings.HasPrefix(order[1], "scancel") || !strings.Contains(order[1], "30") {
		t.Fatalf("requeues and cancels %q, want job 10 requeued, then extra job 30 cancelled", order)
	}
	if !slices.Equal(r.Moved, []string{"10"}) || !slices.Contains(r.Cancelled, "30") || len(r.Planned.Grows) != 0 {
		t.Fatalf("report moved %q, cancelled %q, grows %v; want job 10 moved, 30 cancelled, nothing lent", r.Moved, r.Cancelled, r.Planned.Grows)
	}
	if ds := decisionsOf(t, td, "cancel"); len(ds) != 1 || ds[0].Extra != "30" || !strings.Contains(ds[0].Detail, "faster GPUs") {
		t.Errorf("cancel decisions %+v, want one for extra job 30 naming the move", ds)
	}
	if ds := decisionsOf(t, td, "move"); len(ds) != 1 || !strings.Contains(ds[0].Detail, "1 extra jobs cancelled once it waits") {
		t.Errorf("move decisions %+v, want one saying its extra job is cancelled once it waits", ds)
	}
	grown := func(t *testing.T) (*testDaemon, *fakeJob, *fakeJob) {
		td := newTestDaemon(t, "")
		j := td.fake.running("10", "es-req min=1 max=8 lw=8 d2 speeds=t4:0.2,v100:1", "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		x := td.fake.extra("30", "10", "n4", 2, time.Hour)
		record(t, td, backfillstore.ExtraJob{ID: "30", Parent: "10", Node: "n4", GPUs: 2, Submitted: td.now, End: td.now.Add(time.Hour)})
		return td, j, x
	}
	t.Run("a requeue Slurm refuses leaves the extra job running", func(t *testing.T) {
		td, j, x := grown(t)
		td.fake.set(func() { j.noRequeue = true })
		td.cycle(t)
		if got := td.fake.commands("scancel"); len(got) != 0 || x.state != "RUNNING" {
			t.Fatalf("cancels %q, extra job %s; want none and the extra job running", got, x.state)
		}
	})
	t.Run("an extra job scancel fails to end is cancelled the next cycle", func(t *testing.T) {
		td, j, x := grown(t)
		td.fake.refuse = map[string]string{order[1]: "scancel: error: Socket timed out"}
		td.cycle(t)
		if got := td.fake.commands("scontrol requeue"); len(got) != 1 || x.state != "RUNNING" {
			t.Fatalf("requeues %q, extra job %s; want job 10 requeued and the extra job's scancel failed", got, x.state)
		}
		td.fake.refuse = nil
		td.fake.set(func() { j.state, j.reason, j.nodeList = "PENDING", "BeginTime", "" })
		td.advance(2 * time.Second)
		td.cycle(t)
		if x.state != "CANCELLED" {
			t.Fatalf("extra job %s after the next cycle, want CANCELLED (its parent waits)", x.state)
		}
	})
}

// A job that grew onto an extra job is weighed at the GPUs it holds, the
// extra job's included (BENCHMARKS.md, issue 17, E55): on a T4 node and a
// T4 extra job, with V100s 1.5 × a T4 for it, one V100 node (its own node
// count) runs it slower than its 8 T4s, but both idle V100 nodes run it
// faster by far, so it is moved (it restarts on one and grows onto the
// other); with one of them held by another job it is not.
func TestTheDaemonWeighsAMoveAtTheGPUsTheJobHoldsWithItsExtraJobs(t *testing.T) {
	grown := func(t *testing.T) *testDaemon {
		td := newTestDaemon(t, "")
		td.fake.running("10", "es-req min=1 max=8 lw=8 d2 speeds=t4:1,v100:1.5", "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		td.fake.extra("30", "10", "n4", 4, time.Hour)
		record(t, td, backfillstore.ExtraJob{ID: "30", Parent: "10", Node: "n4", GPUs: 4, Submitted: td.now, End: td.now.Add(time.Hour)})
		return td
	}
	td := grown(t)
	td.cycle(t)
	if got := td.fake.commands("scontrol requeue"); !slices.Equal(got, []string{"scontrol requeue 10"}) {
		t.Fatalf("requeues %q, want job 10 moved", got)
	}
	if ds := decisionsOf(t, td, "move"); len(ds) != 1 || ds[0].Node != "n1,n2" {
		t.Errorf("move decisions %+v, want one for job 10 weighed on n1,n2", ds)
	}
	td2 := grown(t)
	td2.fake.running("20", "", "n2", 4, time.Hour, "")
	td2.cycle(t)
	if got := td2.fake.commands("scontrol requeue"); len(got) != 0 {
		t.Errorf("requeues %q with one V100 node idle (4 V100s run it slower than its 8 T4s), want none", got)
	}
}

// lentV100Cluster: elastic job 20 on n2's V100s with its recorded extra
// job 21 holding n1's, then what also adds, then the long d2 job 10 on the
// T4 node n3.
func lentV100Cluster(t *testing.T, also func(td *testDaemon)) *testDaemon {
	t.Helper()
	td := newTestDaemon(t, "")
	td.fake.running("20", "es-req min=1 max=8 lw=8 d2", "n2", 4, time.Hour, rendezvous(t, "20"))
	td.fake.extra("21", "20", "n1", 4, 30*time.Minute)
	record(t, td, backfillstore.ExtraJob{ID: "21", Parent: "20", Node: "n1", GPUs: 4, Submitted: td.now, End: td.now.Add(30 * time.Minute)})
	also(td)
	td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
	return td
}

// The V100s of n1 are lent to another job's extra job and n2 is that
// job's own: the daemon still moves the long job off its T4, since Slurm
// preempts the extra job (its partition is preemptible) for it, and it
// excludes both T4 nodes (its own n3 and the idle n4), so that Slurm
// starts it on the V100s rather than on the idle slower node.
func TestTheDaemonMovesALongD2JobOntoV100sLentToExtraJobs(t *testing.T) {
	td := lentV100Cluster(t, func(*testDaemon) {})
	r := td.cycle(t)
	if got, want := td.fake.commands("scontrol"), []string{"scontrol requeue 10", "scontrol update JobId=10 ExcNodeList=n3,n4"}; !slices.Equal(got, want) {
		t.Fatalf("commands %q, want %q", got, want)
	}
	if ds := decisionsOf(t, td, "move"); len(ds) != 1 || ds[0].Job != "10" || ds[0].Node != "n1" {
		t.Errorf("move decisions %+v, want one for job 10 to n1", ds)
	}
	if len(r.Moved) != 1 {
		t.Errorf("report moved %q, want job 10", r.Moved)
	}
	// The same cluster with n1 held by a job that is not an extra job:
	// nothing to preempt, no move.
	td2 := newTestDaemon(t, "")
	td2.fake.running("20", "", "n1,n2", 4, time.Hour, "")
	td2.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
	td2.cycle(t)
	if got := td2.fake.commands("scontrol requeue"); len(got) != 0 {
		t.Errorf("requeues %q with the V100s held by a job Slurm does not preempt, want none", got)
	}
	// The first cluster with another user's job in the preemptible
	// partition on n1 too (CPUs only): Slurm picks which of the two to
	// preempt by its own order and may requeue that job while the extra job
	// keeps the V100s (a tester saw it on the lab), so n1 counts nothing lent.
	td3 := lentV100Cluster(t, func(td *testDaemon) {
		other := td.fake.running("30", "", "n1", 0, time.Hour, "")
		td.fake.set(func() { other.user, other.partition = "carol", "low" })
	})
	td3.cycle(t)
	if got := td3.fake.commands("scontrol requeue"); len(got) != 0 {
		t.Errorf("requeues %q with another user's preemptible job beside the extra job on the V100s, want none", got)
	}
	// The same with a decoy the lending job's owner submitted in the extra
	// job form (named and commented as one for her job 20, not recorded):
	// Slurm may preempt it as well (a reviewer's case).
	td4 := lentV100Cluster(t, func(td *testDaemon) { td.fake.extra("31", "20", "n1", 0, time.Hour) })
	td4.cycle(t)
	if got := td4.fake.commands("scontrol requeue"); len(got) != 0 {
		t.Errorf("requeues %q with an unrecorded job in the extra job form beside the extra job on the V100s, want none", got)
	}
}

// Which jobs are not moved: the option off; a d1 job; a job already on the
// fastest type; a job whose time left is short (the move costs more than
// it saves); a job far shorter than another running job; a pending job
// that may use the V100s; a job with an extra job this daemon did not
// record; a job in a partition
// where running jobs are never shrunk; a job whose node list or request
// changed before the re-read; a job Slurm may not requeue (tried once,
// never again); and a dry run (logged once, nothing run).
func TestTheDaemonMovesNoJobItMustNot(t *testing.T) {
	for _, tc := range []struct {
		name, toml, comment, nodes string
		limit                      time.Duration
		setup                      func(td *testDaemon, j *fakeJob)
		wantRequeues, wantDecided  int
	}{
		{name: "option off", toml: "move_to_faster = false\n", comment: movingJob, nodes: "n3"},
		{name: "a d1 job", comment: "es-req min=1 max=4 lw=4 d1 speeds=t4:0.2,v100:1", nodes: "n3"},
		{name: "already on the fastest type", comment: movingJob, nodes: "n2"},
		{name: "little time left", comment: movingJob, nodes: "n3", limit: 3 * time.Minute},
		{name: "far shorter than another running job", comment: movingJob, nodes: "n3", limit: time.Hour,
			setup: func(td *testDaemon, _ *fakeJob) {
				td.fake.running("11", "es-req min=1 max=4 lw=4 d1", "n4", 4, 30*time.Hour, rendezvous(t, "11"))
			}},
		{name: "a pending job may use the V100s", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, _ *fakeJob) { td.fake.pending("20", "", 4, td.now.Add(time.Hour)) }},
		{name: "a job with an extra job this daemon did not record", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, _ *fakeJob) { td.fake.extra("30", "10", "n4", 2, time.Hour) }},
		{name: "a partition where running jobs are never shrunk", toml: "[admit]\noff_partitions = [\"normal\"]\n", comment: movingJob, nodes: "n3"},
		{name: "the job's request changed before the re-read", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, j *fakeJob) { td.fake.onJobs = func() { j.comment = "es-req min=1 max=4 lw=4 d1" } }},
		{name: "Slurm refuses the requeue (--no-requeue)", comment: movingJob, nodes: "n3", wantRequeues: 1,
			setup: func(td *testDaemon, j *fakeJob) { td.fake.set(func() { j.noRequeue = true }) }},
		{name: "dry run", toml: "dry_run = true\n", comment: movingJob, nodes: "n3", wantDecided: 1},
		{name: "the owner excludes the faster nodes (helper 41's D1)", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, j *fakeJob) { td.fake.set(func() { j.excNodes = "n1,n2" }) }},
		{name: "a job asking for a GPU type (--gres=gpu:t4:4)", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, j *fakeJob) { td.fake.set(func() { j.gpuType = "t4" }) }},
		{name: "a job with a --constraint", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, j *fakeJob) { td.fake.set(func() { j.features = "fast" }) }},
		{name: "a job with a --nodelist", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, j *fakeJob) { td.fake.set(func() { j.reqNode = "n3" }) }},
		{name: "an array task, which squeue's %i names differently (helper 41's D3)", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, j *fakeJob) { td.fake.set(func() { j.printedID = "10_1" }) }},
		{name: "a heterogeneous job's component (helper 41's D4)", comment: movingJob, nodes: "n3",
			setup: func(td *testDaemon, j *fakeJob) { td.fake.set(func() { j.printedID = "10+0" }) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, tc.toml)
			limit := cmpOr(tc.limit, 10*time.Hour)
			j := td.fake.running("10", tc.comment, tc.nodes, 4, limit, rendezvous(t, "10"))
			if tc.setup != nil {
				tc.setup(td, j)
			}
			for range 3 {
				td.cycle(t)
				td.advance(2 * time.Second)
			}
			if got := td.fake.commands("scontrol requeue"); len(got) != tc.wantRequeues {
				t.Fatalf("requeues %q, want %d", got, tc.wantRequeues)
			}
			if got := td.fake.commands("scontrol update JobId=10 ExcNodeList"); len(got) != 0 {
				t.Fatalf("updates %q, want none", got)
			}
			ds := decisionsOf(t, td, "move")
			if len(ds) != tc.wantDecided {
				t.Fatalf("move decisions %+v, want %d", ds, tc.wantDecided)
			}
			if tc.toml == "dry_run = true\n" && !strings.Contains(ds[0].Detail, "dry run") {
				t.Errorf("dry-run decision %+v does not say so", ds[0])
			}
		})
	}
}

// cmpOr is d, or def when d is zero.
func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// A moved job that waits longer than moveWaitBound for the faster nodes
// (a job submitted meanwhile took them) gets its owner's excluded nodes
// back, so that it may start anywhere; a list its owner changed while it
// waited is left to the owner.
func TestAMovedJobThatWaitsTooLongMayStartAnywhereAgain(t *testing.T) {
	for _, owner := range []bool{false, true} {
		td := newTestDaemon(t, "")
		j := td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		td.cycle(t)
		if got := td.fake.commands("scontrol update"); !slices.Equal(got, []string{"scontrol update JobId=10 ExcNodeList=n3,n4"}) {
			t.Fatalf("updates %q after the move", got)
		}
		if owner {
			td.fake.set(func() { j.excNodes = "n2,n3" })
		}
		td.advance(moveWaitBound / 2)
		td.cycle(t)
		if got := td.fake.commands("scontrol update"); len(got) != 1 {
			t.Fatalf("updates %q before the bound, want the move's only", got)
		}
		td.advance(moveWaitBound)
		td.cycle(t)
		got := td.fake.commands("scontrol update")
		switch {
		case owner && len(got) != 1:
			t.Fatalf("updates %q: the owner's list was changed back", got)
		case !owner && !slices.Equal(got, []string{"scontrol update JobId=10 ExcNodeList=n3,n4", "scontrol update JobId=10 ExcNodeList="}):
			t.Fatalf("updates %q, want the owner's empty list put back after the bound", got)
		}
		m, err := td.db.MovedJobs(t.Context())
		if err != nil || m["10"].State != backfillstore.MoveRestored {
			t.Fatalf("record %+v, %v; want restored", m["10"], err)
		}
	}
}

// What helper 41 found, each now held: a requeue that reports an error
// after slurmctld acted goes on with the move; a daemon killed between the
// ExcNodeList update and its record keeps the owner's list (recorded
// before the requeue), not the one it set; another user's job posing as
// the job's extra job does not stop the move; and a requeued job whose
// exclusion Slurm refuses is not nudged to start before it is set.
func TestTheMoveSurvivesWhatATesterTried(t *testing.T) {
	t.Run("a requeue that timed out after slurmctld acted", func(t *testing.T) {
		td := newTestDaemon(t, "")
		j := td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		td.fake.set(func() { j.requeueErr = true })
		r := td.cycle(t)
		if got := td.fake.commands("scontrol update"); !slices.Equal(got, []string{"scontrol update JobId=10 ExcNodeList=n3,n4"}) || !slices.Equal(r.Moved, []string{"10"}) {
			t.Fatalf("updates %q, moved %q; want the exclusion set and job 10 moved", got, r.Moved)
		}
	})
	t.Run("a restart after the ExcNodeList update keeps the owner's list", func(t *testing.T) {
		td := newTestDaemon(t, "")
		j := td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		td.fake.set(func() { j.excNodes = "n4" })
		td.cycle(t)
		// As if the daemon died after the update: the record says requeued.
		m, err := td.db.MovedJobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		rec := m["10"]
		rec.State, rec.Set = backfillstore.MoveRequeued, nil
		if err := td.db.PutMoved(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		td.advance(2 * time.Second)
		td.cycle(t)
		if m, _ := td.db.MovedJobs(t.Context()); m["10"].State != backfillstore.MoveExcluded || !slices.Equal(m["10"].Owner, []string{"n4"}) {
			t.Fatalf("record %+v after the restart, want excluded with the owner's n4", m["10"])
		}
		td.fake.set(func() { j.state, j.reason, j.nodeList, j.start = "RUNNING", "", "n1", td.now })
		td.advance(2 * time.Second)
		td.cycle(t)
		td.fake.set(func() { j.state, j.reason, j.nodeList = "PENDING", "BeginTime", "" })
		td.advance(2 * time.Second)
		td.cycle(t)
		if j.excNodes != "n4" {
			t.Fatalf("excluded nodes %q after the later requeue, want the owner's n4", j.excNodes)
		}
	})
	t.Run("another user's job posing as the extra job", func(t *testing.T) {
		td := newTestDaemon(t, "")
		td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		x := td.fake.extra("30", "10", "n4", 2, time.Hour)
		td.fake.set(func() { x.user = "mallory" })
		if r := td.cycle(t); !slices.Equal(r.Moved, []string{"10"}) {
			t.Fatalf("moved %q, want job 10 (mallory's look-alike is not its extra job)", r.Moved)
		}
	})
	t.Run("a refused exclusion keeps the job from being nudged", func(t *testing.T) {
		td := newTestDaemon(t, "")
		j := td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		td.fake.refuse = map[string]string{"scontrol update JobId=10 ExcNodeList=n3,n4": "slurm_update error: Socket timed out"}
		td.cycle(t)
		td.fake.set(func() { j.start = time.Time{} }) // its begin time passed: squeue prints none
		for range 3 {
			td.advance(20 * time.Second)
			td.cycle(t)
		}
		if got := td.fake.commands("scontrol update JobId=10 ExcNodeList"); len(got) < 2 {
			t.Fatalf("exclusions tried %q, want one a cycle", got)
		}
		if got := td.fake.commands("scontrol update JobId=10 StartTime"); len(got) != 0 {
			t.Fatalf("nudged %q before its exclusion was set", got)
		}
	})
}
