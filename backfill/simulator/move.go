package simulator

import (
	"math"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// moveToFaster is Config.MoveToFaster, once after each scheduling pass:
// each running d2 elastic job whose base allocation
// includes GPUs slower than another of its types moves, at its base GPU
// count, onto GPUs of faster types that are idle or lent to other jobs'
// extra jobs (the daemon requeues it excluding the slower nodes, and Slurm
// preempts the extra jobs there when the idle GPUs do not hold it), on no
// node the queue head's reservation needs, when no queued
// job may use those types and planner.MoveToFaster finds the move ends it
// sooner (a long job: planner.MoveAmongLongest), weighed against the pace it
// keeps now, its extra jobs included, and at the GPUs it holds with them
// (at most its maximum) when the faster types hold that many (it restarts
// on its base count and later passes grow it onto the rest, as the daemon's
// cycles do; E55). A move ends the job's extra jobs
// (the daemon cancels them once it requeued the job), frees the old base
// allocation, takes the new one, counts one rescale and costs the job
// Config.MoveCost seconds of progress (the daemon's requeue: Slurm's
// requeue delay, the restart from its checkpoint). A job that grew onto
// extra jobs was skipped until BENCHMARKS.md E54: a long d2 job on T4s
// that had grown by an extra job or two kept their pace to the end with
// every V100 idle. With Config.MoveOneTypeAfresh a d1 job that names no
// type moves too, onto one faster type, and starts over there (E59).
func (s *sim) moveToFaster() {
	if !s.cfg.MoveToFaster || !s.objective() {
		return
	}
	cost := s.cfg.MoveCost
	if cost == 0 {
		cost = planner.DefaultMoveCost
	}
	// Worked out once per pass, and again after a move: what a candidate
	// may move onto, which types the queue may use, and the longest time
	// left of a running job (with the runner-up, for the job that has it).
	var avail []int
	var wanted *queuedTypes
	var top *run
	longest, second := 0.0, 0.0
	for _, r := range slices.Clone(s.running) {
		afresh := !r.d2 && s.cfg.MoveOneTypeAfresh && len(r.rule.Types) == 0
		if (!r.d2 && !afresh) || r.rigid || len(r.base) == 0 {
			continue
		}
		faster := s.fasterTypes(r)
		if len(faster) == 0 {
			continue
		}
		if avail == nil {
			avail = make([]int, len(s.nodes))
			for n := range s.nodes {
				if !s.resv.nodes[n] {
					avail[n] = s.nodes[n].free + s.lentOn(n)
				}
			}
		}
		a := s.cluster.Fit(avail, baseGPUs(r), planner.FitRule{Types: faster, OneType: afresh})
		if a == nil {
			continue
		}
		if wanted == nil {
			wanted = s.queueTypes()
		}
		if wanted.wants(s, a) {
			continue
		}
		// Weighed at the GPUs it holds, its extra jobs' included (at most
		// its maximum), when the faster types hold that many and no queued
		// job may use them (the daemon's target leaves out every node a
		// pending job may start on): it restarts on its base count there
		// and grows onto the rest (BENCHMARKS.md E55).
		to := a
		if held := min(baseGPUs(r)+extraGPUs(r), r.max); held > baseGPUs(r) && !afresh {
			if w := s.cluster.Fit(avail, held, planner.FitRule{Types: faster}); w != nil && !wanted.wants(s, w) {
				to = w
			}
		}
		if top == nil {
			top, longest, second = nil, 0, 0
			for _, o := range s.running {
				switch l := s.timeLeft(o); {
				case top == nil || l > longest:
					top, longest, second = o, l, longest
				case l > second:
					second = l
				}
			}
		}
		s.advance(r)
		q := planner.MoveRequest{Model: r.model, Work: r.rem, Now: planner.Pace(r.model, s.speedCounts(r, false), s.speedCounts(r, true)), To: s.speedsOn(r, to), Cost: cost, Longest: longest}
		if r == top {
			q.Longest = second
		}
		if afresh {
			q.Redo = float64(r.j.Duration) - r.rem
		}
		if !planner.MoveToFaster(q) {
			continue
		}
		if afresh { // it starts over on the one type it moves to
			r.rem, r.gpuTypes = float64(r.j.Duration), []string{s.nodes[a[0].Node].typ}
		}
		for len(r.extras) > 0 {
			s.endExtra(r.extras[0])
		}
		s.preemptFor(a)
		s.move(r, a, cost)
		avail, top = nil, nil
	}
}

// queuedTypes is what the queued jobs may start on: every type (all), or
// the types they name.
type queuedTypes struct {
	all   bool
	types map[string]bool
}

// queueTypes is the types the queued jobs not yet started may use.
func (s *sim) queueTypes() *queuedTypes {
	qt := &queuedTypes{types: map[string]bool{}}
	for _, q := range s.queue {
		if q.started {
			continue
		}
		rule := s.ruleOf(q)
		if len(rule.Types) == 0 {
			qt.all = true
			break
		}
		for _, t := range rule.Types {
			qt.types[t] = true
		}
	}
	return qt
}

// wants reports whether a queued job may start on a GPU type of a.
func (qt *queuedTypes) wants(s *sim, a []alloc) bool {
	if len(a) > 0 && qt.all {
		return true
	}
	for _, al := range a {
		if qt.types[s.nodes[al.Node].typ] {
			return true
		}
	}
	return false
}

// lentOn is the GPUs of extra jobs on node n: the moved job's Slurm
// preempts them (their partition is preemptible) when the faster nodes
// hold it no other way.
func (s *sim) lentOn(n int) int {
	g := 0
	for _, x := range s.nodes[n].extras {
		g += x.gpus
	}
	return g
}

// preemptFor ends extra jobs on the nodes of a, first listed first, until
// each node has a's GPUs free.
func (s *sim) preemptFor(a []alloc) {
	for _, al := range a {
		nd := &s.nodes[al.Node]
		for nd.free < al.GPUs && len(nd.extras) > 0 {
			s.endExtra(nd.extras[0])
		}
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
	// A requeued job starts again (Slurm's StartTime): the daemon's
	// allowance then reads its run from the restart (planner.StartRun), so
	// the one it had at its first start on slower GPUs no longer counts.
	r.startRun, r.runFrom = float64(r.limit-s.now), s.now
	r.rescales++
	s.res.Moves++
	r.rate = s.rateOf(r, true)
	r.rem += cost * r.rate
	r.version++
	end := s.now + int64(math.Ceil(max(r.rem, 0)/r.rate))
	s.push(event{t: min(end, r.limit), r: r, version: r.version})
}

// extraGPUs is the GPUs of r's extra jobs.
func extraGPUs(r *run) int {
	g := 0
	for _, x := range r.extras {
		g += x.gpus
	}
	return g
}
