package planner

import (
	"container/heap"
	"math"
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
// Algorithm: give each EST in turn to the GPU whose finish time
// (load_i+1)/speed_i would be smallest, lower index on ties; a heap makes it
// O(L log k) for L ESTs on k GPUs.
//
// Optimality: the finish times the greedy produces are, in order, the L
// smallest elements of the multiset V = {j/speed_i : i GPU, j ≥ 1}, because
// the candidates (load_i+1)/speed_i are exactly the smallest not-yet-taken
// element of each GPU's chain. Any placement with makespan M puts load_i ≤
// M·speed_i ESTs on GPU i, so V has at least Σ load_i = L elements ≤ M;
// hence M ≥ the L-th smallest element of V, which is the greedy's makespan.
// It is the same greedy as runtime/placement.Compute, so the planner and the
// runtime agree on every placement.
func Place(logicalWorkers int, gpus []GPU) Placement {
	p := Placement{Loads: make([]int, len(gpus)), StepTime: math.Inf(1), Waste: 1}
	h := &finishHeap{}
	for i, g := range gpus {
		if g.Speed > 0 && !math.IsInf(g.Speed, 1) {
			h.items = append(h.items, finish{t: 1 / g.Speed, i: i})
		}
	}
	if len(h.items) == 0 || logicalWorkers <= 0 {
		return p
	}
	heap.Init(h)
	for range logicalWorkers {
		top := &h.items[0]
		p.Loads[top.i]++
		top.t = float64(p.Loads[top.i]+1) / gpus[top.i].Speed
		heap.Fix(h, 0)
	}
	busy, worst := 0.0, 0.0
	for i, g := range gpus {
		if p.Loads[i] == 0 {
			continue
		}
		t := float64(p.Loads[i]) / g.Speed
		busy += t
		worst = max(worst, t)
	}
	p.StepTime = worst
	p.Waste = 1 - busy/(float64(len(gpus))*worst)
	return p
}

type finish struct {
	t float64
	i int
}

type finishHeap struct{ items []finish }

func (h *finishHeap) Len() int { return len(h.items) }
func (h *finishHeap) Less(a, b int) bool {
	if h.items[a].t != h.items[b].t {
		return h.items[a].t < h.items[b].t
	}
	return h.items[a].i < h.items[b].i
}
func (h *finishHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *finishHeap) Push(x any)    { h.items = append(h.items, x.(finish)) }
func (h *finishHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
