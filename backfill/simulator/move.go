package simulator

import (
	"math"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// moveToFaster is Config.MoveToFaster, once after each scheduling pass:
// each running d2 elastic job without extra jobs whose base allocation
// includes GPUs slower than another of its types moves, at its base GPU
// count, onto idle GPUs of faster types (not lent to extra jobs: the
// daemon moves a job onto idle nodes only), on no node the queue head's
// reservation needs, when no queued
// job may use those types and planner.MoveToFaster finds the move ends it
// sooner (among the longest running jobs). A move frees the old base allocation, takes the new one, counts
// one rescale and costs the job Config.MoveCost seconds of progress (the
// daemon's requeue: Slurm's requeue delay, the restart from its
// checkpoint).
func (s *sim) moveToFaster() {
	if !s.cfg.MoveToFaster || !s.objective() {
		return
	}
	cost := s.cfg.MoveCost
	if cost == 0 {
		cost = planner.DefaultMoveCost
	}
	for _, r := range slices.Clone(s.running) {
		if !r.d2 || r.rigid || len(r.base) == 0 || len(r.extras) > 0 {
			continue
		}
		faster := s.fasterTypes(r)
		if len(faster) == 0 {
			continue
		}
		avail := make([]int, len(s.nodes))
		for n := range s.nodes {
			if !s.resv.nodes[n] {
				avail[n] = s.nodes[n].free
			}
		}
		a := s.cluster.Fit(avail, baseGPUs(r), planner.FitRule{Types: faster})
		if a == nil || s.queueWants(a) {
			continue
		}
		s.advance(r)
		q := planner.MoveRequest{Model: r.model, Work: r.rem, Now: s.speedCounts(r, false), To: s.speedsOn(r, a), Cost: cost}
		for _, o := range s.running {
			if o != r {
				q.Longest = max(q.Longest, s.timeLeft(o))
			}
		}
		if !planner.MoveToFaster(q) {
			continue
		}
		s.move(r, a, cost)
	}
}

// fasterTypes is r's types (its rule's, or every type) on which it runs
// faster than on the slowest GPU of its base allocation, fastest first.
func (s *sim) fasterTypes(r *run) []string {
	slowest := math.Inf(1)
	for _, a := range r.base {
		slowest = min(slowest, s.speedOn(r, a.Node))
	}
	var faster []string
	for _, t := range s.typesBySpeed(r) {
		if s.typeSpeed(r, t) > slowest && (len(r.rule.Types) == 0 || slices.Contains(r.rule.Types, t)) {
			faster = append(faster, t)
		}
	}
	return faster
}

// queueWants reports whether a queued job may start on a GPU type of a.
func (s *sim) queueWants(a []alloc) bool {
	types := map[string]bool{}
	for _, al := range a {
		types[s.nodes[al.Node].typ] = true
	}
	for _, q := range s.queue {
		if !q.started && s.ruleOf(q).UsesAny(types) {
			return true
		}
	}
	return false
}

// move gives r the base allocation a (idle GPUs) instead of its own and
// charges it cost seconds.
func (s *sim) move(r *run, a []alloc, cost float64) {
	for _, b := range r.base {
		s.nodes[b.Node].free += b.GPUs
		s.allocated -= b.GPUs
	}
	for _, b := range a {
		nd := &s.nodes[b.Node]
		nd.free -= b.GPUs
		s.allocated += b.GPUs
	}
	r.base, r.snapBase = a, nil
	s.donorsFresh = false
	r.limit = s.baseLimit(r, a) + int64(math.Ceil(cost))
	r.rescales++
	s.res.Moves++
	r.rate = s.rateOf(r, true)
	r.rem += cost * r.rate
	r.version++
	end := s.now + int64(math.Ceil(max(r.rem, 0)/r.rate))
	s.push(event{t: min(end, r.limit), r: r, version: r.version})
}
