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
// 1 h time limit), waiting its turn, which excluded n4 itself.
func keepOffQueue(td *testDaemon) (pinned, job *fakeJob) {
	pinned = td.fake.pending("30", "n1,n2", 4, td.now.Add(time.Hour))
	job = td.fake.pending("20", "", 4, td.now.Add(2*time.Hour))
	td.fake.set(func() {
		pinned.gpuType, pinned.reason = "v100", "Resources"
		job.user, job.comment, job.reason, job.excNodes, job.nodes = "alice", "es-req min=1 max=2 lw=4 d2", "Priority", "n4", 1
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

// A keep-off is bounded by the job's time limit from when it was first kept
// off, not per spell: the pinned job held for one cycle at a time (or its
// node completing a job, which sinfo shows as not schedulable) neither
// restarts the bound (helper 39: a job was kept off for over 4 times its
// limit) nor, for a completing node, lifts the keep-off at all.
func TestAKeepOffIsBoundedAcrossSpellsAndSurvivesACompletingNode(t *testing.T) {
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
	hold := func(held bool) {
		td.fake.set(func() {
			pinned.reason = "Resources"
			if held {
				pinned.reason = "JobHeldUser"
			}
		})
		td.advance(20 * time.Minute)
		td.cycle(t)
	}
	hold(true) // 20 min: lifted
	hold(false)
	if job.excNodes != "n4,n1,n2" {
		t.Fatalf("40 min after the first keep-off, unheld: excluded %q, want n4,n1,n2 again", job.excNodes)
	}
	hold(true)  // 60 min
	hold(false) // 80 min: past the 1 h limit since the first keep-off
	hold(true)
	hold(false) // 120 min
	if job.excNodes != "n4" {
		t.Errorf("120 min after the first keep-off: excluded %q, want the owner's n4", job.excNodes)
	}
	if n := len(decisionsOf(t, td, "keep-off")); n != 2 {
		t.Errorf("%d keep-off decisions, want 2 (none after the bound)", n)
	}
}

// What keeps a job where it is: the option off, a pinned job held or asking
// more than its type holds, a job that names a type, its nodes or node
// features, a job that is not elastic, a type too slow to serve it, its own
// exclusions leaving no other type, a job that changed between the
// snapshot and the re-read, and a dry run (recorded, nothing run).
func TestNoJobIsKeptOffWhereItMustNotBe(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		change     func(pinned, job *fakeJob)
		reRead     func(job *fakeJob) // between the snapshot and the re-read by id
		dryRun     bool
	}{
		{name: "the option off", toml: keepOffTOML + "keep_off_pinned = false\n"},
		{name: "the pinned job is queued behind it", toml: keepOffTOML, change: func(p, j *fakeJob) { j.start = p.start.Add(-time.Minute) }},
		{name: "the pinned job is held", toml: keepOffTOML, change: func(p, _ *fakeJob) { p.reason = "JobHeldUser" }},
		{name: "the pinned job waits for a dependency", toml: keepOffTOML, change: func(p, _ *fakeJob) { p.reason = "Dependency" }},
		{name: "the pinned job asks more V100 nodes than there are", toml: keepOffTOML, change: func(p, _ *fakeJob) { p.nodes = 3 }},
		{name: "the pinned job is not planned yet", toml: keepOffTOML, change: func(p, _ *fakeJob) { p.start = time.Time{} }},
		{name: "the job is not planned yet (just submitted)", toml: keepOffTOML, change: func(_, j *fakeJob) { j.start = time.Time{} }},
		{name: "the job may also run on nodes another daemon manages", toml: keepOffTOML + `nodes = ["n1", "n2", "n4"]` + "\n"},
		{name: "the job names a type", toml: keepOffTOML, change: func(_, j *fakeJob) { j.gpuType = "t4" }},
		{name: "the job names its nodes", toml: keepOffTOML, change: func(_, j *fakeJob) { j.reqNode = "n3" }},
		{name: "the job asks node features", toml: keepOffTOML, change: func(_, j *fakeJob) { j.features = "fast" }},
		{name: "the job is not elastic", toml: keepOffTOML, change: func(_, j *fakeJob) { j.comment = "" }},
		{name: "T4 serves it at half a V100", toml: "speeds = { v100 = 1.0, t4 = 0.5 }\n"},
		{name: "its own speeds make T4 slow", toml: keepOffTOML, change: func(_, j *fakeJob) { j.comment = "es-req min=1 max=2 lw=4 d2 speeds=v100:1,t4:0.5" }},
		{name: "it excluded both T4 nodes itself", toml: keepOffTOML, change: func(_, j *fakeJob) { j.excNodes = "n3,n4" }},
		{name: "its owner changed its exclusions before the re-read", toml: keepOffTOML, reRead: func(j *fakeJob) { j.excNodes = "n3" }},
		{name: "its owner changed its comment before the re-read", toml: keepOffTOML, reRead: func(j *fakeJob) { j.comment = "es-req min=1 max=2 lw=4 d1" }},
		{name: "a dry run", toml: keepOffTOML + "dry_run = true\n", dryRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, tc.toml)
			pinned, job := keepOffQueue(td)
			if tc.change != nil {
				td.fake.set(func() { tc.change(pinned, job) })
			}
			if tc.reRead != nil {
				td.fake.onJobs = func() { tc.reRead(job) }
			}
			r := td.cycle(t)
			if got := td.fake.commands("scontrol update"); len(got) != 0 || len(r.KeptOff) != 0 {
				t.Fatalf("commands %q, report %q; want none", got, r.KeptOff)
			}
			if recs := keptOffRecords(t, td); len(recs) != 0 {
				t.Errorf("kept_off records %+v, want none", recs)
			}
			ds := decisionsOf(t, td, "keep-off")
			if tc.dryRun != (len(ds) == 1 && strings.HasSuffix(ds[0].Detail, "(dry run)")) || !tc.dryRun && len(ds) != 0 {
				t.Errorf("keep-off decisions %+v (dry run %v)", ds, tc.dryRun)
			}
		})
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

// A keep-off ends once the job's time limit (1 h here) has passed since it
// was first kept off: its nodes are put back, and while it waits it is not
// kept off again.
func TestAKeepOffEndsAfterTheJobsTimeLimit(t *testing.T) {
	td := newTestDaemon(t, keepOffTOML)
	pinned, job := keepOffQueue(td)
	td.cycle(t)
	if job.excNodes != "n4,n1,n2" {
		t.Fatalf("excluded nodes %q, want n4,n1,n2", job.excNodes)
	}
	td.advance(59 * time.Minute)
	td.cycle(t)
	if job.excNodes != "n4,n1,n2" {
		t.Fatalf("excluded nodes after 59 min %q, want n4,n1,n2 still", job.excNodes)
	}
	td.advance(2 * time.Minute)
	r := td.cycle(t)
	if job.excNodes != "n4" || !slices.Equal(r.KeptOff, []string{"20"}) {
		t.Fatalf("after 61 min: excluded nodes %q, report %q; want n4 and job 20", job.excNodes, r.KeptOff)
	}
	ds := decisionsOf(t, td, "keep-off-lifted")
	if len(ds) != 1 || !strings.Contains(ds[0].Detail, "longer ago than its time limit") {
		t.Errorf("keep-off-lifted decisions %+v, want one saying the time limit passed", ds)
	}
	recs := keptOffRecords(t, td)
	if len(recs["20"].Nodes) != 0 || !recs["20"].Since.Equal(td.now.Add(-61*time.Minute)) {
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
