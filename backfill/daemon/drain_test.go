package daemon

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// competingJobs is a view of running and pending jobs on managed and
// other nodes, in and out of the managed partition, that the work bound
// (drain) and the median time left (peerMedianFor) read.
func competingJobs(now time.Time) *View {
	at := func(d time.Duration) string { return now.Add(d).Format("2006-01-02T15:04:05") }
	return &View{Now: now,
		Nodes: []NodeView{
			{Name: "n1", GPUType: "v100", Total: 4, Managed: true, Partitions: []string{"gpu"}},
			{Name: "n2", GPUType: "t4", Total: 4, Managed: true, Partitions: []string{"gpu"}},
			{Name: "x1", GPUType: "v100", Total: 8, Partitions: []string{"other"}}, // not managed
		},
		Running: []slurmcli.Job{
			// bob: 2 v100 on n1 for 1,000 s more: 6,000
			{ID: "1", User: "bob", Nodes: 1, NodeList: "n1", TRESPerNode: "gres:gpu:2", EndTime: at(1000 * time.Second)},
			// carol: 8 GPUs over x1 (not managed) and n2: only n2's 4 t4 count, 500 s: 2,000
			{ID: "2", User: "carol", Nodes: 2, NodeList: "n2,x1", TRESPerNode: "gres:gpu:4", EndTime: at(500 * time.Second)},
			// alice's elastic job: 2 v100, a 2 h limit after 30 min, half done: 30 min left, 2*1800*3 = 10,800
			{ID: "3", User: "alice", Nodes: 1, NodeList: "n1"},
			// an unreadable end adds nothing
			{ID: "4", User: "dave", Nodes: 1, NodeList: "n2", TRESPerNode: "gres:gpu:1", EndTime: "garbage"},
		},
		Pending: []slurmcli.Job{
			// erin: 2 t4 for 10 min: 1,200; frank: 1 untyped GPU for 10 min at the slowest type: 600;
			// grace: just planned (Reason None), 1 t4 for 10 min: 600
			{ID: "5", User: "erin", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:t4:2", TimeLimit: "10:00"},
			{ID: "6", User: "frank", Partition: "gpu", Reason: "Priority", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "10:00"},
			{ID: "18", User: "grace", Partition: "gpu", Reason: "None", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:t4:1", TimeLimit: "10:00"},
			// not counted: another partition only, or one with an unmanaged node (x1 may run it); an
			// UNLIMITED limit
			{ID: "7", User: "erin", Partition: "other", Reason: "Resources", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "10:00"},
			{ID: "17", User: "erin", Partition: "other,gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "10:00"},
			{ID: "8", User: "erin", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "UNLIMITED"},
			// not counted, whoever queues them (a tester's attack: each let shrink-to-admit shrink
			// another user's running job): jobs Slurm will not start now, held, waiting for a
			// begin time, a dependency or a limit, and jobs the managed nodes cannot hold
			{ID: "9", User: "mallory", Partition: "gpu", Reason: "JobHeldUser", StartTime: at(time.Hour), Nodes: 2, TRESPerNode: "gres:gpu:4", TimeLimit: "30-00:00:00"},
			{ID: "10", User: "mallory", Partition: "gpu", Reason: "BeginTime", StartTime: at(365 * 24 * time.Hour), Nodes: 2, TRESPerNode: "gres:gpu:4", TimeLimit: "30-00:00:00"},
			{ID: "11", User: "mallory", Partition: "gpu", Reason: "Dependency", StartTime: "N/A", Nodes: 2, TRESPerNode: "gres:gpu:4", TimeLimit: "30-00:00:00"},
			{ID: "12", User: "mallory", Partition: "gpu", Reason: "PartitionConfig", StartTime: "N/A", Nodes: 100, TRESPerNode: "gres:gpu:4", TimeLimit: "30-00:00:00"},
			{ID: "13", User: "mallory", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 3, TRESPerNode: "gres:gpu:4", TimeLimit: "30-00:00:00"},
			{ID: "14", User: "mallory", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:8", TimeLimit: "30-00:00:00"},
			{ID: "15", User: "mallory", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 2, TRESPerNode: "gres:gpu:a100:1", TimeLimit: "30-00:00:00"},
			{ID: "16", User: "mallory", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 2, TRESPerNode: "gres:gpu:1", TimeLimit: "30-00:00:00"},
			// and (a reviewer's): no planned start yet (beyond what backfill tests, or a limit), a
			// --constraint, a placement not read this cycle (an array's or a heterogeneous job's id)
			{ID: "19", User: "mallory", Partition: "gpu", Reason: "Priority", StartTime: "N/A", Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "30-00:00:00"},
			{ID: "20", User: "mallory", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "30-00:00:00"},
			{ID: "21_[0-3]", User: "mallory", Partition: "gpu", Reason: "Resources", StartTime: at(time.Hour), Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "30-00:00:00"},
		},
		// job 16 excludes n2 itself: one managed node left for its two
		Placements: map[string]slurmcli.Placement{"5": {}, "6": {}, "7": {}, "8": {}, "9": {}, "10": {}, "11": {}, "12": {}, "13": {},
			"14": {}, "15": {}, "16": {ExcNodes: "n2"}, "17": {}, "18": {}, "19": {}, "20": {Features: "fast"}},
		Elastic: map[string]*ElasticJob{"3": {Job: slurmcli.Job{ID: "3", User: "alice", StartTime: at(-30 * time.Minute)},
			Progress: &elastic.Progress{Step: 50, TotalSteps: 100, Workers: 2}, End: now.Add(90 * time.Minute),
			Base: []NodeAlloc{{Node: "n1", GPUs: 2}}}},
	}
}

// The work bound reads every running and pending job of the managed
// nodes: GPUs × time left (an elastic job's from its progress) or × time
// limit (a pending job) × the GPUs' speed, by owner; jobs on other nodes
// or partitions, and pending jobs without a finite limit, add nothing.
func TestTheDrainBoundCountsTheManagedNodesWork(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cfg := config.Default()
	cfg.Speeds = map[string]float64{"v100": 3, "t4": 1}
	v := competingJobs(now)
	d := &Daemon{cfg: cfg, snap: &Snapshotter{Loc: time.UTC}}
	dr := d.drain(v)
	if dr == nil {
		t.Fatal("no drain bound with drain_horizon on")
	}
	if want := 4*3.0 + 4*1.0; dr.Capacity != want {
		t.Errorf("capacity %v, want %v (the managed nodes' speed-weighted GPUs)", dr.Capacity, want)
	}
	want := map[string]float64{"bob": 6000, "carol": 2000, "alice": 10800, "erin": 1200, "frank": 600, "grace": 600}
	total := 0.0
	for user, w := range want {
		total += w
		if math.Abs(dr.ByUser[user]-w) > 1e-6 {
			t.Errorf("%s's work %v, want %v", user, dr.ByUser[user], w)
		}
	}
	if len(dr.ByUser) != len(want) || math.Abs(dr.Total-total) > 1e-6 {
		t.Errorf("work by user %v (total %v), want %v (total %v)", dr.ByUser, dr.Total, want, total)
	}
	if got, want := dr.Bound("alice"), (total-10800)/16; math.Abs(got-want) > 1e-9 {
		t.Errorf("alice's bound %v s, want %v s: her own job left out", got, want)
	}
	cfg.DrainHorizon = false
	if d.drain(v) != nil {
		t.Error("a drain bound with drain_horizon off")
	}
}

// The median time left counts the same jobs as the work bound: running
// jobs on managed nodes until their time limits end (bob 1,000 s, carol
// 500 s; alice's has no end in squeue, dave's cannot be read) and the
// pending jobs Slurm may start soon on them (erin, frank and grace, 10 min
// each), not the daemon's own extra jobs nor jobs on other nodes, however
// long, nor mallory's jobs that Slurm will not start.
func TestThePeerMedianCountsTheJobsCompetingForTheManagedNodes(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cfg := config.Default()
	v := competingJobs(now)
	long := now.Add(10 * time.Hour).Format("2006-01-02T15:04:05")
	for i := range 3 {
		v.Running = append(v.Running,
			slurmcli.Job{ID: fmt.Sprint(30 + i), User: "alice", Partition: cfg.Extra.Partition, Nodes: 1, NodeList: "n2", TRESPerNode: "gres:gpu:1", EndTime: long},
			slurmcli.Job{ID: fmt.Sprint(40 + i), User: "bob", Partition: "other", Nodes: 1, NodeList: "x1", TRESPerNode: "gres:gpu:1", EndTime: long})
	}
	d := &Daemon{cfg: cfg, snap: &Snapshotter{Loc: time.UTC}}
	erin := slurmcli.Job{ID: "99", User: "erin"}
	if got := d.peerMedianFor(v, erin); got != 10*time.Minute {
		t.Errorf("peerMedianFor(erin) = %v, want 10m0s (of 500 s, 600 s ×2 and 1,000 s: her own 600 s job left out)", got)
	}
	// mallory queues three long jobs Slurm may start on the managed nodes
	// (she could cancel them once her own is admitted): they loosen the
	// others' bound, never her own
	v = competingJobs(now)
	for i := range 3 {
		v.Pending = append(v.Pending, slurmcli.Job{ID: fmt.Sprint(50 + i), User: "mallory", Partition: "gpu", Reason: "Resources",
			StartTime: now.Add(time.Hour).Format("2006-01-02T15:04:05"), Nodes: 1, TRESPerNode: "gres:gpu:t4:1", TimeLimit: "10:00:00"})
		v.Placements[fmt.Sprint(50+i)] = slurmcli.Placement{}
	}
	if got := d.peerMedianFor(v, slurmcli.Job{ID: "98", User: "mallory"}); got != 10*time.Minute {
		t.Errorf("peerMedianFor(mallory) = %v, want 10m0s: her own long jobs left out", got)
	}
	if got := d.peerMedianFor(v, erin); got != 1000*time.Second {
		t.Errorf("peerMedianFor(erin) = %v, want 16m40s (of 500 s, 600 s ×2, 1,000 s and 36,000 s ×3)", got)
	}
	if got := d.peerMedianFor(&View{Now: now}, erin); got != 0 {
		t.Errorf("peerMedianFor of no jobs = %v, want 0 (no bound)", got)
	}
}

// A job that would be shrink-to-admit's only candidate but for its
// partitions' tiers is listed with why, not trimmed with the jobs listed
// only as ranked ahead (a tester saw no line logged for it).
func TestACandidateRefusedForItsTiersIsStillListed(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	d := &Daemon{cfg: config.Default(), snap: &Snapshotter{Loc: time.UTC}}
	for _, tc := range []struct {
		partitions, why string
		copies          int // listed once per tier (byTier)
	}{
		{"unlisted", "was not read", 1},
		{"normal,urgent", "different PriorityTiers", 2},
	} {
		v := &View{Now: now,
			Partitions: map[string]slurmcli.Partition{"normal": {PriorityTier: 10}, "urgent": {PriorityTier: 20}},
			Placements: map[string]slurmcli.Placement{"5": {Priority: 100}, "6": {Priority: 200}},
			Priorities: map[string]uint64{"5": 100, "6": 200},
			Pending: []slurmcli.Job{
				{ID: "5", User: "erin", Partition: tc.partitions, Reason: "Resources", Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "10:00"},
				{ID: "6", User: "frank", Partition: "normal", Reason: "JobHeldUser", Nodes: 1, TRESPerNode: "gres:gpu:1", TimeLimit: "10:00"},
			}}
		got := d.admitCandidates(v)
		ok := len(got) == tc.copies
		for _, c := range got {
			ok = ok && c.job.ID == "5" && strings.Contains(c.aheadOnly, tc.why)
		}
		if !ok {
			t.Errorf("partitions %q: admitCandidates = %+v, want job 5 alone (%d entries), listed with why %q", tc.partitions, got, tc.copies, tc.why)
		}
	}
}

// byTier lists a job once per tier of its partitions, each copy with that
// tier's partitions alone; tierOf and limitCap read a job that names no
// partition as not known.
func TestAJobIsRankedOncePerTierOfItsPartitions(t *testing.T) {
	v := &View{Partitions: map[string]slurmcli.Partition{"normal": {PriorityTier: 10}, "other": {PriorityTier: 10},
		"urgent": {PriorityTier: 20}, "low": {PriorityTier: 1}}}
	for list, want := range map[string][]string{
		"normal":              {"normal"},
		"normal,other":        {"normal,other"},
		"normal,urgent,low":   {"normal", "urgent", "low"},
		"urgent,normal,other": {"urgent", "normal,other"},
		"normal,unlisted":     {"normal,unlisted"}, // a tier not read: itself alone
	} {
		var got []string
		for _, c := range byTier(v, slurmcli.Job{ID: "7", Partition: list}) {
			if c.ID != "7" {
				t.Errorf("%q: a copy of job %s", list, c.ID)
			}
			got = append(got, c.Partition)
		}
		if !slices.Equal(got, want) {
			t.Errorf("byTier(%q) = %q, want %q", list, got, want)
		}
	}
	for _, list := range []string{"", ","} {
		if tier, _ := tierOf(v, list); tier != planner.TierUnknown {
			t.Errorf("tierOf(%q) = %d, want TierUnknown", list, tier)
		}
		if c := limitCap(v, list); !c.Unknown {
			t.Errorf("limitCap(%q) = %+v, want an unknown cap (a reviewer's: no partition read as no cap)", list, c)
		}
	}
}

// A pending job in an advance reservation is ranked ahead of every other
// job of its tier, whatever its priority, as Slurm's sort_job_queue2 ranks
// it, and behind every job of a higher tier (its preemption check comes
// first under preempt/partition_prio; a tester saw it on the 22.05 lab);
// setPendingPlacements reads it from squeue's %v.
func TestAJobInAReservationIsRankedFirstInItsTier(t *testing.T) {
	v := &View{Partitions: map[string]slurmcli.Partition{"normal": {PriorityTier: 10}, "low": {PriorityTier: 1}}}
	v.setPendingPlacements(map[string]slurmcli.Placement{
		"5": {Priority: 100}, "6": {Priority: 200}, "7": {Priority: 50, Reservation: "maint"}, "8": {Priority: 10},
		"9": {Priority: 1, Reservation: "r1"},
	})
	jobs := []slurmcli.Job{{ID: "5", Partition: "normal"}, {ID: "6", Partition: "normal"}, {ID: "7", Partition: "low"}, {ID: "8", Partition: "low"},
		{ID: "9", Partition: "normal"}}
	var got []string
	for _, j := range inPriorityOrder(v, jobs) {
		got = append(got, j.ID)
	}
	if want := []string{"9", "6", "5", "7", "8"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v: by tier, then the job in a reservation first, then by priority", got, want)
	}
	// without preempt/partition_prio (helper 109 saw it live with
	// preempt/none) the jobs in a reservation come first across tiers
	v.ReservationsFirst = true
	got = got[:0]
	for _, j := range inPriorityOrder(v, jobs) {
		got = append(got, j.ID)
	}
	if want := []string{"9", "7", "6", "5", "8"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v: the jobs in a reservation first, then by tier and priority", got, want)
	}
	v.setPendingPlacements(nil)
	if v.InReservation != nil || v.Priorities != nil {
		t.Errorf("a failed squeue left InReservation %v, Priorities %v: want both nil", v.InReservation, v.Priorities)
	}
}

// The snapshot reads PreemptType with bf_interval: under
// preempt/partition_prio (the lab's, and docs/deploy.md's requirement)
// jobs in a reservation rank first within their tier only; under another
// PreemptType across tiers too.
func TestTheSnapshotReadsWhetherReservationsRankAcrossTiers(t *testing.T) {
	for _, tc := range []struct {
		preempt string
		want    bool
	}{{"", false}, {"preempt/partition_prio", false}, {"preempt/none", true}, {"preempt/qos", true}} {
		td := admitCluster(t, "", elasticComment)
		td.fake.set(func() { td.fake.preemptType = tc.preempt })
		v, err := td.snap.Snapshot(context.Background(), td.now)
		if err != nil {
			t.Fatal(err)
		}
		if v.ReservationsFirst != tc.want || v.BackfillInterval != time.Second {
			t.Errorf("PreemptType %q: ReservationsFirst %v, bf_interval %v; want %v and 1s", tc.preempt, v.ReservationsFirst, v.BackfillInterval, tc.want)
		}
	}
}
