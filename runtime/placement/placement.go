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
	"fmt"
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
		for e := 0; e < logicalWorkers; e++ {
			best := 0
			for w := 1; w < workers; w++ {
				if float64(counts[w]+1)/speeds[w] < float64(counts[best]+1)/speeds[best] {
					best = w
				}
			}
			counts[best]++
		}
	}
	plan := make(Plan, workers)
	first := 0
	for w, c := range counts {
		plan[w] = Range{First: first, Count: c}
		first += c
	}
	return plan, nil
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
