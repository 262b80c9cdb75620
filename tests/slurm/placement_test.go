package slurm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestTheSimulatorPlacesJobsWhereSlurmDoes holds some GPUs of each lab
// node with jobs pinned there (two CPUs per GPU, so free CPUs follow free
// GPUs as the model assumes), submits a job asking --gpus=N and checks
// that slurmctld put its GPUs on the nodes, and in the numbers,
// planner.Cluster.Fit (the simulator's and the planner's model of
// select/cons_tres) predicts. The first cases are the ones a tester and
// the model's reading of cons_tres found (a partly busy node splits the
// runs of nodes Slurm takes in order; a node with more free GPUs ranks
// first; a job that fits one node of the chosen run goes to the fullest
// of them that holds it); the
// rest are drawn from a fixed seed. The first cases run again with the
// nodes weighted by GPU type (scontrol update NodeName= Weight=): Slurm
// allocates nodes of lower weight first, as the simulator's
// --node-weights models; the model reads them back from scontrol show node
// as the daemon does. On 24.11 the GPUs are split over the chosen
// nodes in the order chosen (planner.Cluster.FillInChoiceOrder). It needs
// the lab to itself, as this package has it (.ci/test.sh runs it after
// the rest).
func TestTheSimulatorPlacesJobsWhereSlurmDoes(t *testing.T) {
	l := slurmlab.Require(t)
	ctx := context.Background()
	names := []string{"n1", "n2", "n3", "n4"}
	types := []string{"v100", "v100", "t4", "t4"}
	type placement struct {
		held  [4]int
		gpus  int // --gpus=gpus, or per node with nodes
		nodes int // > 0: -N nodes --gres=gpu:gpus
	}
	cases := []placement{
		{[4]int{0, 0, 0, 0}, 6, 0}, {[4]int{2, 0, 0, 0}, 6, 0}, {[4]int{1, 1, 0, 0}, 6, 0}, {[4]int{0, 1, 1, 0}, 5, 0},
		{[4]int{0, 0, 0, 1}, 2, 0}, {[4]int{2, 2, 2, 2}, 5, 0}, {[4]int{4, 2, 0, 0}, 4, 0},
	}
	// Per-node requests (planner.Cluster.FitNodes), run under every weighting.
	perNode := []placement{
		{[4]int{2, 0, 1, 3}, 2, 1}, {[4]int{0, 2, 0, 1}, 3, 1}, {[4]int{0, 0, 0, 0}, 3, 2}, {[4]int{1, 3, 0, 0}, 2, 2},
		{[4]int{2, 2, 2, 2}, 2, 2}, {[4]int{3, 0, 1, 0}, 1, 3},
	}
	r := rand.New(rand.NewPCG(17, 2026))
	for len(cases) < 13 {
		var h [4]int
		free := 0
		for i := range h {
			h[i] = r.IntN(5)
			free += 4 - h[i]
		}
		if free > 0 {
			cases = append(cases, placement{h, 1 + r.IntN(free), 0})
		}
	}
	series, err := l.CLI.Series(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A run stopped midway may have left weights behind: start from Slurm's default.
	if err := l.Command(ctx, "scontrol", "update", "NodeName=n[1-4]", "Weight=1").Run(); err != nil {
		t.Fatalf("resetting the nodes' weights: %v", err)
	}
	for _, w := range []struct {
		name    string
		weights [4]int // slurm.conf Weight= of n1..n4
		cases   int    // how many of cases
	}{
		{"equal weights", [4]int{1, 1, 1, 1}, len(cases)},
		{"the V100 nodes weighted first", [4]int{1, 1, 2, 2}, 7},
		{"the T4 nodes weighted first", [4]int{3, 3, 1, 1}, 7},
	} {
		for i := range names {
			if err := l.Command(ctx, "scontrol", "update", "NodeName="+names[i], "Weight="+strconv.Itoa(w.weights[i])).Run(); err != nil {
				t.Fatalf("setting %s's weight: %v", names[i], err)
			}
		}
		// The model gets the weights as the daemon reads them (its
		// snapshot's readWeights: scontrol show node).
		details, err := l.CLI.ShowNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nodes := make([]planner.Node, len(names))
		for i := range names {
			nodes[i] = planner.Node{Name: names[i], GPUType: types[i], Total: 4}
			for _, d := range details {
				if d.Name == names[i] {
					nodes[i].Weight = d.Weight
				}
			}
			if nodes[i].Weight != w.weights[i] {
				t.Fatalf("scontrol show node reads %s's weight as %d, set to %d", names[i], nodes[i].Weight, w.weights[i])
			}
		}
		t.Cleanup(func() {
			if err := l.Command(ctx, "scontrol", "update", "NodeName=n[1-4]", "Weight=1").Run(); err != nil {
				t.Errorf("resetting the nodes' weights: %v", err)
			}
		})
		cluster := planner.NewCluster(nodes, map[string]float64{"v100": 3.1, "t4": 1})
		// 24.11 gives the chosen nodes their GPUs in the order it chose them
		cluster.FillInChoiceOrder = series != "22.05"
		for _, tc := range append(slices.Clone(cases[:w.cases]), perNode...) {
			name := fmt.Sprintf("%s, held %v, --gpus=%d", w.name, tc.held, tc.gpus)
			if tc.nodes > 0 {
				name = fmt.Sprintf("%s, held %v, -N%d --gres=gpu:%d", w.name, tc.held, tc.nodes, tc.gpus)
			}
			t.Run(name, func(t *testing.T) {
				placeOne(t, l, cluster, names, tc.held, tc.gpus, tc.nodes)
			})
		}
	}
}

// placeOne holds held[i] GPUs of node names[i] with jobs pinned there,
// submits a job asking --gpus=gpus (nodes 0) or -N nodes --gres=gpu:gpus
// and compares where Slurm put its GPUs with cluster.Fit or
// cluster.FitNodes.
func placeOne(t *testing.T, l *slurmlab.Lab, cluster *planner.Cluster, names []string, held [4]int, gpus, nodes int) {
	ctx := context.Background()
	if _, err := l.WaitIdle(ctx, 30*time.Second); err != nil {
		t.Fatalf("the lab is not idle before the case: %v", err)
	}
	var ids []string
	defer func() {
		if len(ids) > 0 {
			if err := l.Command(ctx, "scancel", ids...).Run(); err != nil {
				t.Errorf("scancel %v: %v", ids, err)
			}
		}
		if _, err := l.WaitIdle(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}()
	avail := make([]int, len(names))
	for i, k := range held {
		avail[i] = 4 - k
		if k == 0 {
			continue
		}
		id := l.Submit(t, "#!/bin/sh\nsleep 300\n", "-p", "normal", "-w", names[i], "--gres=gpu:"+strconv.Itoa(k),
			"-c", strconv.Itoa(2*k), "-t", "5", "-o", "/dev/null")
		ids = append(ids, id)
		if _, err := l.WaitState(ctx, id, 30*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}
	before := usedGPUs(t, l, names)
	ask := []string{"--gpus=" + strconv.Itoa(gpus)}
	if nodes > 0 {
		ask = []string{"-N", strconv.Itoa(nodes), "--gres=gpu:" + strconv.Itoa(gpus)}
	}
	id := l.Submit(t, "#!/bin/sh\nsleep 300\n", append([]string{"-p", "normal", "-t", "5", "-o", "/dev/null"}, ask...)...)
	ids = append(ids, id)
	if _, err := l.WaitState(ctx, id, 30*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	after := usedGPUs(t, l, names)
	got := make([]int, len(names))
	for i := range names {
		got[i] = after[i] - before[i]
	}
	want := make([]int, len(names))
	model := cluster.Fit(avail, gpus, planner.FitRule{})
	if nodes > 0 {
		model = cluster.FitNodes(avail, nodes, gpus, planner.FitRule{})
	}
	for _, a := range model {
		want[a.Node] = a.GPUs
	}
	t.Logf("Slurm put the job's GPUs on n1..n4 as %v", got)
	if !slices.Equal(got, want) {
		t.Errorf("Slurm put the job's GPUs on n1..n4 as %v, the model as %v", got, want)
	}
}

// usedGPUs is the allocated GPUs of each named node, as sinfo shows them.
func usedGPUs(t *testing.T, l *slurmlab.Lab, names []string) []int {
	t.Helper()
	nodes, err := l.CLI.Sinfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(names))
	for _, n := range nodes {
		if i := slices.Index(names, n.Name); i >= 0 {
			_, out[i] = n.GPUs()
		}
	}
	return out
}
