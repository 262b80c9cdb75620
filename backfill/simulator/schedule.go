package simulator

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// reservation is the queue head's planned start and nodes.
type reservation struct {
	r      *run
	t      int64
	allocs []alloc
	nodes  map[int]bool // the nodes of allocs
}

// schedule runs FIFO + backfill passes at s.now: one, and another after
// each queue head started small (the next job becomes the head).
func (s *sim) schedule() {
	for s.pass() {
	}
	if s.cfg.Policy != Rigid && (s.allocated < s.total || s.lent > 0) {
		s.planHeld() // the planner lends idle GPUs around every planned start
	}
}

// pass is one FIFO + backfill pass; it reports whether the queue head
// started small at its end (startSmall). The jobs that fit start in queue
// order; the first that does not (the head) is reserved its earliest start,
// and each job behind it, up to Config.BackfillDepth of them, starts now
// only where it delays no job tested before it, else is held its own
// earliest start (conservative backfill, as Slurm's backfill plans every
// job it tests: nodeSpace).
func (s *sim) pass() bool {
	s.resv = reservation{}
	s.plans = nil
	s.passes++
	s.holds, s.unheld = s.holds[:0], s.unheld[:0]
	s.spaceDirty = true
	s.donorsFresh = false
	if len(s.queue) == 0 {
		return false
	}
	avail := s.availNow()
	if s.cfg.Policy != Rigid {
		s.donorLeft = s.longestDonor()
		s.horizon()
	}
	if s.objective() && s.cfg.KeepOffPinned {
		s.keepOffPinned(avail)
	}
	i := 0
	for i < len(s.queue) {
		r := s.queue[i]
		allocs := s.fit(r, avail, i == 0)
		if allocs == nil && s.mayAdmit(r) {
			s.gain = 0
			if s.objective() {
				x, _ := s.reserve(r, avail)
				s.gain = float64(x - s.now)
			}
			reserved, jobReserved := s.othersOff(r, avail)
			allocs = s.shrinkToAdmit(r, avail, nil, nil, reserved, jobReserved)
		}
		if allocs == nil {
			break
		}
		s.start(r, allocs, avail)
		i++
	}
	s.queue = s.queue[i:]
	if len(s.queue) == 0 {
		return false
	}
	head := s.queue[0]
	x, resAllocs := s.reserve(head, avail)
	if head.planned == 0 || x < head.planned {
		head.planned = x
	}
	s.resv = reservation{r: head, t: x, allocs: resAllocs, nodes: map[int]bool{}}
	for _, a := range resAllocs {
		s.resv.nodes[a.Node] = true
	}
	if resAllocs != nil {
		s.holds = append(s.holds, holding{r: head, t: x, end: s.endOn(head, resAllocs, x), allocs: resAllocs})
	}
	ahead := s.queuedWork(head) // reference GPU-seconds queued ahead of the job considered
	kept := s.queue[:1]
	for k, r := range s.queue[1:] {
		if k >= s.cfg.BackfillDepth {
			kept = append(kept, s.queue[1+k:]...)
			break
		}
		if s.availTotal == 0 && s.donorLeft == 0 {
			// Nothing can start now, but Slurm still plans the job (the
			// planner's growth keeps lends off its planned start).
			s.unheld = append(s.unheld, r)
			kept = append(kept, r)
			continue
		}
		// A job behind the head waits at least until the head's reserved
		// start, and about as long as the cluster takes to run the work
		// queued ahead of it.
		s.gain = max(float64(x-s.now), ahead/s.capacity())
		if s.backfill(r, avail, kept, x) {
			continue
		}
		ahead += s.queuedWork(r)
		kept = append(kept, r)
	}
	s.plans = nil
	s.queue = kept
	if s.objective() && s.cfg.StartSmall != planner.StartSmallOff {
		if s.startSmallAny(head, avail, x, true) {
			s.queue = s.queue[1:]
			return true
		}
		return false
	}
	if s.startSmall(head, avail, x, resAllocs) {
		s.queue = s.queue[1:]
		return true
	}
	return false
}

// startSmall starts the queue head now on fewer GPUs than it asked for,
// as planner.StartSmall decides under Config.StartSmall, with GPUs left
// after the backfill pass (the most that fit, at least its minimum). It
// reports whether it did; the caller takes it off the queue.
func (s *sim) startSmall(head *run, avail []int, x int64, resAllocs []alloc) bool {
	if s.cfg.StartSmall == planner.StartSmallOff || s.cfg.Policy == Rigid {
		return false
	}
	most, ok := planner.StartSmallSize(head.j.GPUs, head.min, s.availTotal) // in GPUs
	if !ok {
		return false
	}
	var small []alloc
	for m := most; m >= head.min && small == nil; m-- {
		small = s.slurmFit(avail, m, s.ruleOf(head))
	}
	if small == nil {
		return false
	}
	q := planner.StartSmallRequest{Rule: s.cfg.StartSmall, Model: head.model, Work: head.rem, Now: s.now, ReservedStart: x,
		AtRequest: s.speedsOn(head, resAllocs), Small: s.speedsOn(head, small)}
	if _, ok := planner.StartSmall(q); !ok {
		return false
	}
	s.res.SmallStarts++
	s.start(head, small, avail)
	return true
}

// speedsOn groups allocs by r's speed on them (see speedCounts).
func (s *sim) speedsOn(r *run, allocs []alloc) []planner.SpeedCount {
	saved := r.base
	r.base = allocs
	sc := s.speedCounts(r, false)
	r.base = saved
	return sc
}

// availNow is each node's GPUs a starting job may take: free ones and those
// of preemptable extra jobs.
func (s *sim) availNow() []int {
	if cap(s.avail) < len(s.nodes) {
		s.avail = make([]int, len(s.nodes))
	}
	a := s.avail[:len(s.nodes)]
	s.availTotal = 0
	for n := range s.nodes {
		a[n] = s.nodes[n].free
		for _, x := range s.nodes[n].extras {
			a[n] += x.gpus
		}
		s.availTotal += a[n]
	}
	return a
}

// fit returns an allocation of r's requested GPUs from avail (the
// planner's model of Slurm's node selection, planner.Cluster.Fit), or nil.
// head marks the queue head as the pass begins: Config.HoldForFast
// applies to it alone.
func (s *sim) fit(r *run, avail []int, head bool) []alloc {
	if s.availTotal < r.j.GPUs {
		return nil
	}
	a := s.slurmFit(avail, r.j.GPUs, s.ruleOf(r))
	if a != nil && head && s.objective() && s.cfg.HoldForFast && r.d2 && !r.rigid {
		a = s.holdForFast(r, avail, a)
	}
	return a
}

// slurmFit is where Slurm starts a job of n GPUs under rule from avail
// (free GPUs and those of preemptible extra jobs, per node): on free GPUs
// alone when they hold it, preempting extra jobs only when they do not,
// and then as few as it takes. select/cons_tres tries a job without
// preemption first and, when that fails, removes preemptible jobs one at
// a time until the job fits (_run_now in
// src/plugins/select/cons_tres/job_test.c), so a job that fits on idle
// slower GPUs starts there rather than on faster GPUs lent to an elastic
// job, and one that needs a lend uses the idle GPUs too. Here the extra
// jobs are removed node by node in node order. Nil when avail cannot hold
// it.
func (s *sim) slurmFit(avail []int, n int, rule planner.FitRule) []alloc {
	if s.lent == 0 {
		return s.cluster.Fit(avail, n, rule)
	}
	view := s.freeView[:0]
	for i := range avail {
		view = append(view, min(avail[i], s.nodes[i].free))
	}
	s.freeView = view
	if a := s.cluster.Fit(view, n, rule); a != nil {
		return a
	}
	for i := range avail {
		if view[i] == avail[i] {
			continue // nothing lent there, or nothing more a starting job may take
		}
		for _, x := range s.nodes[i].extras {
			view[i] = min(avail[i], view[i]+x.gpus)
			if a := s.cluster.Fit(view, n, rule); a != nil {
				return a
			}
		}
	}
	return nil
}

// baseLimit is the time limit end of r started now on allocs: its
// remaining work at that size (planner.RunTime).
func (s *sim) baseLimit(r *run, allocs []alloc) int64 {
	sc := s.speedsOn(r, allocs)
	return s.now + int64(math.Ceil(planner.RunTime(r.model, sc, r.rem)))
}

// reserve returns the head's reserved start and the allocation planned for
// it then.
func (s *sim) reserve(head *run, avail []int) (int64, []alloc) {
	return s.reserveAmong(s.byLimit(), head, avail)
}

// byLimit is s.running sorted by time limit end (then index): the order in
// which reserve frees their GPUs.
func (s *sim) byLimit() []*run {
	runs := slices.Clone(s.running)
	slices.SortFunc(runs, func(a, b *run) int {
		if c := cmp.Compare(a.limit, b.limit); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	return runs
}

// reserveAmong is reserve with the running jobs already in byLimit's order.
func (s *sim) reserveAmong(runs []*run, head *run, avail []int) (int64, []alloc) {
	proj := slices.Clone(avail)
	total := s.availTotal
	need := head.j.GPUs
	t := s.now
	var allocs []alloc
	for i := 0; i < len(runs) && allocs == nil; {
		t = runs[i].limit
		for ; i < len(runs) && runs[i].limit == t; i++ {
			for _, a := range runs[i].base {
				proj[a.Node] += a.GPUs
				total += a.GPUs
			}
		}
		if total >= need {
			allocs = s.cluster.Fit(proj, need, s.ruleOf(head))
		}
	}
	return t, allocs
}

// othersOff returns, for every node the planned start of another queued
// job names, the earliest such start (simulated seconds): reserved, for
// the donors (one there gives only what leaves its raised time limit
// ending by then, planner.DonorGives), and jobReserved for r itself (it
// goes onto such a node only if it ends by then, planner.TakesReserved),
// which leaves the queue head out once the pass made its reservation: the
// backfill pass keeps r off the GPUs the head needs by count (ravail),
// finer than by node. The plans are made when a shrink-to-admit first
// needs them in a pass (s.plans): the first BackfillDepth + 1 queued jobs,
// as Slurm's backfill plans at most bf_max_job_test jobs; the head's is
// its reservation (s.resv) once the pass made it, the others planned as
// reserve plans the head, at their request, on avail, independently. A job
// that starts in the pass is dropped. Every other job's start is kept,
// ranked ahead of r or behind it, from the donors' raised limits and from
// r (a job ranked below r was planned with r waiting). The daemon applies
// the same rule (daemon.admitCandidates).
func (s *sim) othersOff(r *run, avail []int) (reserved, jobReserved map[int]int64) {
	if s.plans == nil {
		s.plans = planner.NewReservations[*run, int]()
		runs := s.byLimit()
		for i, q := range s.queue[:min(len(s.queue), s.cfg.BackfillDepth+1)] {
			if q.started {
				continue
			}
			at, allocs := s.resv.t, s.resv.allocs
			if i > 0 || s.resv.r != q {
				at, allocs = s.reserveAmong(runs, q, avail)
			}
			nodes := make([]int, len(allocs))
			for k, a := range allocs {
				nodes[k] = a.Node
			}
			s.plans.Add(q, at, nodes)
		}
	}
	reserved = s.plans.Others(r)
	return reserved, reserved
}

// backfill starts r, queued behind the head and the jobs ahead (those of
// the pass not started), now if it fits where it delays no job held before
// it (nodeSpace); elastic policies may also free such GPUs by shrinking
// longer jobs (shrinkToAdmit, kept off the nodes the planned starts of the
// other queued jobs name, othersOff) or start it small. Otherwise r is
// held its earliest start, and it reports false. x is the head's reserved
// start.
func (s *sim) backfill(r *run, avail []int, ahead []*run, x int64) bool {
	if !s.mayStartNow(r) {
		s.unheld = append(s.unheld, r)
		return false
	}
	s.planHeld()
	t, end, a, ok := s.earliest(r, avail)
	if ok && t == s.now {
		s.start(r, a, avail)
		return true
	}
	if s.mayAdmit(r) {
		from, _ := s.nodeSpaceNow(avail).window(0, s.now+int64(s.limitAt(r, r.j.GPUs)), nil)
		reserved, jobReserved := s.othersOff(r, avail)
		if b := s.shrinkToAdmit(r, from, avail, ahead, reserved, jobReserved); b != nil {
			s.start(r, b, avail)
			return true
		}
	}
	if s.objective() && s.cfg.StartSmall != planner.StartSmallOff {
		wait := x
		if ok {
			wait = t
		}
		if s.startSmallAny(r, avail, wait, false) {
			return true
		}
	}
	if ok {
		s.keep(holding{r: r, t: t, end: end, allocs: a})
	}
	return false
}

// mayStartNow is a cheap pre-check for backfill: r fits in the GPUs free
// now, or an elastic policy may admit it or start it small.
func (s *sim) mayStartNow(r *run) bool {
	if s.availTotal >= r.j.GPUs || s.mayAdmit(r) {
		return true
	}
	return s.objective() && s.cfg.StartSmall != planner.StartSmallOff && r.min < r.j.GPUs && s.availTotal >= r.min
}

// mayAdmit is a cheap pre-check for shrinkToAdmit: the policy is elastic
// and some running job that could shrink has more work left than r.
func (s *sim) mayAdmit(r *run) bool {
	if s.objective() {
		return s.cfg.ShrinkToAdmit && s.donorLeft > 0
	}
	return s.cfg.ShrinkToAdmit && s.cfg.Policy != Rigid && r.rem < s.donorLeft
}

// longestDonor returns the most time left (seconds at the current rate)
// of any running job whose base allocation is above its minimum.
func (s *sim) longestDonor() float64 {
	most := 0.0
	for _, d := range s.running {
		if d.min < baseGPUs(d) {
			most = max(most, d.rem/d.rate)
		}
	}
	return most
}

// start runs r on allocs now, preempting extra jobs where needed.
func (s *sim) start(r *run, allocs []alloc, avail []int) {
	shed := false
	if s.cfg.ShedSlowNodes && s.cfg.Policy != Rigid && r.d2 && !r.rigid && r.min < r.max {
		n := len(allocs)
		allocs = s.shed(r, allocs)
		shed = len(allocs) < n
	}
	for _, a := range allocs {
		nd := &s.nodes[a.Node]
		for nd.free < a.GPUs && len(nd.extras) > 0 {
			victim := nd.extras[0]
			for _, x := range nd.extras[1:] {
				if x.end > victim.end {
					victim = x
				}
			}
			s.res.Preemptions++
			if r.planned > 0 && s.now >= r.planned {
				s.res.ReservedStartPreemptions++
			}
			s.endExtra(victim)
		}
		nd.free -= a.GPUs
		s.allocated += a.GPUs
		avail[a.Node] -= a.GPUs
		s.availTotal -= a.GPUs
	}
	r.base = allocs
	s.donorsFresh = false
	r.orig = 0
	for _, a := range allocs {
		r.orig += a.GPUs
	}
	types := make([]string, 0, 1)
	for _, a := range allocs {
		types = append(types, s.nodes[a.Node].typ)
	}
	types = planner.AllowedTypes(false, types) // sorted, distinct
	r.startTypes = strings.Join(types, ",")
	switch {
	case !r.d2: // d1: grows only onto the type it started on
		r.gpuTypes = types
	case len(r.rule.Types) > 0: // d2: onto any type it names (gpu_type), no other
		r.gpuTypes = r.rule.Types
	}
	r.started, r.start, r.last = true, s.now, s.now
	s.spaceDirty, s.peerPass = true, -1
	s.plans = nil // the others' plans change with it (othersOff makes them again)
	if r.planned > 0 && s.now > r.planned {
		s.res.MaxReservationDelay = max(s.res.MaxReservationDelay, s.now-r.planned)
	}
	s.sumQueue += float64(s.now - r.j.Submit)
	r.limit = s.baseLimit(r, allocs)
	r.startRun, r.runFrom = float64(r.limit-s.now), s.now
	r.pos = len(s.running)
	s.running = append(s.running, r)
	s.reschedule(r)
	if shed { // the shrink right after the start: one rescale, paid at the rate on what is left
		s.res.Shed++
		r.rescales++
		r.rem += s.cfg.RescaleCost * r.rate
		s.reschedule(r)
	}
}

// shrinkToAdmit starts r at its requested size by shrinking the base
// allocations of running elastic jobs, as the planner decides
// (planner.Cluster.Admit: donors with more time left than r's work, longest
// first, never below their minimum, one on a node another queued job's
// planned start names (reserved, othersOff) only as far as its raised
// limit ends by then, and r on such a node (jobReserved) only if its time
// limit ends by then; nil reserved: none is kept). It applies the
// decision: every GPU freed on node n is added to from[n] and to
// avail[n] (the GPUs free now; nil when from already is). It refuses an
// admission whose freed GPUs, with those free now, would hold a job of
// ahead (queued jobs ranked before r, not started) that they did not hold
// before: Slurm would start that job on them instead
// (planner.Cluster.StartsFirst, as the daemon's AdmitOnNodes). It returns
// r's allocation, or nil having shrunk nothing.
func (s *sim) shrinkToAdmit(r *run, from, avail []int, ahead []*run, reserved, jobReserved map[int]int64) []alloc {
	objective := s.objective()
	if !s.donorsFresh {
		s.buildDonors(objective)
	}
	donors := s.donorsFor(r)
	if len(donors) == 0 {
		return nil
	}
	q := planner.AdmitRequest{Avail: from, Want: r.j.GPUs, Rule: s.ruleOf(r), Work: r.rem, Donors: donors}
	if reserved != nil {
		q.Reserved = func(n int) (float64, bool) { at, ok := reserved[n]; return float64(at - s.now), ok }
		q.JobReserved = func(n int) (float64, bool) { at, ok := jobReserved[n]; return float64(at - s.now), ok }
		q.Limit = s.limitAt(r, r.j.GPUs)
	}
	saved := s.availTotal
	var adm planner.Admission
	ok := false
	if objective {
		adm, ok = s.admitAtSomeSize(r, q)
	} else {
		adm, ok = s.cluster.Admit(q)
	}
	s.availTotal = saved
	if !ok || s.takenByAhead(adm, avail, ahead) {
		return nil
	}
	for _, sh := range adm.Shrinks {
		took := s.shrinkBase(s.donorRuns[sh.Donor], sh.Node, sh.GPUs)
		from[sh.Node] += took
		if avail != nil {
			avail[sh.Node] += took
		}
	}
	s.res.AdmitShrinks++
	return adm.Alloc
}

// takenByAhead reports whether a job of ahead not started would fit on
// the GPUs free now (avail) plus those admission adm frees and not on
// avail alone.
func (s *sim) takenByAhead(adm planner.Admission, avail []int, ahead []*run) bool {
	if len(ahead) == 0 {
		return false
	}
	after := slices.Clone(avail)
	for _, sh := range adm.Shrinks {
		after[sh.Node] += sh.GPUs
	}
	for _, q := range ahead {
		if !q.started && s.cluster.StartsFirst(avail, after, q.j.GPUs, 0, s.ruleOf(q)) {
			return true
		}
	}
	return false
}

// buildDonors lists the running jobs that may give GPUs to a queued job
// (above the fewest they may keep), as planner donors, with s.donorRuns
// their runs; it stays valid until a job starts or shrinks.
func (s *sim) buildDonors(objective bool) {
	s.donors, s.donorRuns, s.donorDelays, s.donorAt, s.keeping = s.donors[:0], s.donorRuns[:0], s.donorDelays[:0], s.donorAt[:0], planner.Keeping{}
	if objective {
		s.keeping = planner.KeepingFor(s.cfg.AdmitHorizon, s.donorPools)
	}
	for i, d := range s.running {
		keep := planner.KeepAfterLoss(d.orig, d.min, s.cfg.AdmitMaxLoss) // in GPUs
		if baseGPUs(d) <= keep {
			continue
		}
		dn := planner.Donor{Base: d.base, Min: keep, TimeLeft: d.rem / d.rate}
		if objective {
			dn.TimeLeft = s.timeLeft(d)
			var delay func(int) float64
			dn.Loss, delay, dn.RaisedEnd = s.donorLoss(d)
			if a := planner.AllowedEnd(s.cfg.AdmitAllowance, s.startRunEstimate(d), float64(s.now-d.runFrom)); a > 0 {
				dn.Allowed, dn.Kept = a, delay
			}
			s.donorDelays = append(s.donorDelays, delay)
		} else {
			s.donorDelays = append(s.donorDelays, nil)
		}
		s.donors = append(s.donors, dn)
		s.donorRuns = append(s.donorRuns, d)
		s.donorAt = append(s.donorAt, i)
	}
	s.donorsFresh = true
}

// baseGPUs is the size of r's base allocation.
func baseGPUs(r *run) int {
	n := 0
	for _, a := range r.base {
		n += a.GPUs
	}
	return n
}

// shrinkBase takes up to want GPUs of d's base allocation on node n, never
// below d's minimum, frees them, moves d's time limit to its remaining work
// at the smaller base, and returns how many it took.
func (s *sim) shrinkBase(d *run, n, want int) int {
	i := slices.IndexFunc(d.base, func(a alloc) bool { return a.Node == n })
	g := min(want, baseGPUs(d)-d.min)
	if i < 0 || g <= 0 {
		return 0
	}
	g = min(g, d.base[i].GPUs)
	s.advance(d)
	d.base = slices.Clone(d.base)
	if d.base[i].GPUs -= g; d.base[i].GPUs == 0 {
		d.base = slices.Delete(d.base, i, i+1)
	}
	d.snapBase = nil
	s.donorsFresh = false
	s.nodes[n].free += g
	s.spaceDirty = true
	s.allocated -= g
	s.availTotal += g
	d.limit = s.baseLimit(d, d.base)
	s.reschedule(d)
	return g
}

// shed drops from allocs the nodes planner.ShedNodes finds add nothing to
// r's throughput (Config.ShedSlowNodes).
func (s *sim) shed(r *run, allocs []alloc) []alloc {
	shares := make([]planner.NodeShare, len(allocs))
	batch := 0 // Slurm's batch host: the job's first node in the cluster's node order (slurm.conf's)
	for i, a := range allocs {
		shares[i] = planner.NodeShare{Name: s.nodes[a.Node].name, Speed: s.speedOn(r, a.Node), GPUs: a.GPUs}
		if a.Node < allocs[batch].Node {
			batch = i
		}
	}
	shares[batch].Batch = true
	drop := planner.ShedNodes(r.model, shares, r.min)
	if len(drop) == 0 {
		return allocs
	}
	return slices.DeleteFunc(slices.Clone(allocs), func(a alloc) bool { return slices.Contains(drop, s.nodes[a.Node].name) })
}

// donorPools indexes, for planner.Pools.Kept (planner.KeepingFor under
// planner.HorizonContested), the running jobs, each with its owner, the
// types of its own allocation and its time left, and the queued jobs not
// started, by the rule they start under.
func (s *sim) donorPools() *planner.Pools {
	running := make([]planner.PoolJob, len(s.running))
	for i, r := range s.running {
		job := planner.PoolJob{User: r.j.User, TimeLeft: s.timeLeft(r)}
		for _, a := range r.base {
			if t := s.nodes[a.Node].typ; !slices.Contains(job.Types, t) {
				job.Types = append(job.Types, t)
			}
		}
		running[i] = job
	}
	var queued []planner.FitRule
	for _, q := range s.queue {
		if !q.started {
			queued = append(queued, s.ruleOf(q))
		}
	}
	return planner.NewPools(running, queued)
}

// donorsFor is s.donors as shrink-to-admit weighs them for queued job r:
// each bounded by its Delay when its end counts as kept (s.keeping, by
// Config.AdmitHorizon).
func (s *sim) donorsFor(r *run) []planner.Donor {
	if s.keeping.None() {
		return s.donors
	}
	donors := slices.Clone(s.donors)
	for i := range donors {
		if s.donorDelays[i] != nil && s.keeping.Kept(s.donorAt[i], r.j.User) {
			donors[i].Delay = s.donorDelays[i]
		}
	}
	return donors
}

// startRunEstimate is the run time the daemon's planner.StartRun reads
// for running job r: its run at the allocation it started on (its time
// limit, exact here), or its pace so far from its progress, the time since
// it (re)started over the fraction of its whole work done, when that is
// less.
func (s *sim) startRunEstimate(r *run) float64 {
	total := float64(r.j.Duration)
	done := 1 - max(r.rem, 0)/total
	if !(total > 0) || !(done > 0) || s.now <= r.runFrom {
		return r.startRun
	}
	return min(r.startRun, float64(s.now-r.runFrom)/done)
}
