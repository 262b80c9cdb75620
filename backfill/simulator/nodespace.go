package simulator

import "slices"

// nodeSpace is a backfill pass's map of the GPUs free on each node over
// time, as Slurm's backfill scheduler keeps it (node_space_map in
// src/plugins/sched/backfill/backfill.c; the "Backfill scheduling" part
// of slurm.conf's SchedulerParameters): every job it tests, in priority
// order and up to bf_max_job_test of them, gets the earliest start at
// which its nodes are free for its whole time limit, and that span is
// taken from the map before the next job is tested, so no job tested
// later can start in a way that delays it. Row i holds the GPUs free per
// node from times[i] until times[i+1] (the last row: from then on); a
// row may go below zero where a donor's raised time limit outlasts a
// reservation made before its shrink (window clamps at zero).
type nodeSpace struct {
	times  []int64 // ascending; times[0] is the pass's now
	free   [][]int // free[i][n]: GPUs free on node n over row i
	byType [][]int // byType[i][k]: free[i] summed over the nodes of GPU type k
	typeOf []int   // the GPU type (index) of each node; set once (sim.nodeSpaceNow)
	ntypes int
	spare  [][]int // rows no longer in use, for reuse
}

// reset makes the map of now: the GPUs a starting job may take (avail,
// per node) and each running job's base GPUs freed at its time limit
// (runs in byLimit's order).
func (m *nodeSpace) reset(now int64, avail []int, runs []*run) {
	m.spare = append(m.spare, m.free...)
	m.times, m.free, m.byType = m.times[:0], m.free[:0], m.byType[:0]
	m.push(now, avail)
	for _, r := range runs {
		t := max(r.limit, now)
		if t > m.times[len(m.times)-1] {
			m.push(t, m.free[len(m.free)-1])
		}
		last := len(m.free) - 1
		for _, a := range r.base {
			m.free[last][a.Node] += a.GPUs
			m.byType[last][m.typeOf[a.Node]] += a.GPUs
		}
	}
}

// push appends a row starting at t holding a copy of from.
func (m *nodeSpace) push(t int64, from []int) {
	row := m.row(len(from))
	copy(row, from)
	sums := make([]int, m.ntypes)
	for n, v := range row {
		sums[m.typeOf[n]] += v
	}
	m.times = append(m.times, t)
	m.free = append(m.free, row)
	m.byType = append(m.byType, sums)
}

// row returns a slice of n ints, reused when one is spare.
func (m *nodeSpace) row(n int) []int {
	if k := len(m.spare); k > 0 {
		row := m.spare[k-1]
		m.spare = m.spare[:k-1]
		if cap(row) >= n {
			return row[:n]
		}
	}
	return make([]int, n)
}

// split makes t the start of a row and returns its index.
func (m *nodeSpace) split(t int64) int {
	i, found := slices.BinarySearch(m.times, t)
	if found {
		return i
	}
	prev := m.free[max(i-1, 0)]
	row := m.row(len(prev))
	copy(row, prev)
	m.times = slices.Insert(m.times, i, t)
	m.free = slices.Insert(m.free, i, row)
	m.byType = slices.Insert(m.byType, i, slices.Clone(m.byType[max(i-1, 0)]))
	return i
}

// take removes allocs from the map over [t, end) (seconds).
func (m *nodeSpace) take(t, end int64, allocs []alloc) {
	if end <= t {
		return
	}
	i, j := m.split(t), m.split(end)
	for k := i; k < j; k++ {
		for _, a := range allocs {
			m.free[k][a.Node] -= a.GPUs
			m.byType[k][m.typeOf[a.Node]] -= a.GPUs
		}
	}
}

// window writes into dst, per node, the fewest GPUs free at any time from
// the start of row i until end (never below zero) and returns it with
// their sum.
func (m *nodeSpace) window(i int, end int64, dst []int) ([]int, int) {
	dst = append(dst[:0], m.free[i]...)
	for k := i + 1; k < len(m.times) && m.times[k] < end; k++ {
		for n, v := range m.free[k] {
			dst[n] = min(dst[n], v)
		}
	}
	sum := 0
	for n, v := range dst {
		v = max(v, 0)
		dst[n] = v
		sum += v
	}
	return dst, sum
}

// lowScan yields, row by row, the fewest GPUs a job may use that are free
// at any time in [times[i], times[i]+span): an upper bound on window's sum
// over those nodes, cheap to check first. What a job may use is the sum
// over the GPU types it may run on, or, for a job of one type, the most
// of any one of them (usable). It is a sliding-window minimum (a monotone
// queue of row indexes, values ascending), linear in the rows scanned.
type lowScan struct {
	m       *nodeSpace
	span    int64
	types   []bool // the GPU types (indexes) the job may use
	oneType bool
	q       []int
	vals    []int // usable of the rows in q
	head, j int   // q's first live entry; the next row to enter a window
}

// start resets the scan for m, span (seconds, at least 1) and the job's
// types, reusing its slices.
func (l *lowScan) start(m *nodeSpace, span int64, types []bool, oneType bool) {
	l.m, l.span, l.types, l.oneType = m, max(span, 1), types, oneType
	l.q, l.vals, l.head, l.j = l.q[:0], l.vals[:0], 0, 0
}

// usable is what the job may use of row i's free GPUs.
func (l *lowScan) usable(i int) int {
	v := 0
	for k, n := range l.m.byType[i] {
		if !l.types[k] {
			continue
		}
		if l.oneType {
			v = max(v, n)
		} else {
			v += n
		}
	}
	return v
}

// at is the fewest GPUs the job may use free over [times[i],
// times[i]+span); i must not decrease from one call to the next.
func (l *lowScan) at(i int) int {
	m := l.m
	end := m.times[i] + l.span
	for ; l.j < len(m.times) && m.times[l.j] < end; l.j++ {
		v := l.usable(l.j)
		for len(l.q) > l.head && l.vals[len(l.vals)-1] >= v {
			l.q, l.vals = l.q[:len(l.q)-1], l.vals[:len(l.vals)-1]
		}
		l.q, l.vals = append(l.q, l.j), append(l.vals, v)
	}
	for l.q[l.head] < i {
		l.head++
	}
	return l.vals[l.head]
}
