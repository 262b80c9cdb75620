package planner

import (
	"cmp"
	"slices"
)

// DefaultNearlyAsWell is the fraction of its best pace a waiting job that
// may run on several GPU types accepts on the types no waiting pinned job
// needs, rather than take GPUs of a type a pinned job waits for
// ([KeepOff]; issue 17, "a d2 job is kept off a type that a waiting d1 job
// needs when another type serves it nearly as well"). BENCHMARKS.md E37
// and E38 measure it.
const DefaultNearlyAsWell = 0.75

// TypeOffer is one GPU type a waiting job may run on: Capacity units of it
// (whole nodes in the daemon, GPUs in the simulator) that the job may use,
// busy or not, and the job's Speed there (relative to the reference type).
type TypeOffer struct {
	Type     string
	Capacity int
	Speed    float64
}

// KeepOffRequest asks whether a waiting job should be kept off the GPU
// types that waiting pinned jobs (jobs that name one GPU type, such as
// --gres=gpu:v100:8) need.
type KeepOffRequest struct {
	// Need is the job's request in the units of TypeOffer.Capacity.
	Need int
	// OneType: the job runs on a single GPU type (determinism d1);
	// otherwise it may span types and runs at the pace of its slowest GPU
	// (d2: every all-reduce waits for it).
	OneType bool
	// Types are the GPU types the job may run on.
	Types []TypeOffer
	// Pinned are the GPU types that other jobs waiting for resources are
	// pinned to; repeats are allowed.
	Pinned []string
	// NearlyAsWell is the fraction of its best pace the job must keep on
	// the other types, in (0, 1]; 0 means [DefaultNearlyAsWell].
	NearlyAsWell float64
	// PinnedStart is, by pinned type, the earliest any pinned job waiting
	// for it could start there, in seconds from now (Slurm's planned start
	// in the daemon, the projection of the running jobs' time limits in
	// the simulator). A type missing is needed now, or when is not known.
	PinnedStart map[string]float64
	// Run is, by type, the longest the job could hold GPUs of that type if
	// it started on it now, in seconds: started as small as start-small
	// may start it (the daemon: its time limit, raised as a start at its
	// minimum node count raises it; the simulator: its run time at its
	// minimum at its speed there). A type missing or 0 is not known.
	Run map[string]float64
}

// leavesInTime reports whether the job of q, started now on GPU type t,
// would end by the time the first pinned job waiting for t could start
// there: it then takes nothing that pinned job needs, and is not kept off
// t (backfill's rule for a reservation, applied to the pinned jobs that
// Slurm holds no reservation for yet).
func (q KeepOffRequest) leavesInTime(t string) bool {
	run, start := q.Run[t], q.PinnedStart[t]
	_, known := q.PinnedStart[t]
	return known && run > 0 && run <= start
}

// KeepOff returns the GPU types, sorted, to keep the job of q off while the
// pinned jobs wait, or nil. It keeps the job off every pinned type it may
// run on, but those it would leave before any pinned job waiting for them
// could start there (q.Run, q.PinnedStart: started there now, it takes
// nothing from them, as a backfilled job), when the other types it may run on can hold its whole request
// (by capacity, not by what is free now: the job then waits for them) and
// give it a pace at least q.NearlyAsWell of its best pace over all its
// types. A job's pace on a set of types is the speed of the slowest type
// its request reaches when filled fastest type first (one type for a
// OneType job: the fastest that holds all of it); the request is the same
// size on both sides, so the GPU count cancels. Pure; a malformed request
// (Need < 1, no types) returns nil.
func KeepOff(q KeepOffRequest) []string {
	if q.Need < 1 || len(q.Types) < 2 || len(q.Pinned) == 0 {
		return nil
	}
	f := q.NearlyAsWell
	if f <= 0 || f > 1 {
		f = DefaultNearlyAsWell
	}
	var off []string
	var rest []TypeOffer
	for _, t := range q.Types {
		if slices.Contains(q.Pinned, t.Type) && !q.leavesInTime(t.Type) {
			if !slices.Contains(off, t.Type) {
				off = append(off, t.Type)
			}
			continue
		}
		rest = append(rest, t)
	}
	if len(off) == 0 || len(rest) == 0 {
		return nil
	}
	best, ok := pace(q.Types, q.Need, q.OneType)
	if !ok {
		return nil
	}
	other, ok := pace(rest, q.Need, q.OneType)
	if !ok || other < f*best {
		return nil
	}
	slices.Sort(off)
	return off
}

// KeepOffExpired reports whether a job first kept off pinned types waited
// seconds ago has passed its bound, run (its run time at its request on
// its fastest type, seconds; the daemon's estimate is its time limit): it
// then goes back to every type it may use. (Callers keep a job off in
// one spell at most: once it ends, by this bound or because no pinned job
// needs the types any more, the job is not kept off again while it waits.) Waiting longer than its own run costs the job more than
// running on a type at least half as fast would. The bound (one run time)
// beat none over 960 cells (BENCHMARKS.md E38).
func KeepOffExpired(waited, run float64) bool { return waited > run }

// pace is the speed of the slowest type need units reach on types filled
// fastest first (oneType: the fastest single type holding all need), and
// false when they cannot hold it.
func pace(types []TypeOffer, need int, oneType bool) (float64, bool) {
	byPace := slices.Clone(types)
	slices.SortStableFunc(byPace, func(a, b TypeOffer) int { return cmp.Compare(b.Speed, a.Speed) })
	left := need
	for _, t := range byPace {
		if t.Capacity <= 0 || t.Speed <= 0 {
			continue
		}
		if oneType {
			if t.Capacity >= need {
				return t.Speed, true
			}
			continue
		}
		if left -= t.Capacity; left <= 0 {
			return t.Speed, true
		}
	}
	return 0, false
}
