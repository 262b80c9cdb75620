package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// keepOffTOML makes T4 serve a job at 0.8 of a V100 (planner.KeepOff's
// 0.75 passes) on the fake's two V100 (n1, n2) and two T4 (n3, n4) nodes.
const keepOffTOML = "speeds = { v100 = 1.0, t4 = 0.8 }\n"

// keepOffQueue queues bob's job 30 pinned to two V100 nodes (--gres=gpu:
// v100:4, waiting for resources, planned in 1 h) and behind it alice's
// elastic d2 job 20 asking one node of 4 GPUs of any type (planned in 2 h,
// 2 h time limit: started on a V100 now it would still run when the pinned
// job is planned to start), waiting its turn, which excluded n4 itself.
func keepOffQueue(td *testDaemon) (pinned, job *fakeJob) {
	pinned = td.fake.pending("30", "n1,n2", 4, td.now.Add(time.Hour))
	job = td.fake.pending("20", "", 4, td.now.Add(2*time.Hour))
	td.fake.set(func() {
		pinned.gpuType, pinned.reason = "v100", "Resources"
		job.user, job.comment, job.reason, job.excNodes, job.nodes = "alice", "es-req min=1 max=2 lw=4 d2", "Priority", "n4", 1
		job.timeLimit = 2 * time.Hour
	})
	return pinned, job
}

func keptOffRecords(t *testing.T, td *testDaemon) map[string]backfillstore.KeptOff {
	t.Helper()
	recs, err := td.db.KeptOffJobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// While a pinned V100 job waits, the elastic d2 job that T4 serves at 0.8
// of a V100 is kept off the V100 nodes (its own exclusion n4 kept), once;
// when the pinned job is gone, exactly those nodes are taken out again and
// the record is forgotten.
func TestAnElasticJobIsKeptOffTheTypeAWaitingPinnedJobNeedsAndPutBackAfter(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	r := td.cycle(t)
	want := []string{"scontrol update JobId=20 ExcNodeList=n4,n1,n2"}
	if got := td.fake.commands("scontrol update"); !slices.Equal(got, want) || !slices.Equal(r.KeptOff, []string{"20"}) {
		t.Fatalf("commands %q, report %q; want %q", got, r.KeptOff, want)
	}
	if recs := keptOffRecords(t, td); !slices.Equal(recs["20"].Nodes, []string{"n1", "n2"}) || !slices.Equal(recs["20"].Types, []string{"v100"}) {
		t.Errorf("kept_off records %+v, want job 20's n1,n2 of v100", recs)
	}
	if ds := decisionsOf(t, td, "keep-off"); len(ds) != 1 || ds[0].Job != "20" {
		t.Errorf("keep-off decisions %+v, want one for job 20", ds)
	}
	if got := value(td.Metrics().KeepOffs.WithLabelValues("keep-off")); got != 1 {
		t.Errorf("keep_offs_total{result=keep-off} = %v, want 1", got)
	}
	td.advance(2 * time.Second)
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); len(got) != 1 {
		t.Fatalf("updates after a second cycle %q, want the one", got)
	}
	td.fake.set(func() { pinned.state = "CANCELLED" })
	td.advance(2 * time.Second)
	r = td.cycle(t)
	want = append(want, "scontrol update JobId=20 ExcNodeList=n4")
	if got := td.fake.commands("scontrol update"); !slices.Equal(got, want) || !slices.Equal(r.KeptOff, []string{"20"}) {
		t.Fatalf("commands %q, report %q; want %q", got, r.KeptOff, want)
	}
	if recs := keptOffRecords(t, td); job.excNodes != "n4" || len(recs["20"].Nodes) != 0 || recs["20"].Since.IsZero() {
		t.Errorf("after the lift: excluded %q, records %+v; want n4 and job 20's without nodes, with when it was first kept off", job.excNodes, recs)
	}
	if ds := decisionsOf(t, td, "keep-off-lifted"); len(ds) != 1 || ds[0].Job != "20" {
		t.Errorf("keep-off-lifted decisions %+v, want one for job 20", ds)
	}
	td.fake.set(func() { job.state = "COMPLETED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	td.fake.set(func() { td.fake.jobs = slices.DeleteFunc(td.fake.jobs, func(j *fakeJob) bool { return j == job }) })
	td.advance(2 * time.Second)
	td.cycle(t)
	if recs := keptOffRecords(t, td); len(recs) != 0 {
		t.Errorf("records after job 20 is gone %+v, want none", recs)
	}
}

// A job that excluded nothing itself gets an empty list back when the
// pinned job leaves (the lab test found the lift of "" skipped as if tried).
func TestAJobThatExcludedNothingGetsAnEmptyListBack(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	td.fake.set(func() { job.excNodes = "" })
	td.cycle(t)
	td.fake.set(func() { pinned.state = "CANCELLED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	want := []string{"scontrol update JobId=20 ExcNodeList=n1,n2", "scontrol update JobId=20 ExcNodeList="}
	if got := td.fake.commands("scontrol update"); !slices.Equal(got, want) || job.excNodes != "" {
		t.Errorf("updates %q, excluded %q; want %q and none", got, job.excNodes, want)
	}
}

// The owner may change the job's exclusions while it is kept off (adding
// n3, or clearing them): the list is the owner's from then on, whatever
// nodes it names, and the daemon changes it no more (helper 39's finding:
// it used to take out the owner's n1 and n2 too, and to add its nodes back
// to a cleared list).
func TestAnOwnersChangeWhileKeptOffMakesTheListTheOwners(t *testing.T) {
	for _, edit := range []string{"n4,n1,n2,n3", ""} {
		t.Run("ExcNodeList="+edit, func(t *testing.T) {
			td := newTestDaemon(t, keepOffTOML)
			pinned, job := keepOffQueue(td)
			td.cycle(t)
			td.fake.set(func() { job.excNodes = edit }) // the owner: scontrol update JobId=20 ExcNodeList=...
			td.advance(2 * time.Second)
			td.cycle(t)
			td.fake.set(func() { pinned.state = "CANCELLED" })
			td.advance(2 * time.Second)
			td.cycle(t)
			if got := td.fake.commands("scontrol update"); job.excNodes != edit || len(got) != 1 {
				t.Errorf("excluded nodes %q after the owner's change and the pinned job's end, updates %q; want the owner's %q and the one keep-off",
					job.excNodes, got, edit)
			}
			if recs := keptOffRecords(t, td); !recs["20"].Released || len(recs["20"].Nodes) != 0 {
				t.Errorf("record %+v, want job 20 released, without nodes", recs["20"])
			}
		})
	}
}

// One spell per job: a keep-off lifted because the pinned job was held
// for a cycle does not begin again when it is released (helper 39: a job
// kept off for over 4 times its limit; helper 40: a pinned job toggled
// every cycle made 64 updates in 2 minutes), and a node completing a job,
// which sinfo shows as not schedulable, lifts nothing.
func TestAJobIsKeptOffOnceAndNotLiftedByACompletingNode(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	td.cycle(t)
	td.fake.set(func() { td.fake.nodes[0].state = "completing" })
	td.advance(2 * time.Second)
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); len(got) != 1 || job.excNodes != "n4,n1,n2" {
		t.Fatalf("with n1 completing: updates %q, excluded %q; want the one keep-off, n4,n1,n2", got, job.excNodes)
	}
	td.fake.set(func() { td.fake.nodes[0].state = "" })
	for i := range 20 {
		td.fake.set(func() {
			pinned.reason = "Resources"
			if i%2 == 0 {
				pinned.reason = "JobHeldUser"
			}
		})
		td.advance(2 * time.Second)
		td.cycle(t)
	}
	want := []string{"scontrol update JobId=20 ExcNodeList=n4,n1,n2", "scontrol update JobId=20 ExcNodeList=n4"}
	if got := td.fake.commands("scontrol update"); !slices.Equal(got, want) || job.excNodes != "n4" {
		t.Errorf("a pinned job held and released 10 times: updates %q, excluded %q; want %q and n4", got, job.excNodes, want)
	}
}

// A kept-off job that Slurm stops planning (past bf_max_job_test, say) is
// still put back when the pinned job leaves (helper 40's finding).
func TestAKeptOffJobSlurmNoLongerPlansIsPutBack(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	td.cycle(t)
	td.fake.set(func() { job.start, pinned.state = time.Time{}, "CANCELLED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	if job.excNodes != "n4" {
		t.Errorf("excluded %q after the pinned job left, the job unplanned; want n4", job.excNodes)
	}
}

// An update Slurm refuses is not taken for the owner's change (the record
// goes back to what Slurm holds), is tried again after keepOffRetry, and
// a refused lift is retried too (helper 40's findings).
func TestARefusedUpdateIsRetriedAndReleasesNothing(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	td.fake.refuse = map[string]string{"scontrol update JobId=20 ExcNodeList=n4,n1,n2": "slurm_update error: Socket timed out on send/recv operation"}
	td.cycle(t)
	td.advance(2 * time.Second)
	td.cycle(t)
	if recs := keptOffRecords(t, td); recs["20"].Released || len(recs["20"].Nodes) != 0 {
		t.Fatalf("after a refused keep-off: record %+v, want none", recs["20"])
	}
	if got := td.fake.commands("scontrol update"); len(got) != 1 {
		t.Fatalf("updates %q within keepOffRetry of the refusal, want the one refused", got)
	}
	td.fake.refuse = nil
	td.advance(time.Minute)
	td.cycle(t)
	if job.excNodes != "n4,n1,n2" {
		t.Fatalf("a minute after the refusal: excluded %q, want n4,n1,n2", job.excNodes)
	}
	td.fake.refuse = map[string]string{"scontrol update JobId=20 ExcNodeList=n4": "slurm_update error: Socket timed out on send/recv operation"}
	td.fake.set(func() { pinned.state = "CANCELLED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	td.fake.refuse = nil
	td.advance(time.Minute)
	td.cycle(t)
	if job.excNodes != "n4" {
		t.Errorf("a minute after a refused lift: excluded %q, want n4", job.excNodes)
	}
}

// A pinned job that may start on one V100 node (--nodelist=n1) keeps the
// elastic job off n1 alone, not off every V100 (helper 39's finding).
func TestAJobIsKeptOffOnlyTheNodesThePinnedJobMayUse(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	td.fake.set(func() { pinned.reqNode, pinned.nodes, pinned.schedNodes = "n1", 1, "n1" })
	td.cycle(t)
	if job.excNodes != "n4,n1" {
		t.Errorf("excluded nodes %q, want n4,n1", job.excNodes)
	}
}

// A dry run logs and records a keep-off once per job and list, and an
// update Slurm refuses is not tried again every cycle.
func TestADryRunOrARefusedKeepOffIsDecidedOnce(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		refuse     bool
	}{{"dry run", keepOffTOML + "dry_run = true\n", false}, {"refused", keepOffTOML, true}} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, tc.toml)
			keepOffQueue(td)
			if tc.refuse {
				td.fake.refuse = map[string]string{"scontrol update JobId=20 ExcNodeList=n4,n1,n2": "slurm_update error: Access/permission denied"}
			}
			for range 3 {
				td.cycle(t)
				td.advance(2 * time.Second)
			}
			if ds := decisionsOf(t, td, "keep-off"); len(ds) != 1 {
				t.Errorf("%d keep-off decisions over 3 cycles, want 1", len(ds))
			}
			if tc.refuse {
				if got := value(td.Metrics().KeepOffs.WithLabelValues("failed")); got != 1 {
					t.Errorf("keep_offs_total{result=failed} = %v, want 1", got)
				}
			}
		})
	}
}

// A record of a job Slurm no longer lists is forgotten, and turning
// keep_off_pinned off puts back the nodes of the jobs it had kept off.
func TestKeptOffRecordsAreForgottenAndPutBackWhenTheOptionIsTurnedOff(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	_, job := keepOffQueue(td)
	ctx := context.Background()
	if err := td.db.PutKeptOff(ctx, backfillstore.KeptOff{Job: "99", Nodes: []string{"n1"}, Types: []string{"v100"}, Since: td.now}); err != nil {
		t.Fatal(err)
	}
	td.cycle(t)
	if recs := keptOffRecords(t, td); len(recs) != 1 || recs["99"].Job != "" {
		t.Fatalf("records %+v, want job 20's alone", recs)
	}
	td.cfg.KeepOffPinned = false // as a restart with keep_off_pinned = false
	td.advance(2 * time.Second)
	td.cycle(t)
	if recs := keptOffRecords(t, td); job.excNodes != "n4" || len(recs["20"].Nodes) != 0 {
		t.Errorf("after turning the option off: excluded %q, records %+v; want n4 and no nodes recorded", job.excNodes, recs)
	}
}

// A job whose time limit ends before Slurm's planned start of the pinned
// job ahead is not kept off its type: started on a V100 now it is gone
// before the pinned job could use the node (as Slurm's backfill lets a job
// run ahead of a reservation). Once its limit would reach past that start,
// it is kept off.
func TestAJobThatEndsBeforeThePinnedJobsPlannedStartIsNotKeptOff(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	_, job := keepOffQueue(td)
	td.fake.set(func() { job.timeLimit = 30 * time.Minute })
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); len(got) != 0 || job.excNodes != "n4" {
		t.Fatalf("updates %q, excluded %q; want none: the job's 30 min end before the pinned job's planned start in 1 h", got, job.excNodes)
	}
	if recs := keptOffRecords(t, td); len(recs) != 0 {
		t.Errorf("kept_off records %+v, want none", recs)
	}
	td.advance(40 * time.Minute) // the pinned job is planned in 20 min: 30 min would reach past it
	td.cycle(t)
	if job.excNodes != "n4,n1,n2" {
		t.Errorf("excluded nodes %q 40 min later, want n4,n1,n2", job.excNodes)
	}
}

// A job that start-small may start below its request could hold the nodes
// longer than its time limit: started on one node of its two, its limit is
// raised past 80 min, beyond the pinned job's planned start in 1 h, though
// its own 40 min end before. It is kept off; with start-small off, it is
// not.
func TestAJobStartSmallMayStartSmallIsKeptOffForItsRaisedLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		toml    string
		keptOff bool
	}{
		{"start-small on (the default)", keepOffTOML, true},
		{"start-small off", keepOffTOML + "[start_small]\nrule = \"off\"\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, tc.toml)
			_, job := keepOffQueue(td)
			td.fake.set(func() { job.timeLimit, job.nodes, job.excNodes = 40*time.Minute, 2, "" })
			td.cycle(t)
			if got := job.excNodes == "n1,n2"; got != tc.keptOff {
				t.Errorf("excluded nodes %q, kept off %v, want %v", job.excNodes, got, tc.keptOff)
			}
		})
	}
}

// A keep-off ends once the job's time limit (2 h here) has passed since it
// was first kept off: its nodes are put back, and while it waits it is not
// kept off again.
func TestAKeepOffEndsAfterTheJobsTimeLimit(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	td.cycle(t)
	if job.excNodes != "n4,n1,n2" {
		t.Fatalf("excluded nodes %q, want n4,n1,n2", job.excNodes)
	}
	td.advance(119 * time.Minute)
	td.cycle(t)
	if job.excNodes != "n4,n1,n2" {
		t.Fatalf("excluded nodes after 119 min %q, want n4,n1,n2 still", job.excNodes)
	}
	td.advance(2 * time.Minute)
	r := td.cycle(t)
	if job.excNodes != "n4" || !slices.Equal(r.KeptOff, []string{"20"}) {
		t.Fatalf("after 121 min: excluded nodes %q, report %q; want n4 and job 20", job.excNodes, r.KeptOff)
	}
	ds := decisionsOf(t, td, "keep-off-lifted")
	if len(ds) != 1 || !strings.Contains(ds[0].Detail, "longer ago than its time limit") {
		t.Errorf("keep-off-lifted decisions %+v, want one saying the time limit passed", ds)
	}
	recs := keptOffRecords(t, td)
	if len(recs["20"].Nodes) != 0 || !recs["20"].Since.Equal(td.now.Add(-121*time.Minute)) {
		t.Errorf("record after the spell %+v, want no nodes and the spell's start", recs["20"])
	}
	td.advance(2 * time.Second)
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); len(got) != 2 {
		t.Errorf("updates %q, want the keep-off and its end only", got)
	}
	td.fake.set(func() { pinned.state = "CANCELLED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	if recs := keptOffRecords(t, td); len(recs["20"].Nodes) != 0 || len(td.fake.commands("scontrol update")) != 2 {
		t.Errorf("after the pinned job left: records %+v, updates %q; want no nodes and no more updates", recs, td.fake.commands("scontrol update"))
	}
}

// A pending job array (its tasks under the array's id, which squeue's %i
// prints as 20_[0-3]) is never kept off: one update of its id would change
// every task's list. The snapshot leaves its placement out
// (slurmcli.WholeJobs) and the re-read before the update refuses it
// (Runner.PendingPlacement) too.
func TestAPendingJobArrayIsNeverKeptOff(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	_, job := keepOffQueue(td)
	td.fake.set(func() { job.printedID = "20_[0-3]" })
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); len(got) != 0 {
		t.Errorf("updated %q; want no change to a job array", got)
	}
}
