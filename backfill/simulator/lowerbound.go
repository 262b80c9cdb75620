package simulator

import (
	"container/heap"
	"math"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// LowerBound is a lower bound on the mean JCT any scheduler could reach
// on a trace and cluster, in seconds: the larger of two bounds, each
// valid for every policy (rigid and elastic alike), so each policy's
// ratio to it says how far from the limit it is.
//
//   - Alone: every job runs from its submission alone on the cluster at
//     its best size and GPUs, sum of work / best throughput. The best
//     throughput is bounded from above by the job's throughput on k GPUs
//     all of the fastest type it may use (a job's throughput only grows
//     with faster GPUs in planner.Model), for k from its minimum to its
//     maximum GPUs (and to what those types hold).
//   - Capacity: the cluster as one machine that jobs share. A job holding
//     a fraction f of the cluster's GPUs progresses at most at f / a_j,
//     where a_j is its smallest area: the least GPU-seconds it can finish
//     in, over the whole cluster's GPU count (its best throughput per GPU,
//     bounded as above). So any schedule is a preemptive schedule of jobs
//     of lengths a_j with release times on one machine, whose sum of
//     completion times shortest-remaining-processing-time first minimises
//     (Schrage 1968; 1|r_j,pmtn|ΣC_j).
//
// Jobs that can never start (Result.Skipped) are left out, as in Run.
type LowerBound struct {
	// MeanJCT is max(Alone, Capacity); Alone and Capacity the two bounds.
	MeanJCT, Alone, Capacity float64
}

// ComputeLowerBound returns the lower bound of jobs on cfg's cluster (see
// LowerBound); each job's range and speeds are its elastic request's
// (trace.Job.Elastic), whatever cfg.Policy says. Errors: an invalid cfg
// (wrapping ErrConfig).
func ComputeLowerBound(jobs []trace.Job, cfg Config) (LowerBound, error) {
	cfg.Policy = Elastic
	s, err := newSim(cfg)
	if err != nil {
		return LowerBound{}, err
	}
	total := float64(s.total)
	var rel []srptJob
	sumAlone := 0.0
	for i := range jobs {
		r := s.newRun(&jobs[i])
		if !s.canEverStart(r) {
			continue
		}
		best, perGPU := s.bestRates(r)
		if best <= 0 {
			continue
		}
		work := float64(r.j.Duration) * float64(r.model.RefGPUs) // reference-GPU-seconds
		sumAlone += work / best
		rel = append(rel, srptJob{release: float64(r.j.Submit), length: work / perGPU / total})
	}
	if len(rel) == 0 {
		return LowerBound{}, nil
	}
	lb := LowerBound{Alone: sumAlone / float64(len(rel)), Capacity: srptMeanFlow(rel)}
	lb.MeanJCT = max(lb.Alone, lb.Capacity)
	return lb, nil
}

// bestRates bounds r's throughput from above (reference-GPU equivalents):
// the most on any allowed GPU count of its fastest allowed speed, and the
// most per GPU. Allowed are the types it names (gpu_type), else all: a d1
// job's one-type rule is not applied, since the rigid policy lets such a
// job span types and the bound holds for every policy.
func (s *sim) bestRates(r *run) (best, perGPU float64) {
	byType := map[string]int{}
	for _, nd := range s.nodes {
		if len(r.rule.Types) == 0 || containsString(r.rule.Types, nd.typ) {
			byType[nd.typ] += nd.total
		}
	}
	fastest, room := 0.0, 0
	for typ, n := range byType {
		sp := s.cfg.Speeds[typ]
		if v, ok := r.j.Speeds[typ]; ok {
			sp = v
		}
		fastest, room = max(fastest, sp), room+n
	}
	if fastest > 0 {
		b, p := rangeRates(r.model, fastest, r.min, min(r.max, room))
		best, perGPU = max(best, b), max(perGPU, p)
	}
	return best, perGPU
}

// rangeRates is the best throughput and the best throughput per GPU of m
// on k GPUs of speed sp, lo ≤ k ≤ hi.
func rangeRates(m planner.Model, sp float64, lo, hi int) (best, perGPU float64) {
	for k := max(lo, 1); k <= hi; k++ {
		t, _ := m.Throughput([]planner.SpeedCount{{Speed: sp, N: k}})
		best, perGPU = max(best, t), max(perGPU, t/float64(k))
	}
	return best, perGPU
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// srptJob is one job of the single-machine relaxation.
type srptJob struct{ release, length float64 }

// srptMeanFlow is the mean of completion − release of jobs (sorted by
// release) on one machine, preemptive shortest remaining processing time
// first: the optimum of 1|r_j,pmtn|ΣC_j.
func srptMeanFlow(jobs []srptJob) float64 {
	var h remainingHeap
	now, sum := 0.0, 0.0
	for i := 0; i < len(jobs) || h.Len() > 0; {
		if h.Len() == 0 {
			now = max(now, jobs[i].release)
		}
		for ; i < len(jobs) && jobs[i].release <= now; i++ {
			heap.Push(&h, srptLeft{left: jobs[i].length, release: jobs[i].release})
		}
		next := math.Inf(1)
		if i < len(jobs) {
			next = jobs[i].release
		}
		top := &h[0]
		if now+top.left <= next {
			now += top.left
			sum += now - top.release
			heap.Pop(&h)
			continue
		}
		top.left -= next - now
		now = next
	}
	return sum / float64(len(jobs))
}

type srptLeft struct{ left, release float64 }

type remainingHeap []srptLeft

func (h remainingHeap) Len() int           { return len(h) }
func (h remainingHeap) Less(a, b int) bool { return h[a].left < h[b].left }
func (h remainingHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *remainingHeap) Push(x any)        { *h = append(*h, x.(srptLeft)) }
func (h *remainingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
