package daemon

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/hashicorp/go-hclog"
)

func TestSnapshotDecidesWhichNodesMayBeLent(t *testing.T) {
	tests := []struct {
		name     string
		cfg      string
		edit     func(f *fakeSlurm)
		node     string
		present  bool
		managed  bool
		lendable bool
	}{
		{"an idle node of a listed partition is lendable", `partitions = ["normal"]`, nil, "n1", true, true, true},
		{"a node outside the listed partitions is seen but not managed", `partitions = ["gpu"]`, nil, "n1", true, false, false},
		{"a node outside the node list is not managed", `nodes = ["n2"]`, nil, "n1", true, false, false},
		{"a GPU type not listed is not managed", `gpu_types = ["t4"]`, nil, "n1", true, false, false},
		{"a drained node is managed but not lendable", "", func(f *fakeSlurm) { f.nodes[0].state = "drained" }, "n1", true, true, false},
		{"a node not responding is not lendable", "", func(f *fakeSlurm) { f.nodes[0].state = "idle*" }, "n1", true, true, false},
		{"a planned node (idle now, reserved later) is lendable", "", func(f *fakeSlurm) { f.nodes[0].state = "planned" }, "n1", true, true, true},
		{"a node without an idle CPU is not lendable", "", func(f *fakeSlurm) { f.nodes[0].cpus = 0 }, "n1", true, true, false},
		{"a GPU type without a speed is left out", "", func(f *fakeSlurm) { f.nodes[0].gpuType = "mystery" }, "n1", false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(time.Now())
			if tc.edit != nil {
				tc.edit(f)
			}
			cfg, err := config.Parse(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := &Snapshotter{Slurm: f.runner(), Config: cfg, UserID: f.userID}
			v, err := s.Snapshot(context.Background(), f.now)
			if err != nil {
				t.Fatal(err)
			}
			n := v.node(tc.node)
			if (n != nil) != tc.present {
				t.Fatalf("node %s present=%v, want %v", tc.node, n != nil, tc.present)
			}
			if n != nil && (n.Managed != tc.managed || n.Lendable != tc.lendable) {
				t.Fatalf("node %+v: want managed=%v lendable=%v", *n, tc.managed, tc.lendable)
			}
		})
	}
}

func TestPendingJobsBecomeReservationsOnlyWithAPlan(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 5, 0, 0, time.Local)
	at := start.Format(slurmcli.TimeLayout)
	tests := []struct {
		name  string
		job   slurmcli.Job
		ok    bool
		nodes int
		gpus  int
	}{
		{"a planned job reserves its GPUs per node on every planned node",
			slurmcli.Job{ID: "5", StartTime: at, SchedNodes: "n[1-2]", TRESPerNode: "gres:gpu:v100:3", Nodes: 2}, true, 2, 3},
		{"a per-job GPU count is spread over the planned nodes, rounded up",
			slurmcli.Job{ID: "5", StartTime: at, SchedNodes: "n[1-2]", TRESPerJob: "gres:gpu:3", Nodes: 2}, true, 2, 2},
		{"a job without planned nodes reserves nothing", slurmcli.Job{ID: "5", StartTime: at, TRESPerNode: "gres:gpu:1"}, false, 0, 0},
		{"a job without a start reserves nothing", slurmcli.Job{ID: "5", SchedNodes: "n1", TRESPerNode: "gres:gpu:1"}, false, 0, 0},
		{"a job whose GPUs squeue does not show (per task, or none) reserves its whole planned nodes",
			slurmcli.Job{ID: "5", StartTime: at, SchedNodes: "n[1-2]", Nodes: 2}, true, 2, 4},
		{"a job whose GPU request does not read reserves its whole planned nodes",
			slurmcli.Job{ID: "5", StartTime: at, SchedNodes: "n1", TRESPerNode: "gres:gpu:v100:2x", Nodes: 1}, true, 1, 4},
		{"a bad node list reserves nothing", slurmcli.Job{ID: "5", StartTime: at, SchedNodes: "n[2-1]", TRESPerNode: "gres:gpu:1"}, false, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := pendingJob(tc.job, time.Local, func(string) int { return 4 })
			if ok != tc.ok {
				t.Fatalf("ok=%v, want %v (%+v)", ok, tc.ok, p)
			}
			if !ok {
				return
			}
			if p.PlannedStart != start.Unix() || len(p.PlannedNodes) != tc.nodes {
				t.Fatalf("reservation %+v, want start %d on %d nodes", p, start.Unix(), tc.nodes)
			}
			for _, n := range p.PlannedNodes {
				if n.GPUs != tc.gpus {
					t.Errorf("node %s reserves %d GPUs, want %d", n.Node, n.GPUs, tc.gpus)
				}
			}
		})
	}
}

func TestAllocationSpreadsAJobsGPUsOverItsNodes(t *testing.T) {
	tests := []struct {
		name  string
		job   slurmcli.Job
		want  []NodeAlloc
		exact bool
	}{
		{"per-node GPUs are on every node", slurmcli.Job{ID: "1", NodeList: "n[1-2]", TRESPerNode: "gres:gpu:v100:2", Nodes: 2},
			[]NodeAlloc{{"n1", 2}, {"n2", 2}}, true},
		{"per-job GPUs on several nodes are split with the remainder first, a guess", slurmcli.Job{ID: "1", NodeList: "n[1-2]", TRESPerJob: "gres:gpu:3", Nodes: 2},
			[]NodeAlloc{{"n1", 2}, {"n2", 1}}, false},
		{"per-job GPUs on one node are exact", slurmcli.Job{ID: "1", NodeList: "n2", TRESPerJob: "gres:gpu:3", Nodes: 1},
			[]NodeAlloc{{"n2", 3}}, true},
		{"a CPU job holds no GPUs", slurmcli.Job{ID: "1", NodeList: "n3", Nodes: 1}, []NodeAlloc{{"n3", 0}}, true},
		{"a job without nodes has no allocation", slurmcli.Job{ID: "1"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, exact, err := allocation(tc.job)
			if err != nil {
				t.Fatal(err)
			}
			if exact != tc.exact {
				t.Errorf("exact %v, want %v", exact, tc.exact)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("allocation %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("allocation %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestSnapshotReadsNodeWeightsWhenItPredictsPlacements checks that the
// nodes' scheduling weights (scontrol show node Weight=) reach the
// planner's nodes when a job waits for resources (the admission,
// start-small and keep-off checks then predict where Slurm places it), that
// nothing extra is read when no job waits, and that weights that cannot be
// read leave every node at 0 (equal) and say why.
func TestSnapshotReadsNodeWeightsWhenItPredictsPlacements(t *testing.T) {
	tests := []struct {
		name        string
		waiting     bool   // a job waits for resources
		fails       string // scontrol show node's stderr; "": it answers
		wantWeights []int  // n1..n4 in the planner's snapshot
		wantUnread  bool
	}{
		{"a waiting job: the weights Slurm has", true, "", []int{3, 3, 1, 1}, false},
		{"no waiting job: not read", false, "", []int{0, 0, 0, 0}, false},
		{"unreadable weights: equal, and why", true, "slurm_load_node: Socket timed out", []int{0, 0, 0, 0}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "[admit]\nenabled = true\n")
			td.fake.set(func() {
				for i, w := range []int{3, 3, 1, 1} {
					td.fake.nodes[i].weight = w
				}
				td.fake.showNodesFails = tc.fails
			})
			if tc.waiting {
				q := td.fake.pending("20", "n1", 4, td.now.Add(time.Hour))
				td.fake.set(func() { q.reason = "Resources" })
			}
			v, err := td.snap.Snapshot(context.Background(), td.now)
			if err != nil {
				t.Fatal(err)
			}
			if (v.WeightsUnread != nil) != tc.wantUnread {
				t.Fatalf("WeightsUnread = %v, want an error: %v", v.WeightsUnread, tc.wantUnread)
			}
			if tc.wantUnread && !strings.Contains(v.WeightsUnread.Error(), "Socket timed out") {
				t.Errorf("WeightsUnread %q does not say what Slurm answered", v.WeightsUnread)
			}
			ps := td.plannerSnapshot(v, nil, nil, nil)
			var got []int
			for _, n := range ps.Nodes {
				got = append(got, n.Weight)
			}
			if !slices.Equal(got, tc.wantWeights) {
				t.Errorf("planner node weights %v, want %v", got, tc.wantWeights)
			}
		})
	}
}

func TestUnreadableNodeWeightsAreWarnedAboutOnceAndTheCycleGoesOn(t *testing.T) {
	td := newTestDaemon(t, "[admit]\nenabled = true\n")
	var logs bytes.Buffer
	td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
	q := td.fake.pending("20", "n1", 4, td.now.Add(time.Hour))
	td.fake.set(func() { q.reason, td.fake.showNodesFails = "Resources", "slurm_load_node: Socket timed out" })
	const msg = "the nodes' scheduling weights cannot be read"
	for range 2 {
		td.cycle(t)
		td.advance(time.Second)
	}
	if n := countLogs(t, &logs, msg, ""); n != 1 {
		t.Fatalf("%d warnings over two cycles, want 1:\n%s", n, logs.String())
	}
	td.fake.set(func() { td.fake.showNodesFails = "" })
	td.cycle(t)
	td.advance(time.Second)
	td.fake.set(func() { td.fake.showNodesFails = "slurm_load_node: Socket timed out" })
	td.cycle(t)
	if n := countLogs(t, &logs, msg, ""); n != 2 {
		t.Errorf("%d warnings, want a second one once the weights fail again after reading:\n%s", n, logs.String())
	}
}
