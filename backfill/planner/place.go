package planner

import (
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/placement"
)

// GPU is one GPU a job may run ESTs on.
type GPU struct {
	// Node is the node name; Type the GRES type (informational).
	Node, Type string
	// Speed is the GPU's speed relative to the reference type (> 0; a GPU
	// with a non-positive speed is given no ESTs).
	Speed float64
}

// Placement is the EST count per GPU of a [Place] call.
type Placement struct {
	// Loads[i] is the number of ESTs on gpus[i]; they sum to the logical
	// worker count unless no GPU has a positive speed.
	Loads []int
	// StepTime is max_i(Loads[i]/speed_i), in units of one EST's compute
	// time on a reference GPU; +Inf when nothing could be placed.
	StepTime float64
	// Waste is 1 − Σ_i(Loads[i]/speed_i)/(len(gpus)·StepTime): the fraction
	// of the GPUs' time idle while waiting for the slowest one.
	Waste float64
}

// Place assigns logicalWorkers ESTs (equal units of work) to gpus so that
// the step's compute time max_i(load_i/speed_i) is as small as possible
// (EasyScale §4.2, intra-job scheduling over heterogeneous GPUs).
//
// Algorithm: runtime/placement.Counts, the one implementation of the
// greedy: give each EST in turn to the GPU whose finish time
// (load_i+1)/speed_i would be smallest, lower index on ties; a heap makes it
// O(L log k) for L ESTs on k GPUs.
//
// Optimality: the finish times the greedy produces are, in order, the L
// smallest elements of the multiset V = {j/speed_i : i GPU, j ≥ 1}, because
// the candidates (load_i+1)/speed_i are exactly the smallest not-yet-taken
// element of each GPU's chain. Any placement with makespan M puts load_i ≤
// M·speed_i ESTs on GPU i, so V has at least Σ load_i = L elements ≤ M;
// hence M ≥ the L-th smallest element of V, which is the greedy's makespan.
// The runtime places with the same function (placement.Compute), so the
// planner and the runtime agree on every placement.
func Place(logicalWorkers int, gpus []GPU) Placement {
	speeds := make([]float64, len(gpus))
	for i, g := range gpus {
		speeds[i] = g.Speed
	}
	p := Placement{Loads: placement.Counts(logicalWorkers, speeds), StepTime: math.Inf(1), Waste: 1}
	busy, worst := 0.0, 0.0
	for i, g := range gpus {
		if p.Loads[i] == 0 {
			continue
		}
		t := float64(p.Loads[i]) / g.Speed
		busy += t
		worst = max(worst, t)
	}
	if worst == 0 {
		return p
	}
	p.StepTime = worst
	p.Waste = 1 - busy/(float64(len(gpus))*worst)
	return p
}
