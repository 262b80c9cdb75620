package planner

import (
	"cmp"
	"maps"
	"math"
	"slices"
)

// Trading up: an elastic job's extra jobs are lent on whatever GPUs are
// free when it grows, often slow ones while the fast ones are busy. When
// fast GPUs free up later, a job at its maximum never grows onto them
// (and a job below it adds them beside its slow ones), so it runs to its
// end at the slow GPUs' pace (every step waits for the slowest GPU,
// EasyScale §4.2) while the fast GPUs sit idle: on issue 17's workload a
// 4-V100 + 4-P100 job ran alone for an hour beside 28 idle V100s and set
// the makespan (BENCHMARKS.md, issue 17, E71). [MoveToFaster] moves a
// job's own allocation; trading up moves its extra jobs: the planner ends
// an extra job on slower GPUs and lends the same count on faster ones,
// in one round, when that ends the job sooner by more than the resize
// costs ([TradeUpPays]). The GPUs are those any grow may take (slots:
// idle, not needed by a reservation before the lend ends, not held for
// an unplanned job), so no queued job waits longer for them, and a trade
// stays within the lend caps counting the GPUs it ends as held until they
// go (as grants count a shrink's); it is made only for a job within its
// maximum, which the new GPUs exceed while the slow ones leave (their
// worker leaves at its next step boundary once signalled, the new ones
// join at a step boundary once started; grace_period at most). The daemon
// submits the new extra jobs first and signals the slow one only once
// they were submitted; its worker leaves at its next step boundary, and
// the daemon cancels it after grace_period if it is still there, as for
// any shrink. While it leaves it is Extra.Leaving, never traded again
// (helper 110 saw a job traded every cycle of the grace period, past its
// maximum and the caps, before that); a trade left half done (the signal
// failed, or sbatch took only some replacements) is finished by the
// over-maximum rule ([planning.overMaximum]).

// TradeUpPays reports whether trading up pays: a job with left seconds
// to run at throughput now would run at throughput after (the same
// count of GPUs, faster ones) for at least lend seconds (the new extra
// jobs' lend; after it the job grows again as any job does) and a resize
// costs rescale seconds of progress. A trade is two resizes (the workers
// on the slow GPUs leave, those on the fast ones join), and the time it
// saves, min(left, lend) × (1 − now / after), must exceed them by
// [MoveMargin]. False when any figure is not positive (left unknown: 0).
func TradeUpPays(left, lend, now, after, rescale float64) bool {
	if !(left > 0) || !(lend > 0) || !(now > 0) || !(after > now) || rescale < 0 {
		return false
	}
	saved := min(left, lend) * (1 - now/after)
	return saved > (1+MoveMargin)*2*rescale
}

// trade is one extra job traded up: ended, and its GPUs lent on typ.
type trade struct {
	x   int // index in the job's Extras
	typ string
}

// tradeUp returns the shrinks and grows that trade up the extra jobs of
// every elastic job that may grow (not NoGrow), has a known time left
// and was granted nothing this round (granted), taking from the slots
// left after the grants. Jobs are visited in snapshot order. A job's
// extra jobs not already being ended are taken slowest first, each to
// the allowed type with idle GPUs that runs the job fastest, and the
// trade is the first run of them that runs it fastest (one slow extra job
// traded alone may not speed up a job whose pace another one sets). It
// is made when TradeUpPays over the shortest of the job's time left, the
// new lends and the traded extra jobs' own lends, and within the job's
// maximum and the lend caps counting the GPUs being ended, as grants
// count them.
func (p *planning) tradeUp(granted map[string]bool) ([]Shrink, []Grow) {
	if !p.lim.TradeUp || len(p.avail) == 0 {
		return nil, nil
	}
	types := make([]string, 0, len(p.avail))
	for t, n := range p.avail {
		if n > 0 {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	var shrinks []Shrink
	var grows []Grow
	for ji := range p.s.Running {
		j := &p.s.Running[ji]
		if !j.Elastic || j.NoGrow || !(j.TimeLeft > 0) || len(j.Extras) == 0 || granted[j.ID] {
			continue
		}
		js, base, live := p.tradeState(ji)
		if len(live) == 0 {
			continue
		}
		held, lent := 0, 0 // every GPU it holds, and those lent, those being ended included
		for _, b := range j.Base {
			held += b.GPUs
		}
		for _, x := range j.Extras {
			held += x.GPUs
			lent += x.GPUs
		}
		if held > j.MaxGPUs {
			continue // an earlier trade's extra jobs are still leaving
		}
		trades := p.bestTrades(j, js, base, live, types)
		if len(trades) == 0 {
			continue
		}
		need, slowEnd := 0, int64(math.MaxInt64)
		for _, tr := range trades {
			need += j.Extras[tr.x].GPUs
			slowEnd = min(slowEnd, j.Extras[tr.x].End)
		}
		if l := p.lim.MaxExtraGPUsPerJob; l > 0 && lent+need > l {
			continue
		}
		if l := p.lim.MaxExtraGPUsPerUser; l > 0 && p.userLent[j.User]+need > l {
			continue
		}
		now := p.tradePace(j, base, js.byType, nil)
		after := p.tradePace(j, base, js.byType, trades)
		saved := p.saveSlots(trades)
		var mine []Grow
		for _, tr := range trades {
			mine = append(mine, p.take(candidate{js: js, typ: tr.typ, n: j.Extras[tr.x].GPUs})...)
		}
		mine = p.orders(mine)
		got, lendEnd := 0, slowEnd
		for _, g := range mine {
			got += g.GPUs
			lendEnd = min(lendEnd, g.End)
		}
		if got < need || !TradeUpPays(j.TimeLeft, float64(lendEnd-p.s.Now), now, after, p.lim.RescaleSeconds) {
			saved.restore(p) // a lend too short, or a gain too small: keep the slow GPUs
			continue
		}
		grows = append(grows, mine...)
		p.userLent[j.User] += need // the GPUs being ended are held until they go
		for _, tr := range trades {
			x := j.Extras[tr.x]
			p.extraEnd[ji][tr.x] = p.s.Now - p.lim.MarginSeconds
			shrinks = append(shrinks, Shrink{Job: j.ID, Extra: x.ID, Node: x.Node, Deadline: p.s.Now, Trade: true,
				Reason: "trading up: GPUs of type " + tr.typ + " are idle and run the job faster"})
		}
	}
	return shrinks, grows
}

// bestTrades returns the trades of job j (its GPUs by type in js, its
// base by type, its live extra jobs) that run it fastest: its extra jobs
// slowest first, each to the allowed faster type with enough GPUs in the
// slots that runs it fastest, and of those the first run (prefix) with
// the highest pace, when that is above its pace now; nil when none is.
func (p *planning) bestTrades(j *RunningJob, js *jobState, base map[string]int, live []int, types []string) []trade {
	typeOf := func(xi int) string { return p.s.Nodes[p.idx[j.Extras[xi].Node]].GPUType }
	slices.SortStableFunc(live, func(a, b int) int {
		return cmp.Compare(j.SpeedOf(typeOf(a), p.s.Speeds), j.SpeedOf(typeOf(b), p.s.Speeds))
	})
	byType := maps.Clone(js.byType)
	bestPace := p.tradePace(j, base, byType, nil)
	var all []trade
	best := 0
	wanted := map[string]int{}
	for _, xi := range live {
		x, from := j.Extras[xi], typeOf(xi)
		to, toPace := "", -1.0
		for _, t := range types {
			if t == from || len(j.GPUTypes) > 0 && !slices.Contains(j.GPUTypes, t) ||
				j.SpeedOf(t, p.s.Speeds) <= j.SpeedOf(from, p.s.Speeds) || p.availFor(js, t)-wanted[t] < x.GPUs {
				continue
			}
			byType[from] -= x.GPUs
			byType[t] += x.GPUs
			if v := p.tradePace(j, base, byType, nil); v > toPace+1e-12 {
				to, toPace = t, v
			}
			byType[t] -= x.GPUs
			byType[from] += x.GPUs
		}
		if to == "" {
			continue
		}
		byType[from] -= x.GPUs
		byType[to] += x.GPUs
		wanted[to] += x.GPUs
		all = append(all, trade{xi, to})
		if toPace > bestPace+1e-12 {
			bestPace, best = toPace, len(all)
		}
	}
	return all[:best]
}

// tradePace is job j's throughput on its GPUs by type (byType) with
// trades made, or on its base alone when that is faster or the mix
// wastes more than WasteCap ([Pace]; the simulator's rate).
func (p *planning) tradePace(j *RunningJob, base, byType map[string]int, trades []trade) float64 {
	if len(trades) > 0 {
		byType = maps.Clone(byType)
		for _, tr := range trades {
			x := j.Extras[tr.x]
			byType[p.s.Nodes[p.idx[x.Node]].GPUType] -= x.GPUs
			byType[tr.typ] += x.GPUs
		}
	}
	tb, _ := j.Model.Throughput(p.speedCounts(j, base, "", 0))
	ta, waste := j.Model.Throughput(p.speedCounts(j, byType, "", 0))
	if waste > p.lim.WasteCap+1e-12 {
		ta = 0
	}
	return max(tb, ta)
}

// savedSlots is the slots of some GPU types as they were, for a trade
// that take used and that is then not made.
type savedSlots struct {
	byType map[string][]slot
	avail  map[string]int
}

func (p *planning) saveSlots(trades []trade) savedSlots {
	s := savedSlots{byType: map[string][]slot{}, avail: map[string]int{}}
	for _, tr := range trades {
		s.byType[tr.typ] = slices.Clone(p.byType[tr.typ])
		s.avail[tr.typ] = p.avail[tr.typ]
	}
	return s
}

func (s savedSlots) restore(p *planning) {
	for t, sl := range s.byType {
		p.byType[t], p.avail[t] = sl, s.avail[t]
	}
}

// tradeState returns job ji's GPUs by type (base and the extra jobs not
// being ended), its base by type, and the indexes of those extra jobs.
func (p *planning) tradeState(ji int) (*jobState, map[string]int, []int) {
	j := &p.s.Running[ji]
	js := &jobState{ji: ji, byType: map[string]int{}, blocked: p.blockedNodes(j)}
	base := map[string]int{}
	for _, b := range j.Base {
		t := p.s.Nodes[p.idx[b.Node]].GPUType
		js.byType[t] += b.GPUs
		base[t] += b.GPUs
	}
	var live []int
	for xi, x := range j.Extras {
		if p.leaving(ji, xi) {
			continue
		}
		p.markHas(js, p.idx[x.Node])
		js.byType[p.s.Nodes[p.idx[x.Node]].GPUType] += x.GPUs
		live = append(live, xi)
	}
	return js, base, live
}

// overMaximum ends at once, for every elastic job that holds more GPUs
// than its maximum with its extra jobs not already leaving, its slowest
// such extra jobs (the latest among equals) until it holds no more. A
// trade half done leaves a job there: the daemon submitted its new extra
// jobs but the signal to the slow one failed, or sbatch took only some of
// a trade's replacements; nothing else would end the surplus, and the
// trade is not made again while the job is over its maximum (helper
// 111's). Its shrinks are not Trade shrinks: the daemon signals them
// whatever this round grows.
func (p *planning) overMaximum() []Shrink {
	var out []Shrink
	for ji := range p.s.Running {
		j := &p.s.Running[ji]
		if !j.Elastic || j.MaxGPUs <= 0 || len(j.Extras) == 0 {
			continue
		}
		_, base, live := p.tradeState(ji)
		held := 0
		for _, n := range base {
			held += n
		}
		for _, xi := range live {
			held += j.Extras[xi].GPUs
		}
		if held <= j.MaxGPUs {
			continue
		}
		speed := func(xi int) float64 { return j.SpeedOf(p.s.Nodes[p.idx[j.Extras[xi].Node]].GPUType, p.s.Speeds) }
		slices.SortStableFunc(live, func(a, b int) int {
			if c := cmp.Compare(speed(a), speed(b)); c != 0 {
				return c
			}
			if c := cmp.Compare(len(j.Extras[b].ID), len(j.Extras[a].ID)); c != 0 {
				return c // Slurm job ids: the longer is the later
			}
			return cmp.Compare(j.Extras[b].ID, j.Extras[a].ID)
		})
		for _, xi := range live {
			if held <= j.MaxGPUs {
				break
			}
			x := j.Extras[xi]
			held -= x.GPUs
			p.extraEnd[ji][xi] = p.s.Now - p.lim.MarginSeconds
			out = append(out, Shrink{Job: j.ID, Extra: x.ID, Node: x.Node, Deadline: p.s.Now,
				Reason: "the job holds more GPUs than its maximum"})
		}
	}
	return out
}
