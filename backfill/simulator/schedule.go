package simulator

import (
	"cmp"
	"math"
	"slices"
)

// reservation is the queue head's planned start and nodes.
type reservation struct {
	r      *run
	t      int64
	allocs []alloc
	nodes  map[int]bool // the nodes of allocs
}

// schedule is one FIFO + EASY-backfill pass at s.now.
func (s *sim) schedule() {
	s.resv = reservation{}
	if len(s.queue) == 0 {
		return
	}
	avail := s.availNow()
	if s.cfg.Policy != Rigid {
		s.donorLeft = s.longestDonor()
	}
	i := 0
	for i < len(s.queue) {
		r := s.queue[i]
		allocs := s.fitSize(r, avail, r.j.GPUs, r.j.GPUs)
		if allocs == nil && s.mayAdmit(r) {
			allocs = s.shrinkToAdmit(r, avail, nil)
		}
		if allocs == nil {
			break
		}
		s.start(r, allocs, avail)
		i++
	}
	s.queue = s.queue[i:]
	if len(s.queue) == 0 {
		return
	}
	head := s.queue[0]
	x, resAllocs, spare := s.reserve(head, avail)
	if head.planned == 0 || x < head.planned {
		head.planned = x
	}
	s.resv = reservation{r: head, t: x, allocs: resAllocs, nodes: map[int]bool{}}
	for _, a := range resAllocs {
		s.resv.nodes[a.node] = true
	}
	ravail := make([]int, len(avail))
	for n := range avail {
		ravail[n] = min(avail[n], spare[n])
	}
	kept := s.queue[:1]
	for k, r := range s.queue[1:] {
		if k >= s.cfg.BackfillDepth || (s.availTotal == 0 && s.donorLeft == 0) {
			kept = append(kept, s.queue[1+k:]...)
			break
		}
		if s.backfill(r, avail, ravail, spare, x) {
			continue
		}
		kept = append(kept, r)
	}
	s.queue = kept
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

// fitSize returns an allocation for r from avail of the largest size in
// [lo, hi] that fits, or nil.
func (s *sim) fitSize(r *run, avail []int, lo, hi int) []alloc {
	for size := min(hi, s.availTotal); size >= lo; size-- {
		if a := s.allocate(avail, size); a != nil {
			return a
		}
	}
	return nil
}

// allocate picks want GPUs from avail: the best-fitting single node of the
// fastest type that has one, else the fullest nodes of one type, else the
// fullest nodes of any type (fastest first). It returns nil if avail holds
// fewer than want.
func (s *sim) allocate(avail []int, want int) []alloc {
	for _, typ := range s.typeOrder {
		best := -1
		for _, n := range s.byType[typ] {
			if avail[n] >= want && (best < 0 || avail[n] < avail[best]) {
				best = n
			}
		}
		if best >= 0 {
			return []alloc{{best, want}}
		}
	}
	for _, typ := range s.typeOrder {
		if a := s.span(avail, s.byType[typ], want); a != nil {
			return a
		}
	}
	return s.span(avail, s.allNodes, want)
}

func (s *sim) span(avail []int, nodes []int, want int) []alloc {
	sum := 0
	for _, n := range nodes {
		sum += avail[n]
	}
	if sum < want {
		return nil
	}
	order := make([]int, 0, len(nodes))
	for _, n := range nodes {
		if avail[n] > 0 {
			order = append(order, n)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(s.nodes[b].speed, s.nodes[a].speed); c != 0 {
			return c
		}
		return cmp.Compare(avail[b], avail[a])
	})
	var out []alloc
	for _, n := range order {
		g := min(want, avail[n])
		out = append(out, alloc{n, g})
		if want -= g; want == 0 {
			break
		}
	}
	return out
}

// baseLimit is the time limit end of r started now on allocs.
func (s *sim) baseLimit(r *run, allocs []alloc) int64 {
	saved := r.base
	r.base = allocs
	rate := s.rateOf(r, false)
	r.base = saved
	return s.now + int64(math.Ceil(r.rem/rate))
}

// reserve returns the head's reserved start, the allocation planned for it
// then, and per node the GPUs free at that time that it does not need.
func (s *sim) reserve(head *run, avail []int) (int64, []alloc, []int) {
	proj := slices.Clone(avail)
	total := s.availTotal
	runs := slices.Clone(s.running)
	slices.SortFunc(runs, func(a, b *run) int {
		if c := cmp.Compare(a.limit, b.limit); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	need := head.j.GPUs
	t := s.now
	var allocs []alloc
	for i := 0; i < len(runs) && allocs == nil; {
		t = runs[i].limit
		for ; i < len(runs) && runs[i].limit == t; i++ {
			for _, a := range runs[i].base {
				proj[a.node] += a.gpus
				total += a.gpus
			}
		}
		if total >= need {
			allocs = s.allocate(proj, need)
		}
	}
	for _, a := range allocs {
		proj[a.node] -= a.gpus
	}
	return t, allocs, proj
}

// backfill starts r now if it ends before the reservation at x or fits in
// GPUs the reservation does not need; elastic policies may also free such
// GPUs by shrinking longer jobs (shrinkToAdmit, kept off the reserved nodes).
func (s *sim) backfill(r *run, avail, ravail, spare []int, x int64) bool {
	var a []alloc
	if s.availTotal >= r.j.GPUs {
		if a = s.fitSize(r, avail, r.j.GPUs, r.j.GPUs); a != nil && s.baseLimit(r, a) <= x {
			s.start(r, a, avail)
			for _, al := range a {
				ravail[al.node] = min(avail[al.node], spare[al.node])
			}
			return true
		}
		saved := s.availTotal
		s.availTotal = 0
		for _, v := range ravail {
			s.availTotal += v
		}
		a = s.fitSize(r, ravail, r.j.GPUs, r.j.GPUs)
		s.availTotal = saved
	}
	if a == nil && s.mayAdmit(r) {
		a = s.shrinkToAdmit(r, ravail, s.resv.nodes, avail, spare)
	}
	if a == nil {
		return false
	}
	s.start(r, a, avail)
	for _, al := range a {
		spare[al.node] -= al.gpus
		ravail[al.node] = min(avail[al.node], spare[al.node])
	}
	return true
}

// mayAdmit is a cheap pre-check for shrinkToAdmit: the policy is elastic
// and some running job that could shrink has more work left than r.
func (s *sim) mayAdmit(r *run) bool {
	return s.cfg.Policy != Rigid && r.rem < s.donorLeft
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
	for _, a := range allocs {
		nd := &s.nodes[a.node]
		for nd.free < a.gpus && len(nd.extras) > 0 {
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
		nd.free -= a.gpus
		s.allocated += a.gpus
		avail[a.node] -= a.gpus
		s.availTotal -= a.gpus
	}
	r.base = allocs
	r.started, r.start, r.last = true, s.now, s.now
	if r.planned > 0 && s.now > r.planned {
		s.res.MaxReservationDelay = max(s.res.MaxReservationDelay, s.now-r.planned)
	}
	s.sumQueue += float64(s.now - r.j.Submit)
	r.limit = s.baseLimit(r, allocs)
	r.pos = len(s.running)
	s.running = append(s.running, r)
	s.reschedule(r)
}

// shrinkToAdmit starts r at its requested size by shrinking the base
// allocations of running elastic jobs ("donors"), never below their
// minimum. A donor must have more work left than r at its requested size
// (a job only yields to a shorter one, as in shortest-remaining-time-first)
// and hold no GPU on a node in keepOff (the nodes a reservation needs: a
// shrunk donor's time limit moves later, which must not delay that
// reservation). The allocation is drawn from from plus the GPUs the donors
// free; every GPU freed on node n is added to from[n] and to each of also[n].
// It returns r's allocation, or nil having shrunk nothing.
func (s *sim) shrinkToAdmit(r *run, from []int, keepOff map[int]bool, also ...[]int) []alloc {
	need := r.j.GPUs
	var donors []*run
	for _, d := range s.running {
		if d.min >= baseGPUs(d) || d.rem/d.rate <= r.rem || onNodes(d, keepOff) {
			continue
		}
		donors = append(donors, d)
	}
	if len(donors) == 0 {
		return nil
	}
	slices.SortFunc(donors, func(a, b *run) int {
		if c := cmp.Compare(b.rem/b.rate, a.rem/a.rate); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	tent := slices.Clone(from)
	total := 0
	for _, v := range from {
		total += v
	}
	type give struct {
		d    *run
		node int
		gpus int
	}
	var gives []give // what each donor can free, node by node
	var allocs []alloc
	saved := s.availTotal
	for _, d := range donors {
		left := baseGPUs(d) - d.min
		for _, a := range d.base {
			if g := min(a.gpus, left); g > 0 {
				gives = append(gives, give{d, a.node, g})
				tent[a.node] += g
				total += g
				left -= g
			}
		}
		if total >= need {
			s.availTotal = total
			allocs = s.allocate(tent, need)
			s.availTotal = saved
			if allocs != nil {
				break
			}
		}
	}
	if allocs == nil {
		return nil
	}
	for _, a := range allocs {
		short := a.gpus - from[a.node]
		for _, gv := range gives {
			if short <= 0 {
				break
			}
			if gv.node != a.node {
				continue
			}
			took := s.shrinkBase(gv.d, a.node, min(short, gv.gpus))
			short -= took
			from[a.node] += took
			for _, o := range also {
				o[a.node] += took
			}
		}
	}
	s.res.AdmitShrinks++
	return allocs
}

// onNodes reports whether r holds base GPUs on a node in set.
func onNodes(r *run, set map[int]bool) bool {
	for _, a := range r.base {
		if set[a.node] {
			return true
		}
	}
	return false
}

// baseGPUs is the size of r's base allocation.
func baseGPUs(r *run) int {
	n := 0
	for _, a := range r.base {
		n += a.gpus
	}
	return n
}

// shrinkBase takes up to want GPUs of d's base allocation on node n, never
// below d's minimum, frees them, moves d's time limit to its remaining work
// at the smaller base, and returns how many it took.
func (s *sim) shrinkBase(d *run, n, want int) int {
	i := slices.IndexFunc(d.base, func(a alloc) bool { return a.node == n })
	g := min(want, baseGPUs(d)-d.min)
	if i < 0 || g <= 0 {
		return 0
	}
	g = min(g, d.base[i].gpus)
	s.advance(d)
	d.base = slices.Clone(d.base)
	if d.base[i].gpus -= g; d.base[i].gpus == 0 {
		d.base = slices.Delete(d.base, i, i+1)
	}
	d.snapBase = nil
	s.nodes[n].free += g
	s.allocated -= g
	s.availTotal += g
	d.limit = s.baseLimit(d, d.base)
	s.reschedule(d)
	return g
}
