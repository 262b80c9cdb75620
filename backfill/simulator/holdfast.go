package simulator

import (
	"cmp"
	"math"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// holdForFast is Config.HoldForFast for the queue head r, which Slurm
// would start now on allocation a: when r may mix GPU
// types and a includes GPUs slower than its fastest type, it asks
// planner.HoldForFaster whether waiting for faster types ends r sooner.
// The options are the prefixes of r's types by its speed (the fastest; the
// two fastest; ...) whose slowest type is faster than a's slowest, each with
// the earliest time r's request fits on them alone (earliestFit). It
// returns the allocation to start now (a, or one on the faster types that
// fits now) or nil to leave r pending; r.hold then holds the types it waits
// for, which its reservation uses (ruleOf).
func (s *sim) holdForFast(r *run, avail []int, a []alloc) []alloc {
	r.hold = nil
	if len(r.rule.Types) != 0 || r.rule.OneType {
		return a
	}
	types := s.typesBySpeed(r)
	if len(types) < 2 {
		return a
	}
	slowest := math.Inf(1)
	for _, al := range a {
		slowest = min(slowest, s.speedOn(r, al.Node))
	}
	q := planner.HoldRequest{Model: r.model, Work: r.rem, Any: planner.HoldOption{Speeds: s.speedsOn(r, a)}}
	var allocs [][]alloc
	for k := 1; k < len(types) && s.typeSpeed(r, types[k-1]) > slowest; k++ {
		at, alt := s.earliestFit(r, avail, planner.FitRule{Types: types[:k]})
		if alt == nil {
			continue
		}
		q.Options = append(q.Options, planner.HoldOption{Types: types[:k], Wait: float64(at - s.now), Speeds: s.speedsOn(r, alt)})
		allocs = append(allocs, alt)
	}
	o, ok := planner.HoldForFaster(q)
	if !ok {
		return a
	}
	if o.Wait == 0 {
		for i := range q.Options {
			if len(q.Options[i].Types) == len(o.Types) {
				return allocs[i]
			}
		}
	}
	r.hold = slices.Clone(o.Types)
	return nil
}

// ruleOf is where queued job r may start now: its own rule, or the
// faster types it is held for (holdForFast), or its own types less those
// it is kept off (keepOffPinned).
func (s *sim) ruleOf(r *run) planner.FitRule {
	if len(r.hold) > 0 {
		return planner.FitRule{Types: r.hold, OneType: r.rule.OneType}
	}
	if len(r.off) > 0 && !r.started {
		rule := planner.FitRule{OneType: r.rule.OneType}
		for _, t := range s.cluster.Types() {
			if (len(r.rule.Types) == 0 || slices.Contains(r.rule.Types, t)) && !slices.Contains(r.off, t) {
				rule.Types = append(rule.Types, t)
			}
		}
		return rule
	}
	return r.rule
}

// earliestFit is the earliest time r could start at its request under
// rule if every running job's base GPUs free at its time limit (the
// reservation's projection, from avail now), with the allocation then;
// nil when it never fits.
func (s *sim) earliestFit(r *run, avail []int, rule planner.FitRule) (int64, []alloc) {
	if a := s.cluster.Fit(avail, r.j.GPUs, rule); a != nil {
		return s.now, a
	}
	proj := slices.Clone(avail)
	runs := slices.Clone(s.running)
	slices.SortFunc(runs, func(a, b *run) int {
		if c := cmp.Compare(a.limit, b.limit); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	for i := 0; i < len(runs); {
		t := runs[i].limit
		for ; i < len(runs) && runs[i].limit == t; i++ {
			for _, al := range runs[i].base {
				proj[al.Node] += al.GPUs
			}
		}
		if a := s.cluster.Fit(proj, r.j.GPUs, rule); a != nil {
			return t, a
		}
	}
	return 0, nil
}

// typesBySpeed is the cluster's GPU types, fastest for r first.
func (s *sim) typesBySpeed(r *run) []string {
	types := slices.Clone(s.cluster.Types())
	slices.SortStableFunc(types, func(a, b string) int { return cmp.Compare(s.typeSpeed(r, b), s.typeSpeed(r, a)) })
	return types
}

// typeSpeed is r's speed on GPU type t: its own where it lists t, else the
// cluster's for t (that of the first node of the type).
func (s *sim) typeSpeed(r *run, t string) float64 {
	if v, ok := r.j.Speeds[t]; ok {
		return v
	}
	for i := range s.nodes {
		if s.nodes[i].typ == t {
			return s.nodes[i].speed
		}
	}
	return 0
}
