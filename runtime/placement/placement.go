// Package placement assigns a job's logical workers (ESTs) to physical
// workers.
//
// EasyScale (arXiv 2208.14228, §4.2 "intra-job scheduling") places ESTs on
// heterogeneous devices in proportion to their speed so that no device
// waits long for the slowest. Here each logical worker is one equal unit of
// work (one micro-batch per step), so the step time of physical worker w
// holding c_w ESTs at relative speed s_w is c_w/s_w, and a placement should
// minimise max_w c_w/s_w. Greedily giving the next EST to the worker whose
// finish time (c_w+1)/s_w would be smallest is optimal for identical jobs on
// uniformly related machines (each greedy choice keeps the makespan of the
// partial assignment minimal; the argument is the standard exchange proof for
// unit jobs on Q||Cmax).
//
// ESTs are then laid out as contiguous ranges in rank order: worker 0 holds
// ESTs [0, c_0), worker 1 the next c_1, and so on. Contiguity keeps the
// canonical gradient reduction (a sum in EST order) a simple pipeline along
// the ranks.
package placement

import (
	"container/heap"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Range is a half-open interval [First, First+Count) of logical worker ids.
type Range struct {
	First, Count int
}

// Plan is one range per physical worker, indexed by rank. Ranges are
// contiguous and in order; a worker may hold zero ESTs when it is much
// slower than the others.
type Plan []Range

// Compute places logicalWorkers ESTs on len(speeds) workers, or on workers
// equal workers when speeds is nil. Ties go to the lower rank, so the result
// is a pure function of its arguments. It returns an error when there are no
// workers, more workers than ESTs, or a speed that is not positive.
func Compute(logicalWorkers, workers int, speeds []float64) (Plan, error) {
	if workers < 1 {
		return nil, fmt.Errorf("placement: %d physical workers; need at least 1", workers)
	}
	if logicalWorkers < workers {
		return nil, fmt.Errorf("placement: %d physical workers for %d logical workers; use at most %d", workers, logicalWorkers, logicalWorkers)
	}
	if speeds != nil && len(speeds) != workers {
		return nil, fmt.Errorf("placement: %d speeds for %d workers", len(speeds), workers)
	}
	for i, s := range speeds {
		if !(s > 0) {
			return nil, fmt.Errorf("placement: speed %v of worker %d is not positive", s, i)
		}
	}
	counts := make([]int, workers)
	if speeds == nil {
		for i := range counts {
			counts[i] = logicalWorkers / workers
			if i < logicalWorkers%workers {
				counts[i]++
			}
		}
	} else {
		counts = Counts(logicalWorkers, speeds)
	}
	plan := make(Plan, workers)
	first := 0
	for w, c := range counts {
		plan[w] = Range{First: first, Count: c}
		first += c
	}
	return plan, nil
}

// Counts is the greedy of the package doc: the number of ESTs of
// logicalWorkers on each of len(speeds) workers, each EST in turn to the
// worker whose finish time (c_w+1)/s_w would be smallest, the lower index
// on ties. A worker whose speed is not a positive finite number gets none;
// when no worker has one, every count is 0. O(L log k) for L ESTs on k
// workers (a heap of the finish times). This is the one implementation:
// Compute (the runtime's placement) and backfill/planner's Place (the
// daemon's and the simulator's step-time model) both call it, so the
// planner and the runtime agree on every placement.
func Counts(logicalWorkers int, speeds []float64) []int {
	counts := make([]int, len(speeds))
	h := &finishHeap{}
	for i, s := range speeds {
		if s > 0 && !math.IsInf(s, 1) {
			h.items = append(h.items, finish{t: 1 / s, i: i})
		}
	}
	if len(h.items) == 0 || logicalWorkers <= 0 {
		return counts
	}
	heap.Init(h)
	for range logicalWorkers {
		top := &h.items[0]
		counts[top.i]++
		top.t = float64(counts[top.i]+1) / speeds[top.i]
		heap.Fix(h, 0)
	}
	return counts
}

// finish is a worker's finish time should it take one more EST.
type finish struct {
	t float64
	i int
}

// finishHeap orders finish times, the lower worker index first on ties.
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

// Owner returns the rank holding logical worker est, or -1 if none does.
func (p Plan) Owner(est int) int {
	for w, r := range p {
		if est >= r.First && est < r.First+r.Count {
			return w
		}
	}
	return -1
}

// Imbalance returns max_w(c_w/s_w) / (N / sum_w s_w) - 1: how much longer
// the slowest worker takes than a perfectly divisible split (0 = perfect).
// speeds nil means equal speeds.
func (p Plan) Imbalance(speeds []float64) float64 {
	total, sum, worst := 0, 0.0, 0.0
	for w, r := range p {
		s := 1.0
		if speeds != nil {
			s = speeds[w]
		}
		total += r.Count
		sum += s
		if t := float64(r.Count) / s; t > worst {
			worst = t
		}
	}
	if total == 0 {
		return 0
	}
	return worst/(float64(total)/sum) - 1
}

// String formats the plan as "0-3|4-5|6-7" (an empty worker shows as "-").
func (p Plan) String() string {
	parts := make([]string, len(p))
	for i, r := range p {
		switch r.Count {
		case 0:
			parts[i] = "-"
		case 1:
			parts[i] = strconv.Itoa(r.First)
		default:
			parts[i] = fmt.Sprintf("%d-%d", r.First, r.First+r.Count-1)
		}
	}
	return strings.Join(parts, "|")
}
