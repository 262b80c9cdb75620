package simulator

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// LowerBound is a lower bound on the mean JCT any scheduler could reach
// on a trace and cluster, in seconds: the largest of three bounds, each
// valid for every policy (rigid and elastic alike), so each policy's
// ratio to it says how far from the limit it is.
//
//   - Alone: every job runs from its submission alone on the cluster at
//     its best size and GPUs, sum of work / best throughput. The best
//     throughput is bounded from above by the job's throughput on k GPUs
//     all of the fastest type it may use (a job's throughput only grows
//     with faster GPUs in planner.Model), for k from its minimum to its
//     maximum GPUs (and to what those types hold).
//   - Capacity: the cluster as one machine that jobs share, the larger
//     of two forms. By count: a job holding a fraction f of the
//     cluster's GPUs progresses at most at f / a_j, where a_j is its
//     smallest area: the least GPU-seconds it can finish in, over the
//     GPU count of the types some job may use (its best throughput per
//     GPU, bounded as above). By speed: a GPU of type t counts ρ_t = the most, over the
//     jobs that may use t, of t's speed for the job over the job's
//     fastest allowed speed, and the cluster holds C = Σ_t n_t·ρ_t such
//     units; a job holding GPUs i progresses at most at T₁·Σ_i s_i/s_max,
//     T₁ its throughput on one GPU of its fastest speed (planner.Model:
//     the step's compute is at least L/Σ s_i for L logical workers, one
//     GPU has no synchronisation term), which is at most T₁·(the units it
//     holds), so a_j = work / (T₁·C) of the machine. On a mixed cluster
//     whose slow GPUs are slow for every job, this counts them as the
//     fraction of a fast GPU they are, where the count form counts each
//     as a fast one. Either way any schedule is a preemptive schedule of
//     jobs of lengths a_j with release times on one machine, whose sum of
//     completion times shortest-remaining-processing-time first minimises
//     (Schrage 1968; 1|r_j,pmtn|ΣC_j).
//   - Pools: the jobs grouped by the GPU types they may use (a job naming
//     a type never holds another), each group on a machine of its own
//     types' GPUs, bounded as Capacity (both forms, ρ over the group's
//     jobs) and as Alone, whichever is more for that group; the sum over
//     the groups. A group's jobs can only be slowed by the other groups'
//     jobs, so each group's sum of flow times bounds theirs in any
//     schedule, and the groups are disjoint. On a cluster whose jobs are
//     pinned to types this counts each type's queue, which Capacity
//     spreads over every GPU.
//
// Jobs that can never start under the policy given (Result.Skipped) are
// left out, as Run leaves them out: a d1 job larger than any one type
// never starts under an elastic policy but spans types under rigid (a
// tester's finding: the rigid run's mean counted a job the bound left
// out, and fell below it).
type LowerBound struct {
	// MeanJCT is max(Alone, Capacity, Pools); the others the three bounds.
	MeanJCT, Alone, Capacity, Pools float64
}

// ComputeLowerBound returns the lower bound of jobs on cfg's cluster (see
// LowerBound); each job's range and speeds are its elastic request's
// (trace.Job.Elastic), whatever cfg.Policy says, and the jobs counted are
// those Run under cfg.Policy starts. Errors: an invalid cfg (wrapping
// ErrConfig).
func ComputeLowerBound(jobs []trace.Job, cfg Config) (LowerBound, error) {
	asRun, err := newSim(cfg) // which jobs Run skips under cfg.Policy
	if err != nil {
		return LowerBound{}, err
	}
	cfg.Policy = Elastic
	s, err := newSim(cfg)
	if err != nil {
		return LowerBound{}, err
	}
	var all []boundJob
	pools := map[string]*pool{}
	sumAlone := 0.0
	for i := range jobs {
		if !asRun.canEverStart(asRun.newRun(&jobs[i])) {
			continue
		}
		r := s.newRun(&jobs[i])
		b := s.boundJob(r)
		if b.best <= 0 {
			continue
		}
		sumAlone += b.work / b.best
		all = append(all, b)
		key, _ := s.poolOf(r)
		p := pools[key]
		if p == nil {
			p = &pool{}
			pools[key] = p
		}
		p.alone += b.work / b.best
		p.jobs = append(p.jobs, b)
	}
	if len(all) == 0 {
		return LowerBound{}, nil
	}
	n := float64(len(all))
	sumPools := 0.0
	for _, p := range pools {
		sumPools += max(p.alone, s.capacityMeanFlow(p.jobs)*float64(len(p.jobs)))
	}
	lb := LowerBound{Alone: sumAlone / n, Capacity: s.capacityMeanFlow(all), Pools: sumPools / n}
	lb.MeanJCT = max(lb.Alone, lb.Capacity, lb.Pools)
	return lb, nil
}

// boundJob is what LowerBound knows of one job: its release (seconds),
// work (reference-GPU-seconds), best throughput and best throughput per
// GPU over its range (reference-GPU equivalents, bestRates), its
// throughput on one GPU of its fastest allowed speed (single) and, for
// each type it may use, that type's speed over the fastest (rel, 0 to 1).
type boundJob struct {
	release, work        float64
	best, perGPU, single float64
	rel                  map[string]float64
}

// pool is one group of LowerBound's Pools bound: the jobs that may use
// the same GPU types and the group's Alone sum (seconds).
type pool struct {
	jobs  []boundJob
	alone float64
}

// boundJob collects r's figures for LowerBound.
func (s *sim) boundJob(r *run) boundJob {
	b := boundJob{release: float64(r.j.Submit), work: float64(r.j.Duration) * float64(r.model.RefGPUs), rel: map[string]float64{}}
	b.best, b.perGPU = s.bestRates(r)
	fastest := 0.0
	for typ := range s.allowedGPUs(r) {
		sp := s.speedOf(r, typ)
		b.rel[typ] = sp
		fastest = max(fastest, sp)
	}
	if fastest <= 0 {
		return boundJob{}
	}
	for typ, sp := range b.rel {
		b.rel[typ] = sp / fastest
	}
	b.single, _ = r.model.Throughput([]planner.SpeedCount{{Speed: fastest, N: 1}})
	return b
}

// capacityMeanFlow is the Capacity bound of jobs (see LowerBound): the
// larger of the mean SRPT flow time over the GPUs they may use counted
// by number and counted by speed.
func (s *sim) capacityMeanFlow(jobs []boundJob) float64 {
	units := map[string]float64{} // ρ_t
	for _, b := range jobs {
		for typ, rel := range b.rel {
			units[typ] = max(units[typ], rel)
		}
	}
	gpus, capacity := 0.0, 0.0
	for _, nd := range s.nodes {
		if rho, ok := units[nd.typ]; ok {
			gpus += float64(nd.total)
			capacity += float64(nd.total) * rho
		}
	}
	byCount := make([]srptJob, len(jobs))
	bySpeed := make([]srptJob, len(jobs))
	for i, b := range jobs {
		byCount[i] = srptJob{release: b.release, length: b.work / b.perGPU / gpus}
		bySpeed[i] = srptJob{release: b.release, length: b.work / b.single / capacity}
	}
	return max(srptMeanFlow(byCount), srptMeanFlow(bySpeed))
}

// poolOf names the GPU types r may use (its gpu_type, else every type:
// "") and counts their GPUs.
func (s *sim) poolOf(r *run) (key string, gpus int) {
	if len(r.rule.Types) == 0 {
		return "", s.total
	}
	types := slices.Sorted(slices.Values(r.rule.Types))
	for _, nd := range s.nodes {
		if slices.Contains(types, nd.typ) {
			gpus += nd.total
		}
	}
	return strings.Join(types, ","), gpus
}

// allowedGPUs counts the GPUs of each type r may use: the types it
// names (gpu_type), else all. A d1 job's one-type rule is not applied,
// since the rigid policy lets such a job span types and the bound holds
// for every policy.
func (s *sim) allowedGPUs(r *run) map[string]int {
	byType := map[string]int{}
	for _, nd := range s.nodes {
		if len(r.rule.Types) == 0 || slices.Contains(r.rule.Types, nd.typ) {
			byType[nd.typ] += nd.total
		}
	}
	return byType
}

// speedOf is r's speed on typ: its own (trace speeds) else the cluster's.
func (s *sim) speedOf(r *run, typ string) float64 {
	if v, ok := r.j.Speeds[typ]; ok {
		return v
	}
	return s.cfg.Speeds[typ]
}

// bestRates bounds r's throughput from above (reference-GPU equivalents):
// the most on any allowed GPU count of its fastest allowed speed, and the
// most per GPU, over the types allowedGPUs gives.
func (s *sim) bestRates(r *run) (best, perGPU float64) {
	fastest, room := 0.0, 0
	for typ, n := range s.allowedGPUs(r) {
		fastest, room = max(fastest, s.speedOf(r, typ)), room+n
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

// srptJob is one job of the single-machine relaxation.
type srptJob struct{ release, length float64 }

// srptMeanFlow is the mean of completion − release of jobs on one
// machine, preemptive shortest remaining processing time first: the
// optimum of 1|r_j,pmtn|ΣC_j. It sorts jobs by release.
func srptMeanFlow(jobs []srptJob) float64 {
	slices.SortStableFunc(jobs, func(a, b srptJob) int { return cmp.Compare(a.release, b.release) })
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
