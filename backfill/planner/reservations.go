package planner

import (
	"cmp"
	"slices"
)

// Reservations indexes the planned starts of pending jobs (their
// reservations: squeue --start's start time and SCHEDNODES on Slurm, the
// projection of the running jobs' time limits in the simulator), so that
// "when does a job other than this one plan to start on each node"
// (Others) costs one pass over the reserved nodes rather than over the
// queue. J identifies a job (Slurm's id, the simulator's run), N a node
// (its name, or its index). The zero value is not usable: NewReservations.
// Shrink-to-admit asks it in the daemon and in the simulator alike, with
// the same rule ([AdmitRequest.Reserved]).
type Reservations[J comparable, N cmp.Ordered] struct {
	jobs  map[J]planned[N]
	nodes map[N][]reservedBy[J] // by node, the jobs whose start names it, earliest first
}

type planned[N any] struct {
	start int64
	nodes []N
}

type reservedBy[J any] struct {
	job   J
	start int64
}

// NewReservations returns an empty index.
func NewReservations[J comparable, N cmp.Ordered]() *Reservations[J, N] {
	return &Reservations[J, N]{jobs: map[J]planned[N]{}, nodes: map[N][]reservedBy[J]{}}
}

// Add records that job is planned to start at start (seconds, on the
// caller's clock: Unix seconds in the daemon, simulated seconds in the
// simulator) on nodes; a node named twice counts once, and a job added
// again replaces its earlier plan. A job with no nodes is not recorded.
func (r *Reservations[J, N]) Add(job J, start int64, nodes []N) {
	r.Drop(job)
	var own []N
	for _, n := range nodes {
		if slices.Contains(own, n) {
			continue
		}
		own = append(own, n)
		by := r.nodes[n]
		i, _ := slices.BinarySearchFunc(by, start, func(e reservedBy[J], t int64) int { return cmp.Compare(e.start, t+1) })
		r.nodes[n] = slices.Insert(by, i, reservedBy[J]{job, start})
	}
	if len(own) > 0 {
		r.jobs[job] = planned[N]{start, own}
	}
}

// Drop removes job's plan (it started, or left the queue).
func (r *Reservations[J, N]) Drop(job J) {
	p, ok := r.jobs[job]
	if !ok {
		return
	}
	for _, n := range p.nodes {
		by := slices.DeleteFunc(r.nodes[n], func(e reservedBy[J]) bool { return e.job == job })
		if len(by) == 0 {
			delete(r.nodes, n)
		} else {
			r.nodes[n] = by
		}
	}
	delete(r.jobs, job)
}

// Nodes returns the nodes job's planned start names (nil: none), in the
// order Add saw them first. The caller must not change the slice.
func (r *Reservations[J, N]) Nodes(job J) []N { return r.jobs[job].nodes }

// Len is how many jobs have a plan.
func (r *Reservations[J, N]) Len() int { return len(r.jobs) }

// Others returns, for every node the planned start of a job other than
// job (and the jobs also names) names, the earliest such start (the
// caller's clock, as Add).
func (r *Reservations[J, N]) Others(job J, also ...J) map[N]int64 {
	out := make(map[N]int64, len(r.nodes))
	for n, by := range r.nodes {
		for _, e := range by {
			if e.job != job && !slices.Contains(also, e.job) {
				out[n] = e.start
				break
			}
		}
	}
	return out
}

// TakesReserved reports whether a job admitted now, which may hold what
// it takes for hold seconds (its time limit, plus how long it may take to
// start), may take GPUs on node: no other pending job plans to start there
// (reserved(node) is not ok, or reserved is nil), or it ends by the
// earliest such start. This is Slurm's backfill rule for a job on nodes a
// reservation needs (https://slurm.schedmd.com/sched_config.html,
// "Backfill"), applied to every other job, whatever its rank: Slurm would
// plan a job ranked below the admitted one after it, but that job's plan
// was made with the admitted one waiting, and a shrink that starts it
// sooner moves the plan (a tester saw a job Slurm had backfilled start
// 10 min late). Slurm plans by time limits, so the limit counts, not the
// expected end. hold 0 (not known) takes nothing reserved.
func TakesReserved(node int, hold float64, reserved func(node int) (start float64, ok bool)) bool {
	if reserved == nil {
		return true
	}
	start, ok := reserved(node)
	return !ok || hold > 0 && hold <= start
}

// EarliestReserved returns the earliest start (seconds from now) among
// the reservations of other pending jobs (reserved, as [TakesReserved])
// that name a node of base; ok is false when none names any.
func EarliestReserved(base []Alloc, reserved func(node int) (start float64, ok bool)) (start float64, ok bool) {
	if reserved == nil {
		return 0, false
	}
	for _, b := range base {
		if at, named := reserved(b.Node); named && (!ok || at < start) {
			start, ok = at, true
		}
	}
	return start, ok
}

// DonorGives returns how many GPUs, at most most, a donor holding base GPUs
// on a node that another pending job plans to start on at start (seconds
// from now, [EarliestReserved]) may give: the most whose raised time limit,
// raisedEnd(g) seconds from now, still ends by start (0 when none does).
// A shrunk donor's limit is raised to cover its remaining work at the
// smaller size, and Slurm plans by time limits: a limit raised past a
// reservation's start moves that job's start later, whether it ranks above
// the admitted job or below it, which Slurm itself never does. raisedEnd
// must not decrease as g grows; nil gives 0.
func DonorGives(most int, start float64, raisedEnd func(g int) float64) int {
	if raisedEnd == nil || most <= 0 || raisedEnd(0) > start {
		return 0
	}
	lo, hi := 0, most
	for lo < hi {
		if mid := (lo + hi + 1) / 2; raisedEnd(mid) <= start {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
