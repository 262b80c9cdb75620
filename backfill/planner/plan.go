package planner

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Grow asks for an extra Slurm job for an elastic job: GPUs GPUs of type
// GPUType on Node, with a time limit ending at End (seconds, on the
// snapshot's clock), which is at least Limits.MarginSeconds before the
// earliest reserved start that needs those GPUs.
type Grow struct {
	Job, Node, GPUType string
	GPUs               int
	// End is the absolute end of the extra job's time limit, in seconds.
	End int64
	// TimeLimit is End − Now, in seconds (what sbatch --time gets).
	TimeLimit int64
}

// Shrink ends one extra job no later than Deadline (seconds): signal first,
// then cancel after the grace period, so its GPUs are free at a pending
// job's reserved start minus the margin.
type Shrink struct {
	Job, Extra, Node string
	// Deadline is when the extra job's GPUs must be free, in seconds.
	Deadline int64
	// Reservation is the planned start (seconds) that needs the GPUs; 0
	// for a shrink no reservation asks for (Reason says why).
	Reservation int64
	// Reason says why the extra job ends when no reservation needs its
	// GPUs (trading up, a job over its maximum: tradeup.go); "" for a
	// reservation's shrink.
	Reason string `json:",omitempty"`
	// Trade marks the end of a slow extra job that a trade replaces with
	// this round's grows of the same job: the daemon ends it only once
	// those were submitted (tradeup.go).
	Trade bool `json:",omitempty"`
}

// Actions is one planning cycle's output. Shrinks come first in the order
// they should be applied; Grows are in grant order.
type Actions struct {
	Shrinks []Shrink
	Grows   []Grow
}

// Plan computes one cycle of shrinks and grows for s (see the package
// documentation for the rules). It returns an error wrapping
// [ErrInvalidSnapshot] when the snapshot contradicts itself; it never
// panics on any snapshot.
func Plan(s Snapshot) (Actions, error) {
	idx, err := s.validate()
	if err != nil {
		return Actions{}, fmt.Errorf("planner: checking snapshot: %w", err)
	}
	p := newPlanning(&s, idx)
	var out Actions
	for n := range s.Nodes {
		if len(p.reserved[n]) > 0 {
			out.Shrinks = append(out.Shrinks, p.shrinkNode(n)...)
		}
	}
	out.Shrinks = append(out.Shrinks, p.overMaximum()...)
	for ji, j := range s.Running {
		if j.Elastic && (p.mayGrow(ji) || p.mayTrade(ji)) {
			p.buildSlots()
			out.Grows = p.orders(p.grant())
			granted := map[string]bool{}
			for _, g := range out.Grows {
				granted[g.Job] = true
			}
			shrinks, grows := p.tradeUp(granted)
			out.Shrinks = append(out.Shrinks, shrinks...)
			out.Grows = append(out.Grows, grows...)
			break
		}
	}
	return out, nil
}

type timed struct {
	t    int64
	gpus int
}

type extraRef struct {
	job int
	x   int
}

// slot is n GPUs lendable on one node until end.
type slot struct {
	node int
	end  int64
	n    int
}

type planning struct {
	s        *Snapshot
	lim      Limits
	idx      map[string]int
	released [][]timed    // per node: base allocations' releases
	reserved [][]timed    // per node: reservations, sorted by start
	extras   [][]extraRef // per node: extra jobs
	extraEnd [][]int64    // per running job, per extra: its end after shrinks
	idle     []int        // per node: idle GPUs by both accounts (FreeGPUs)
	held     []int        // per node: GPUs no grow takes (heldForUnplanned); nil: none
	byType   map[string][]slot
	avail    map[string]int
	// userLent is the GPUs lent to each user after grant's grants, those
	// being ended included (trading up adds to it).
	userLent map[string]int
}

func newPlanning(s *Snapshot, idx map[string]int) *planning {
	n := len(s.Nodes)
	p := &planning{s: s, lim: s.Limits.withDefaults(), idx: idx,
		released: make([][]timed, n), reserved: make([][]timed, n), extras: make([][]extraRef, n),
		extraEnd: make([][]int64, len(s.Running)), idle: FreeGPUs(s, idx)}
	for ji, j := range s.Running {
		for _, b := range j.Base {
			if ni, ok := idx[b.Node]; ok && j.End > 0 && b.GPUs > 0 {
				p.released[ni] = append(p.released[ni], timed{j.End, b.GPUs})
			}
		}
		if len(j.Extras) > 0 {
			p.extraEnd[ji] = make([]int64, len(j.Extras))
		}
		for xi, x := range j.Extras {
			p.extras[idx[x.Node]] = append(p.extras[idx[x.Node]], extraRef{ji, xi})
			p.extraEnd[ji][xi] = x.End
		}
	}
	for _, pj := range s.Pending {
		if pj.PlannedStart <= 0 {
			continue
		}
		for _, ng := range pj.PlannedNodes {
			ni, ok := idx[ng.Node]
			if !ok {
				continue
			}
			g := ng.GPUs
			if g == 0 || g > s.Nodes[ni].Total {
				g = s.Nodes[ni].Total
			}
			p.reserved[ni] = append(p.reserved[ni], timed{max(pj.PlannedStart, s.Now), g}) // overdue: needed now
		}
	}
	for ni := range p.reserved {
		slices.SortFunc(p.reserved[ni], func(a, b timed) int { return cmp.Compare(a.t, b.t) })
	}
	p.held = p.heldForUnplanned()
	return p
}

func (p *planning) end(r extraRef) int64 { return p.extraEnd[r.job][r.x] }

// leaving reports whether extra job xi of running job ji is being ended:
// shrunk this round (its end moved) or already (Extra.Leaving).
func (p *planning) leaving(ji, xi int) bool {
	x := p.s.Running[ji].Extras[xi]
	return x.Leaving || p.extraEnd[ji][xi] != x.End
}

// surplus returns idle + released(≤t) − reserved(≤t) on node ni, with
// extras released margin seconds before their end.
func (p *planning) surplus(ni int, t int64) int {
	s := p.idle[ni]
	for _, r := range p.released[ni] {
		if r.t <= t {
			s += r.gpus
		}
	}
	for _, r := range p.extras[ni] {
		if p.end(r)+p.lim.MarginSeconds <= t {
			s += p.s.Running[r.job].Extras[r.x].GPUs
		}
	}
	for _, r := range p.reserved[ni] {
		if r.t <= t {
			s -= r.gpus
		}
	}
	return s
}

// shrinkNode ends extra jobs on node ni that a reservation needs.
func (p *planning) shrinkNode(ni int) []Shrink {
	var out []Shrink
	for _, r := range p.reserved[ni] {
		deficit := -p.surplus(ni, r.t)
		if deficit <= 0 {
			continue
		}
		deadline := max(p.s.Now, r.t-p.lim.MarginSeconds)
		var cands []extraRef
		for _, x := range p.extras[ni] {
			if p.end(x)+p.lim.MarginSeconds > r.t {
				cands = append(cands, x)
			}
		}
		slices.SortFunc(cands, func(a, b extraRef) int {
			if c := cmp.Compare(p.end(b), p.end(a)); c != 0 {
				return c
			}
			return cmp.Compare(p.s.Running[a.job].Extras[a.x].ID, p.s.Running[b.job].Extras[b.x].ID)
		})
		for _, x := range cands {
			if deficit <= 0 {
				break
			}
			ex := p.s.Running[x.job].Extras[x.x]
			p.extraEnd[x.job][x.x] = deadline - p.lim.MarginSeconds
			deficit -= ex.GPUs
			out = append(out, Shrink{Job: p.s.Running[x.job].ID, Extra: ex.ID, Node: ex.Node, Deadline: deadline, Reservation: r.t})
		}
	}
	return out
}

// buildSlots computes each node's staircase of lendable GPUs and groups the
// slots by GPU type, longest lend first, then in snapshot node order.
func (p *planning) buildSlots() {
	p.byType = map[string][]slot{}
	p.avail = map[string]int{}
	now, margin := p.s.Now, p.lim.MarginSeconds
	for ni, nd := range p.s.Nodes {
		level := p.idle[ni]
		if p.held != nil {
			level -= p.held[ni]
		}
		if level <= 0 {
			continue
		}
		add := func(end int64, n int) {
			if n > 0 && end-now >= p.lim.MinLendSeconds {
				p.byType[nd.GPUType] = append(p.byType[nd.GPUType], slot{ni, end, n})
				p.avail[nd.GPUType] += n
			}
		}
		for _, r := range p.reserved[ni] {
			next := min(level, max(0, p.surplus(ni, r.t)))
			add(min(r.t-margin, now+p.lim.MaxLendSeconds), level-next)
			level = next
		}
		add(now+p.lim.MaxLendSeconds, level)
	}
	for _, sl := range p.byType {
		// Slots were added in node order; keep it among equal ends.
		slices.SortStableFunc(sl, func(a, b slot) int { return cmp.Compare(b.end, a.end) })
	}
}

// jobState is one elastic job's GPUs during the greedy.
type jobState struct {
	ji      int
	byType  map[string]int
	total   int
	cap     int // the most GPUs it may have at the end of the round
	leaving int // GPUs of its extra jobs being shrunk: held until their deadline
	lent    int // GPUs lent to it (extras alive after shrinks plus grants)
	eff     float64
	version int
	has     map[int]bool // nodes holding one of its extra jobs (spreading)
	blocked map[int]bool // nodes it is not grown onto (RunningJob.NoGrowNodes, OffNodes)
}

type candidate struct {
	js      *jobState
	typ     string
	n       int
	gain    float64 // marginal reference-GPU throughput per added GPU
	userLt  int
	end     int64
	id      string
	version int
}

func (p *planning) grant() []Grow {
	if len(p.avail) == 0 {
		return nil
	}
	types := make([]string, 0, len(p.avail))
	for t := range p.avail {
		types = append(types, t)
	}
	sort.Strings(types)
	userLent := maps.Clone(p.s.OtherLent)
	if userLent == nil {
		userLent = map[string]int{}
	}
	var jobs []*jobState
	for ji, j := range p.s.Running {
		if !j.Elastic {
			continue
		}
		if !p.mayGrow(ji) {
			for _, x := range j.Extras { // one being shrunk holds its GPUs until its deadline
				userLent[j.User] += x.GPUs
			}
			continue
		}
		js := &jobState{ji: ji, byType: map[string]int{}, blocked: p.blockedNodes(&j)}
		for _, b := range j.Base {
			js.byType[p.s.Nodes[p.idx[b.Node]].GPUType] += b.GPUs
			js.total += b.GPUs
		}
		for xi, x := range j.Extras {
			if p.leaving(ji, xi) {
				js.leaving += x.GPUs // being shrunk, held until its deadline
				continue
			}
			p.markHas(js, p.idx[x.Node])
			js.byType[p.s.Nodes[p.idx[x.Node]].GPUType] += x.GPUs
			js.total += x.GPUs
			js.lent += x.GPUs
		}
		userLent[j.User] += js.lent + js.leaving // the GPUs being shrunk are held until their deadline
		js.cap = min(j.MaxGPUs, 2*js.total)
		if p.s.NothingQueued {
			js.cap = j.MaxGPUs
		}
		js.eff, _ = j.Model.Throughput(p.speedCounts(&p.s.Running[ji], js.byType, "", 0))
		jobs = append(jobs, js)
	}
	startLent := maps.Clone(userLent)
	p.userLent = userLent // grant's grants add to it below
	h := &candHeap{}
	for _, js := range jobs {
		if c, ok := p.best(js, types, userLent, startLent); ok {
			h.items = append(h.items, c)
		}
	}
	heap.Init(h)
	var grows []Grow
	for h.Len() > 0 {
		c := heap.Pop(h).(candidate)
		if c.version != c.js.version {
			continue
		}
		fresh, ok := p.best(c.js, types, userLent, startLent)
		if !ok {
			continue
		}
		if fresh.gain < c.gain-1e-12 || fresh.typ != c.typ || fresh.n != c.n {
			heap.Push(h, fresh)
			continue
		}
		grows = append(grows, p.take(c)...)
		js := c.js
		js.byType[c.typ] += c.n
		js.total += c.n
		js.lent += c.n
		userLent[p.s.Running[js.ji].User] += c.n
		js.eff, _ = p.s.Running[js.ji].Model.Throughput(p.speedCounts(&p.s.Running[js.ji], js.byType, "", 0))
		js.version++
		if nc, ok := p.best(js, types, userLent, startLent); ok {
			heap.Push(h, nc)
		}
	}
	return grows
}

// mayGrow is a cheap pre-check: job ji is not held (NoGrow), holds GPUs
// and is below its maximum, counting extra jobs being shrunk (they hold
// their GPUs until their deadline).
func (p *planning) mayGrow(ji int) bool {
	j := p.s.Running[ji]
	if j.NoGrow {
		return false
	}
	base, total := 0, 0
	for _, b := range j.Base {
		base += b.GPUs
	}
	total = base
	for _, x := range j.Extras {
		total += x.GPUs
	}
	return total < j.MaxGPUs && base > 0
}

// blockedNodes indexes the nodes job j is never grown onto (NoGrowNodes,
// OffNodes); nil when none is known.
func (p *planning) blockedNodes(j *RunningJob) map[int]bool {
	var out map[int]bool
	for _, n := range slices.Concat(j.NoGrowNodes, j.OffNodes) {
		if ni, ok := p.idx[n]; ok {
			if out == nil {
				out = map[int]bool{}
			}
			out[ni] = true
		}
	}
	return out
}

// mayTrade is tradeUp's cheap pre-check: job ji is elastic, not held,
// has a known time left and holds extra jobs.
func (p *planning) mayTrade(ji int) bool {
	j := &p.s.Running[ji]
	return p.lim.TradeUp && j.Elastic && !j.NoGrow && j.TimeLeft > 0 && len(j.Extras) > 0
}

// best returns js's best grant now: the type and count with the largest
// marginal throughput per GPU that satisfies every limit.
func (p *planning) best(js *jobState, types []string, userLent, startLent map[string]int) (candidate, bool) {
	j := p.s.Running[js.ji]
	// Extras being shrunk still hold their GPUs until the deadline, so they
	// count against the maximum and the per-job and per-user caps (never
	// against the doubling cap).
	room := min(js.cap-js.total, p.s.Running[js.ji].MaxGPUs-js.total-js.leaving)
	if l := p.lim.MaxExtraGPUsPerJob; l > 0 {
		room = min(room, l-js.lent-js.leaving)
	}
	if l := p.lim.MaxExtraGPUsPerUser; l > 0 {
		room = min(room, l-userLent[j.User])
	}
	var bestC candidate
	found := false
	for _, t := range types {
		if len(j.GPUTypes) > 0 && !slices.Contains(j.GPUTypes, t) {
			continue // d1: never onto another GPU type
		}
		for n := 1; n <= min(room, p.availFor(js, t)); n++ {
			eff, waste := j.Model.Throughput(p.speedCounts(&p.s.Running[js.ji], js.byType, t, n))
			if waste > p.lim.WasteCap+1e-12 {
				continue
			}
			g := (eff - js.eff) / float64(n)
			if g <= 1e-12 {
				continue
			}
			if !found || g > bestC.gain+1e-12 {
				bestC = candidate{js: js, typ: t, n: n, gain: g, userLt: startLent[j.User], end: j.End, id: j.ID, version: js.version}
				found = true
			}
		}
	}
	return bestC, found
}

// availFor returns the GPUs of type t left in slots on nodes job js may
// be grown onto.
func (p *planning) availFor(js *jobState, t string) int {
	if len(js.blocked) == 0 {
		return p.avail[t]
	}
	n := 0
	for _, sl := range p.byType[t] {
		if !js.blocked[sl.node] {
			n += sl.n
		}
	}
	return n
}

// speedCounts groups job j's GPUs (byType, plus add of addType) by j's
// speed on each type (RunningJob.SpeedOf).
func (p *planning) speedCounts(j *RunningJob, byType map[string]int, addType string, add int) []SpeedCount {
	out := make([]SpeedCount, 0, len(byType)+1)
	for t, n := range byType {
		if t == addType {
			n += add
		}
		out = append(out, SpeedCount{Speed: j.SpeedOf(t, p.s.Speeds), N: n})
	}
	if _, ok := byType[addType]; !ok && add > 0 {
		out = append(out, SpeedCount{Speed: j.SpeedOf(addType, p.s.Speeds), N: add})
	}
	// Merge equal speeds so the result does not depend on map order.
	slices.SortFunc(out, func(a, b SpeedCount) int { return cmp.Compare(b.Speed, a.Speed) })
	merged := out[:0]
	for _, sc := range out {
		if k := len(merged); k > 0 && merged[k-1].Speed == sc.Speed {
			merged[k-1].N += sc.N
			continue
		}
		merged = append(merged, sc)
	}
	return merged
}

// take removes c.n GPUs of c.typ from the slots and returns one Grow per
// slot used. Slots are taken longest lend first; among the slots of the
// longest lend left, one on a node where the job has no extra job yet (in
// the snapshot, not being shrunk, or granted this cycle) goes first, and
// among those one that holds all the GPUs still wanted (spreading: one extra
// job per job per node, so one reservation takes back fewer of a job's
// workers, and an idle node is used before a job's extra jobs stack on
// another); otherwise node order.
func (p *planning) take(c candidate) []Grow {
	sl := p.byType[c.typ]
	left := c.n
	var out []Grow
	for left > 0 {
		i := p.pickSlot(sl, c.js, left)
		if i < 0 {
			break // best never asks for more than availFor holds
		}
		s := &sl[i]
		k := min(left, s.n)
		out = append(out, Grow{Job: p.s.Running[c.js.ji].ID, Node: p.s.Nodes[s.node].Name, GPUType: c.typ,
			GPUs: k, End: s.end, TimeLimit: s.end - p.s.Now})
		p.markHas(c.js, s.node)
		s.n -= k
		left -= k
		if s.n == 0 {
			sl = slices.Delete(sl, i, i+1)
		}
	}
	p.byType[c.typ] = sl
	p.avail[c.typ] -= c.n - left
	return out
}

// pickSlot returns the index in sl (sorted longest lend first) of the slot
// take uses next for job js wanting left GPUs, among the slots on nodes js
// may be grown onto (-1: none).
func (p *planning) pickSlot(sl []slot, js *jobState, left int) int {
	first, free := -1, -1
	for i := range sl {
		if js.blocked[sl[i].node] {
			continue
		}
		if first < 0 {
			first = i
		}
		if sl[i].end != sl[first].end {
			break
		}
		if js.has[sl[i].node] {
			continue
		}
		if sl[i].n >= left {
			return i
		}
		if free < 0 {
			free = i
		}
	}
	if free >= 0 {
		return free
	}
	return first
}

func (p *planning) markHas(js *jobState, node int) {
	if js.has == nil {
		js.has = map[int]bool{}
	}
	js.has[node] = true
}

// orders turns the greedy's grows into the extra jobs to submit: grows of
// one job on one node merge into one (ending at the earliest of their
// ends, in the order of the first); an end is capped at MarginSeconds
// before the job's own end (an extra job never outlives its job, though
// its time limit runs from its start, a little after now); the time limit is rounded down to
// a whole number of TimeLimitUnit and must still reach MinLendSeconds, or
// the grow is dropped.
func (p *planning) orders(grows []Grow) []Grow {
	index := map[[2]string]int{}
	var out []Grow
	for _, g := range grows {
		k := [2]string{g.Job, g.Node}
		if i, ok := index[k]; ok {
			out[i].GPUs += g.GPUs
			out[i].End = min(out[i].End, g.End)
			continue
		}
		index[k] = len(out)
		out = append(out, g)
	}
	ends := make(map[string]int64, len(p.s.Running))
	for _, j := range p.s.Running {
		ends[j.ID] = j.End
	}
	unit := max(p.lim.TimeLimitUnit, 1)
	kept := out[:0]
	for _, g := range out {
		if e := ends[g.Job]; e > 0 {
			// The margin before the job's end also covers the extra job's
			// start after submission, which its time limit counts from
			// (measured on the lab: 0.4 s; an extra job capped at the end
			// exactly outlived its job).
			g.End = min(g.End, e-p.lim.MarginSeconds)
		}
		g.TimeLimit = (g.End - p.s.Now) / unit * unit
		g.End = p.s.Now + g.TimeLimit
		if g.TimeLimit >= unit && g.TimeLimit >= p.lim.MinLendSeconds {
			kept = append(kept, g)
		}
	}
	return kept
}

type candHeap struct{ items []candidate }

func (h *candHeap) Len() int { return len(h.items) }
func (h *candHeap) Less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	if x.gain != y.gain {
		return x.gain > y.gain
	}
	if x.userLt != y.userLt {
		return x.userLt < y.userLt
	}
	if x.end != y.end {
		return x.end < y.end
	}
	return x.id < y.id
}
func (h *candHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *candHeap) Push(x any)    { h.items = append(h.items, x.(candidate)) }
func (h *candHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
