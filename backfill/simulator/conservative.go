package simulator

import (
	"math"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// holding is a queued job's planned start in a pass: it starts at t on
// allocs and holds them until end (simulated seconds).
type holding struct {
	r      *run
	t, end int64
	allocs []alloc
}

// nodeSpaceNow returns the pass's node space: the GPUs free now (avail),
// the running jobs' base GPUs freed at their time limits, less every
// holding made so far. It is made again when a start or a shrink changed
// the running jobs since.
func (s *sim) nodeSpaceNow(avail []int) *nodeSpace {
	if s.space.typeOf == nil {
		for _, nd := range s.nodes {
			k := slices.Index(s.spaceTypes, nd.typ)
			if k < 0 {
				k = len(s.spaceTypes)
				s.spaceTypes = append(s.spaceTypes, nd.typ)
			}
			s.space.typeOf = append(s.space.typeOf, k)
		}
		s.space.ntypes = len(s.spaceTypes)
	}
	if s.spaceDirty {
		s.space.reset(s.now, avail, s.byLimit())
		for _, h := range s.holds {
			s.space.take(h.t, h.end, h.allocs)
		}
		s.spaceDirty = false
	}
	return &s.space
}

// endOn is when r started at t on allocs ends: t plus its remaining work
// at that size (planner.RunTime), its time limit in the simulation.
func (s *sim) endOn(r *run, allocs []alloc, t int64) int64 {
	return t + int64(math.Ceil(planner.RunTime(r.model, s.speedsOn(r, allocs), r.rem)))
}

// earliest is r's earliest start at its request in the node space, with
// the allocation then and its end; ok is false when it never fits. Its
// time limit depends on the type it lands on, so each start time is tried
// with the GPUs free for its run on the fastest type it may use, then on
// the slowest (planner limitAt), and an allocation is taken only when its
// run on it ends within the span it was fitted for. Now, it is placed as
// Slurm places a starting job (slurmFit: free GPUs before lent ones).
func (s *sim) earliest(r *run, avail []int) (t, end int64, allocs []alloc, ok bool) {
	m := s.nodeSpaceNow(avail)
	want, rule := r.j.GPUs, s.ruleOf(r)
	spans := s.spansOf(r)
	types := s.typeMask[:0]
	for _, typ := range s.spaceTypes {
		types = append(types, len(rule.Types) == 0 || slices.Contains(rule.Types, typ))
	}
	s.typeMask = types
	for k, d := range spans {
		s.lows[k].start(m, d, types, rule.OneType)
	}
	for i, t := range m.times {
		if s.lows[0].usable(i) < want {
			continue
		}
		for k, d := range spans {
			if d <= 0 || s.lows[k].at(i) < want {
				continue
			}
			w, sum := m.window(i, t+d, s.win)
			s.win = w
			if sum < want {
				continue
			}
			var a []alloc
			if t == s.now {
				a = s.slurmFit(w, want, rule)
			} else {
				a = s.cluster.Fit(w, want, rule)
			}
			if a == nil {
				continue
			}
			if e := s.endOn(r, a, t); e-t <= d {
				return t, e, a, true
			}
		}
	}
	return 0, 0, nil, false
}

// spansOf is r's run time at its request on the fastest type it may use,
// then on the slowest (0 when that is the same), the spans earliest fits
// it for; computed once per pass, as a queued job's work and types do not
// change within one.
func (s *sim) spansOf(r *run) [2]int64 {
	if r.spansPass == s.passes || (r.spansPass > 0 && len(r.off) == 0 && len(r.hold) == 0) {
		return r.spans // the same work and rule (no keep-off nor hold-for-fast changes it)
	}
	want := r.j.GPUs
	fast := int64(math.Ceil(planner.RunTime(r.model, []planner.SpeedCount{{Speed: s.bestSpeed(r), N: want}}, r.rem)))
	r.spans = [2]int64{max(fast, 1), 0}
	if slow := int64(s.limitAt(r, want)); slow > fast {
		r.spans[1] = slow
	}
	r.spansPass = s.passes
	return r.spans
}

// planHeld gives each job of s.unheld, in queue order, its earliest start
// in the node space (keep), if it has one. A pass defers those plans
// (s.unheld) until a job behind them might start now, or the planner needs
// every planned start (schedule): a job that cannot start now changes
// nothing else.
func (s *sim) planHeld() {
	for _, r := range s.unheld {
		if t, end, a, ok := s.earliest(r, s.avail); ok {
			s.keep(holding{r: r, t: t, end: end, allocs: a})
		}
	}
	s.unheld = s.unheld[:0]
}

// keep adds h to the pass's holdings and takes its span from the node
// space.
func (s *sim) keep(h holding) {
	s.holds = append(s.holds, h)
	if !s.spaceDirty {
		s.space.take(h.t, h.end, h.allocs)
	}
}
