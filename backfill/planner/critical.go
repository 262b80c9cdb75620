package planner

import (
	"cmp"
	"math"
	"slices"
)

// CriticalJob is a queued job as [Cluster.CriticalDelay] sees it: GPUs
// (≥ 1) is its request, Rule where it may run and Run its run time at its
// request (seconds; on its fastest allowed type in the simulator, its
// time limit in the daemon).
type CriticalJob struct {
	GPUs int
	// PerNode, when above 0, is the GPUs it asks on each of GPUs / PerNode
	// nodes (placed by FitNodes); 0: GPUs anywhere (Fit).
	PerNode int
	Rule    FitRule
	Run     float64
	// On, aligned with Cluster.Nodes, marks the nodes it may start on
	// (its partitions, --nodelist, --exclude); nil: every node.
	On []bool
}

// Release is a running job's own allocation, free again at At (its time
// limit's end, Unix seconds).
type Release struct {
	At    int64
	Alloc []Alloc
}

// CriticalDelayInput is what [Cluster.CriticalDelay] decides on: the
// cluster now (Avail: per node, the GPUs a starting job may take, as for
// Fit; Releases: the running jobs' allocations and when their time limits
// end), the longest time left of a running job (Horizon, seconds), the
// queued jobs other than the one deciding (Queued), and what that one
// would hold (Hold) until when (Until, Unix seconds).
type CriticalDelayInput struct {
	Now      int64
	Avail    []int
	Releases []Release
	Horizon  float64
	Queued   []CriticalJob
	Hold     []Alloc
	Until    int64
}

// CriticalDelay is how much later, summed over the queued jobs that may
// use a GPU type of in.Hold, each would end past Now + Horizon (the end of
// every running job that counts: the caller's horizon, [HorizonFor] in the
// daemon) if in.Hold is taken now until in.Until: a job's earliest start
// at its request x0 without the hold and x1 with it, every running job
// ending at its time limit (EASY backfill's estimate, Lifka 1995), counts
// min(x1 − x0, x1 + Run − (Now + Horizon)) when positive. A job that would
// not start before in.Until without the hold counts 0 (with it back, it
// starts as soon). Pure; seconds.
//
// A queued job that ends after every running job sets the makespan, and
// a small start that delays it delays the makespan. [StartSmall] weighs
// the sum against what starting small saves the job itself
// (StartSmallRequest.Delay): short jobs started small one after another on
// a one-type pool kept a long job pinned to it from starting for 33,000 s
// in the BENCHMARKS.md hetero matrix (issue 17, E23 and E36).
func (c *Cluster) CriticalDelay(in CriticalDelayInput) float64 {
	hold := float64(in.Until - in.Now)
	if hold <= 0 || len(in.Hold) == 0 {
		return 0
	}
	types := c.holdTypes(in.Hold)
	var with []int
	var rels []Release
	sum := 0.0
	for _, q := range in.Queued {
		if !q.MayBeDelayed(types, hold, in.Horizon) || !q.mayUse(in.Hold) {
			continue
		}
		if with == nil {
			with = slices.Clone(in.Avail)
			for _, h := range in.Hold {
				with[h.Node] -= h.GPUs
			}
			// Only what frees by Until matters: with the hold back, a job
			// fits at Until wherever it fit without the hold.
			for _, r := range in.Releases {
				if r.At <= in.Until && len(r.Alloc) > 0 {
					rels = append(rels, r)
				}
			}
			slices.SortStableFunc(rels, func(x, y Release) int { return cmp.Compare(x.At, y.At) })
		}
		x0 := c.earliestStart(in.Now, q, in.Avail, rels, nil, 0)
		if x0 >= in.Until {
			continue // it starts no sooner without the hold
		}
		x1 := c.earliestStart(in.Now, q, with, rels, in.Hold, in.Until)
		past := float64(x1-in.Now) + q.Run - in.Horizon
		if past <= 0 || x1 == math.MaxInt64 {
			continue // it still ends before some running job
		}
		sum += min(float64(x1-x0), past)
	}
	return sum
}

// mayUse reports whether q may start on a node of hold: a job that may not
// is not delayed by it.
func (q CriticalJob) mayUse(hold []Alloc) bool {
	if q.On == nil {
		return true
	}
	for _, h := range hold {
		if h.Node < len(q.On) && q.On[h.Node] {
			return true
		}
	}
	return false
}

// allowed reports whether q may start on node n.
func (q CriticalJob) allowed(n int) bool { return q.On == nil || (n < len(q.On) && q.On[n]) }

// holdTypes is the set of GPU types of hold's nodes.
func (c *Cluster) holdTypes(hold []Alloc) map[string]bool {
	types := map[string]bool{}
	for _, h := range hold {
		types[c.Nodes[h.Node].GPUType] = true
	}
	return types
}

// MayBeDelayed reports whether a hold of the GPU types types for hold
// seconds could add to [Cluster.CriticalDelay] for q, without working out
// when q starts: q asks GPUs, may use one of types, and runs long enough
// (Run + hold > horizon) to end past every running job once delayed. A job
// that fails it counts 0 (its start with the hold is by the hold's end at
// the latest), so callers drop it before capping the queue they pass.
func (q CriticalJob) MayBeDelayed(types map[string]bool, hold, horizon float64) bool {
	return q.GPUs >= 1 && q.Rule.UsesAny(types) && q.Run+hold > horizon
}

// CriticalDelayJobs is how many queued jobs a start-small weighs at most:
// the first in queue order that [CriticalJob.MayBeDelayed] keeps. Each
// costs up to two [Cluster.Fit] calls per running job's limit end within
// the hold.
const CriticalDelayJobs = 64

// fits reports whether q can start on avail as Slurm places it.
func (q CriticalJob) fits(c *Cluster, avail []int) bool {
	return c.Place(avail, q.GPUs, q.PerNode, q.Rule) != nil
}

// earliestStart is when q could start at its request from avail now, the
// allocations of rels (sorted by At) and hold (at until) coming free, on
// the nodes it may start on.
func (c *Cluster) earliestStart(now int64, q CriticalJob, avail []int, rels []Release, hold []Alloc, until int64) int64 {
	proj := slices.Clone(avail)
	for n := range proj {
		if !q.allowed(n) {
			proj[n] = 0
		}
	}
	if q.fits(c, proj) {
		return now
	}
	held := hold != nil
	for i := 0; i < len(rels) || held; {
		t := int64(math.MaxInt64)
		if i < len(rels) {
			t = rels[i].At
		}
		if held && until <= t {
			t = until
		}
		for ; i < len(rels) && rels[i].At == t; i++ {
			for _, a := range rels[i].Alloc {
				if q.allowed(a.Node) {
					proj[a.Node] += a.GPUs
				}
			}
		}
		if held && until == t {
			for _, a := range hold {
				if q.allowed(a.Node) {
					proj[a.Node] += a.GPUs
				}
			}
			held = false
		}
		if q.fits(c, proj) {
			return t
		}
	}
	return math.MaxInt64
}
