package simulator

import (
	"math"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// This file holds the simulator's side of the planner's one objective
// (issue 17, Config.Objective): every elastic decision is judged by its
// effect on the sum of the jobs' expected completion times, from each
// job's remaining work and its throughput on the GPUs it would hold
// (planner.Model).

// DefaultRescaleCost is the seconds of progress a job loses per change of
// its GPU count in the benchmarks (Config.RescaleCost): a grow on Slurm is an extra
// job submitted, scheduled and started (seconds on the lab, its launch
// through slurmstepd) plus the joining worker's start and admission at a
// step boundary (torch_rescale_fresh_s 3.3 s, join_ms below a millisecond
// for the native engine; BENCHMARKS.md); a shrink is a leave at a step
// boundary. 30 s is a conservative sum.
const DefaultRescaleCost = 30

// DefaultRoundInterval is the seconds between two planning rounds when
// nothing else happens, the daemon's default poll_interval (10 s).
const DefaultRoundInterval = 10

// objective reports whether the elastic policy's one objective decides
// (Config.Objective, not rigid).
func (s *sim) objective() bool { return s.cfg.Objective && s.cfg.Policy != Rigid }

// timeLeft is r's expected remaining run time on its own allocation, in
// seconds: extra jobs are lent for a while, so they are not counted on.
func (s *sim) timeLeft(r *run) float64 { return max(r.rem, 0) / s.rateOf(r, false) }

// horizon sets, at the start of a pass, the longest expected time left of
// any running job (horizonLeft) with its owner (horizonUser), and the
// longest of jobs of other users than that one (horizonOther), so that
// horizonFor answers planner.HorizonFor in constant time: shrinking a donor
// past a queued job's horizon would lengthen the schedule's longest job.
//
// With Config.DrainHorizon it also adds up the work of the running and
// queued jobs (planner.Drain): a running job's GPUs at its request times
// its remaining run time on reference GPUs, as queuedWork counts a
// queued job's.
func (s *sim) horizon() {
	s.horizonLeft, s.horizonUser, s.horizonOther = horizonTops(len(s.running), func(i int) (string, float64) {
		return s.running[i].j.User, s.timeLeft(s.running[i])
	})
	if !s.cfg.DrainHorizon {
		return
	}
	s.drain.Reset()
	s.drain.Capacity = s.capacity()
	for _, r := range s.running {
		s.drain.Add(r.j.User, s.queuedWork(r))
	}
	for _, r := range s.queue {
		s.drain.Add(r.j.User, s.queuedWork(r))
	}
}

// horizonTops is, over n jobs (at: job i's owner, "" unknown, and time
// left), the longest time left, its owner, and the longest time left of a
// job whose owner is another or unknown.
func horizonTops(n int, at func(i int) (user string, left float64)) (top float64, topUser string, other float64) {
	for i := range n {
		user, left := at(i)
		switch {
		case left > top:
			if user != topUser || topUser == "" {
				other = top
			}
			top, topUser = left, user
		case user != topUser || user == "":
			other = max(other, left)
		}
	}
	return top, topUser, other
}

// horizonFor is the horizon of a queued job r (planner.HorizonFor): the
// longest time left of a running job, those of r's user left out.
func (s *sim) horizonFor(r *run) float64 {
	h := s.horizonLeft
	if r.j.User != "" && r.j.User == s.horizonUser {
		h = s.horizonOther
	}
	if s.cfg.DrainHorizon {
		h = max(h, s.drain.Bound(r.j.User))
	}
	return h
}

// donorLoss returns d's Loss and Delay as a donor (planner.Donor): how
// much later it ends when it gives up g GPUs of its own allocation for the
// queued job's run time, s.borrow seconds, and gets them back after
// (planner.BorrowLoss, the restarts included), and how much later if it
// never gets them back (planner.ShrinkLoss, which the horizon bounds under
// Config.AdmitHorizon "kept" and for the donors planner.Pools.Kept names
// under "contested"; the loss bounds it otherwise). Its
// GPUs are counted without those lent to it, and the GPUs given are taken
// as its fastest, the worst case: the admission picks them by node, and
// giving up its slowest could even look like a gain (its all-reduce waits
// for the slowest GPU). raisedEnd is its planner.Donor.RaisedEnd: how long
// from now its time limit ends once it has given g GPUs (shrinkBase moves
// the limit to its remaining work at the smaller size), taken as its
// fastest again, so never before the limit it gets.
func (s *sim) donorLoss(d *run) (loss, delay, raisedEnd func(g int) float64) {
	now := s.speedCounts(d, false)
	slices.SortFunc(now, func(a, b planner.SpeedCount) int {
		switch {
		case a.Speed > b.Speed:
			return -1
		case a.Speed < b.Speed:
			return 1
		}
		return 0
	})
	memos := map[int][]planner.SpeedCount{}
	afterOf := func(g int) []planner.SpeedCount {
		if a, ok := memos[g]; ok {
			return a
		}
		after, left := slices.Clone(now), g
		for i := range after {
			take := min(left, after[i].N)
			after[i].N -= take
			left -= take
		}
		memos[g] = after
		return after
	}
	delays := map[int]float64{}
	delay = func(g int) float64 {
		if v, ok := delays[g]; ok {
			return v
		}
		v := planner.ShrinkLoss(d.model, now, afterOf(g), max(d.rem, 0), s.rescaleCost())
		delays[g] = v
		return v
	}
	loss = func(g int) float64 {
		return planner.BorrowLoss(d.model, now, afterOf(g), max(d.rem, 0), s.borrow, s.rescaleCost())
	}
	raisedEnd = func(g int) float64 {
		if g == 0 {
			return float64(d.limit - s.now)
		}
		return max(float64(d.limit-s.now), math.Ceil(planner.RunTime(d.model, afterOf(g), max(d.rem, 0))))
	}
	return loss, delay, raisedEnd
}

func (s *sim) roundInterval() int64 {
	if s.cfg.RoundInterval > 0 {
		return s.cfg.RoundInterval
	}
	return DefaultRoundInterval
}

func (s *sim) rescaleCost() float64 { return s.cfg.RescaleCost }

// keepOffPinned sets, at the start of a pass, each queued job's off
// types (Config.KeepOffPinned): the GPU types that pinned jobs (jobs
// naming one type) queued ahead of it need, which planner.KeepOff keeps it
// off while its other types can hold it (by the cluster's capacity of
// each type) and serve it at least planner.DefaultNearlyAsWell as fast,
// until its run time at its request has passed since it was first kept
// off (planner.KeepOffExpired). A job is kept off in one spell at most:
// once no pinned job ahead needs the types, or the bound passes, it is
// never kept off again while it waits. The daemon applies the same rule as an ExcNodeList=
// update of the pending job, so the job waits for the other types rather
// than start on the pinned ones (ruleOf).
func (s *sim) keepOffPinned(avail []int) {
	var ahead []string // the types of the pinned jobs queued ahead
	// by type, the earliest start of the first pinned job queued ahead for
	// it, seconds from now (the daemon takes the earliest planned start of
	// them all; a smaller pinned job queued later may fit sooner)
	pinStart := map[string]float64{}
	for _, r := range s.queue {
		inSpell := len(r.off) > 0
		r.off = nil
		pinned := ahead
		if len(r.rule.Types) == 1 && !slices.Contains(ahead, r.rule.Types[0]) {
			ahead = append(ahead, r.rule.Types[0])
			if t, a := s.earliestFit(r, avail, r.rule); a != nil {
				pinStart[r.rule.Types[0]] = float64(t - s.now)
			}
		}
		if len(r.rule.Types) == 1 || r.offSince >= 0 && !inSpell { // pinned itself, or its one spell is over
			continue
		}
		var off []string
		if len(pinned) > 0 {
			q := planner.KeepOffRequest{Need: r.j.GPUs, OneType: r.rule.OneType, Pinned: pinned, PinnedStart: pinStart, Run: map[string]float64{}}
			for _, t := range s.cluster.Types() {
				if len(r.rule.Types) == 0 || slices.Contains(r.rule.Types, t) {
					q.Types = append(q.Types, planner.TypeOffer{Type: t, Capacity: s.cluster.TypeTotal(t), Speed: s.typeSpeed(r, t)})
					q.Run[t] = planner.RunTime(r.model, []planner.SpeedCount{{Speed: s.typeSpeed(r, t), N: s.fewestAtStart(r)}}, r.rem)
				}
			}
			off = planner.KeepOff(q)
		}
		if len(off) == 0 {
			continue // a spell ends here for good (offSince stays)
		}
		if r.offSince < 0 {
			r.offSince = s.now
		}
		run := planner.RunTime(r.model, []planner.SpeedCount{{Speed: s.bestSpeed(r), N: r.j.GPUs}}, r.rem)
		if !planner.KeepOffExpired(float64(s.now-r.offSince), run) {
			r.off = off
		}
	}
}

// fewestAtStart is the fewest GPUs queued job r may start on: its minimum
// when start-small may start it below its request (Config.StartSmall),
// else its request. keepOffPinned leaves r on a pinned type only when it
// would end there in time even started this small, the longest it could
// hold the type.
func (s *sim) fewestAtStart(r *run) int {
	if s.cfg.StartSmall != planner.StartSmallOff && r.min >= 1 && r.min < r.j.GPUs {
		return r.min
	}
	return r.j.GPUs
}

// startSmallAny starts a waiting elastic job r now on fewer GPUs than it
// asked for (never below its minimum) when that ends it earlier than
// waiting (planner.StartSmall under Config.StartSmall; with ends-earlier, the horizon too): its
// run time at the smaller size is below its wait (at least
// x − now, the queue head's reserved start x) plus its run time at its
// request. Of the sizes and GPU types that fit, it takes the one with the
// shortest run time (a few fast GPUs can beat more GPUs that include slow
// ones, whose all-reduce the slowest sets). Only GPUs that do not delay
// the reservation are used: a job other than the head ends before x at the
// smaller size, or fits in ravail (the GPUs the reservation does not
// need). Nor may it end later than the running job that ends last (or, when
// that is sooner, than its run time at its request): a job started small
// that ends after every other would decide the makespan. It reports whether
// r started.
func (s *sim) startSmallAny(r *run, avail []int, x int64, head bool) bool {
	if r.min >= r.j.GPUs || s.availTotal < r.min {
		return false
	}
	atRequest := []planner.SpeedCount{{Speed: s.bestSpeed(r), N: r.j.GPUs}}
	var best []alloc
	bestRun := math.Inf(1)
	// It must beat waiting, and must not become the longest job: a small
	// start that ends after every running job would decide the makespan
	// (planner.StartSmall, ends-earlier with the horizon).
	peer := s.peerMedianFor(r)
	try := func(a []alloc) {
		if a == nil {
			return
		}
		small := s.speedsOn(r, a)
		// As the daemon (planner.StartSmallOnNodes), decide on the time
		// the job may hold the GPUs, its proportional run time, not on its
		// model: a linear model (no synchronisation, a logical worker count
		// divisible by both sizes).
		m := 0
		for _, al := range a {
			m += al.GPUs
		}
		linear := planner.Model{LogicalWorkers: r.j.GPUs * m, RefGPUs: r.model.RefGPUs, Gamma: 1}
		run := planner.RunTime(r.model, small, r.rem)
		if !(run < bestRun-1e-9) {
			return // a start that ends sooner was found already
		}
		q := planner.StartSmallRequest{Rule: s.cfg.StartSmall, Model: linear, Work: r.rem,
			Now: s.now, ReservedStart: x, AtRequest: atRequest, Small: small, Horizon: s.horizonFor(r), PeerMedian: peer}
		if s.cfg.WeighCriticalDelay && s.cfg.StartSmall == planner.StartSmallEndsEarlier {
			// The queued jobs that end after every running job must lose
			// less than this job saves, over the time it may hold the GPUs.
			q.Delay = s.criticalDelay(r, a, avail, s.now+int64(math.Ceil(planner.RunTime(linear, small, r.rem))))
			if !head {
				q.Wait = s.gain
			}
		}
		if _, ok := planner.StartSmall(q); !ok {
			return
		}
		best, bestRun = a, run
	}
	own := s.ruleOf(r)
	rules := []planner.FitRule{own}
	if !own.OneType || len(own.Types) != 1 {
		for _, typ := range s.cluster.Types() {
			if len(own.Types) == 0 || slices.Contains(own.Types, typ) {
				rules = append(rules, planner.FitRule{Types: []string{typ}, OneType: true})
			}
		}
	}
	for m := min(r.j.GPUs-1, s.availTotal); m >= r.min; m-- {
		for _, rule := range rules {
			a := s.slurmFit(avail, m, rule)
			if a == nil {
				continue
			}
			if !head {
				// Behind the head it may take only GPUs no job held
				// before it needs while it runs.
				w, _ := s.nodeSpaceNow(avail).window(0, s.endOn(r, a, s.now), s.win)
				s.win = w
				a = s.slurmFit(w, m, rule)
			}
			try(a)
		}
	}
	if best == nil {
		return false
	}
	s.res.SmallStarts++
	s.start(r, best, avail)
	return true
}

// peerMedianFor is queued job r's peer median (planner.Peers.MedianFor
// its user): over the jobs running (by their time limits) and queued
// (their run time at their request on their fastest type, spansOf) now,
// but the queued jobs of r's user, r among them, as the daemon counts
// them (peerMedianFor there). The jobs are read once until a job starts or
// the pass ends.
func (s *sim) peerMedianFor(r *run) float64 {
	if s.peerPass != s.passes {
		jobs := s.peerScratch[:0]
		for _, o := range s.running {
			jobs = append(jobs, planner.PeerJob{User: o.j.User, Left: float64(max(o.limit-s.now, 0))})
		}
		for _, q := range s.queue {
			if !q.started {
				jobs = append(jobs, planner.PeerJob{User: q.j.User, Left: float64(s.spansOf(q)[0]), Pending: true})
			}
		}
		s.peerScratch = jobs
		s.peerPass, s.peers = s.passes, planner.NewPeers(jobs)
	}
	return s.peers.MedianFor(r.j.User)
}

// bestSpeed is r's speed on the fastest type it may run on.
func (s *sim) bestSpeed(r *run) float64 {
	best := 0.0
	for i, nd := range s.nodes {
		if len(r.rule.Types) == 0 || slices.Contains(r.rule.Types, nd.typ) {
			best = max(best, s.speedOn(r, i))
		}
	}
	return best
}

// limitAt is the longest time limit r could get started now at m GPUs
// (seconds): its remaining work at m GPUs of the slowest type it may run
// on (ruleOf). Where r lands is decided after the planner checks which
// reserved nodes r may take (planner.TakesReserved), so the bound must hold
// on any of them.
func (s *sim) limitAt(r *run, m int) float64 {
	types := s.ruleOf(r).Types
	slow := math.Inf(1)
	for i, nd := range s.nodes {
		if len(types) == 0 || slices.Contains(types, nd.typ) {
			slow = min(slow, s.speedOn(r, i))
		}
	}
	if math.IsInf(slow, 1) {
		return 0
	}
	return math.Ceil(planner.RunTime(r.model, []planner.SpeedCount{{Speed: slow, N: m}}, r.rem))
}

// admitAtSomeSize is shrink-to-admit under the objective: the queued job
// r starts now at its request, or else at a smaller size (halving, never
// below its minimum: a queued job's first GPUs remove its whole wait),
// whichever the donors can make room for with less loss than r gains. Its
// gain at m GPUs is its wait (s.gain) less what running on m instead of
// its request costs it.
func (s *sim) admitAtSomeSize(r *run, q planner.AdmitRequest) (planner.Admission, bool) {
	q.Horizon = s.horizonFor(r)
	sp := s.bestSpeed(r)
	full := planner.RunTime(r.model, []planner.SpeedCount{{Speed: sp, N: r.j.GPUs}}, r.rem)
	peer := s.peerMedianFor(r)
	for m := r.j.GPUs; m >= max(r.min, 1); m /= 2 {
		if m < r.j.GPUs && (s.cfg.StartSmall == planner.StartSmallOff || !s.cfg.AdmitBelowRequest) {
			break
		}
		q.Want = m
		if q.Reserved != nil {
			q.Limit = s.limitAt(r, m)
		}
		run := planner.RunTime(r.model, []planner.SpeedCount{{Speed: sp, N: m}}, r.rem)
		if !planner.WithinPeerBound(run, peer) {
			break // a smaller size runs longer still
		}
		q.Gain = s.gain - (run - full)
		s.borrow = run // how long the donors' GPUs serve it
		if q.Gain <= 0 {
			break
		}
		if adm, ok := s.cluster.Admit(q); ok {
			return adm, true
		}
		if m > r.min && m/2 < r.min {
			m = 2 * r.min // try the minimum itself last
		}
	}
	return planner.Admission{}, false
}

// queuedWork is r's remaining work in reference GPU-seconds: its request
// times its run time at that size on reference GPUs.
func (s *sim) queuedWork(r *run) float64 { return float64(r.j.GPUs) * max(r.rem, 0) }

// capacity is the cluster's GPUs weighted by their speed: reference
// GPU-seconds per second.
func (s *sim) capacity() float64 {
	if s.speedSum == 0 {
		for _, nd := range s.nodes {
			s.speedSum += float64(nd.total) * nd.speed
		}
	}
	return s.speedSum
}

// criticalDelay is planner.Cluster.CriticalDelay for starting r now on a
// until end: the first planner.CriticalDelayJobs queued jobs other than r
// that planner.CriticalJob.MayBeDelayed keeps, each with its run time at its request on its
// fastest type, the GPUs free now (avail) and the running jobs' base
// allocations freed at their time limits.
func (s *sim) criticalDelay(r *run, a []alloc, avail []int, end int64) float64 {
	in := planner.CriticalDelayInput{Now: s.now, Horizon: s.horizonFor(r), Hold: a, Until: end}
	types := map[string]bool{}
	for _, al := range a {
		types[s.nodes[al.Node].typ] = true
	}
	for _, q := range s.queue {
		rule := s.ruleOf(q)
		if q == r || q.started || !rule.UsesAny(types) {
			continue
		}
		run := planner.RunTime(q.model, []planner.SpeedCount{{Speed: s.bestSpeed(q), N: q.j.GPUs}}, q.rem)
		cj := planner.CriticalJob{GPUs: q.j.GPUs, Rule: rule, Run: run}
		if !cj.MayBeDelayed(types, float64(end-s.now), in.Horizon) {
			continue
		}
		in.Queued = append(in.Queued, cj)
		if len(in.Queued) == planner.CriticalDelayJobs {
			break
		}
	}
	if len(in.Queued) == 0 {
		return 0
	}
	in.Avail = slices.Clone(avail)
	for _, d := range s.running {
		in.Releases = append(in.Releases, planner.Release{At: d.limit, Alloc: d.base})
	}
	return s.cluster.CriticalDelay(in)
}
