package planner

import (
	"cmp"
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
// an unplanned job), so no queued job waits longer for them. The daemon
// signals the slow extra job, whose worker leaves at its next step
// boundary, and cancels it after grace_period if it is still there, as
// for any shrink.

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
// left after the grants. Jobs are visited in snapshot order; each
// job's extra jobs slowest first, each moved to the allowed type that
// runs the job fastest, as long as that is faster than keeping it.
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
		pace := func(byType map[string]int) float64 {
			tb, _ := j.Model.Throughput(p.speedCounts(j, base, "", 0))
			ta, waste := j.Model.Throughput(p.speedCounts(j, byType, "", 0))
			if waste > p.lim.WasteCap+1e-12 {
				ta = 0
			}
			return max(tb, ta)
		}
		now := pace(js.byType)
		slices.SortStableFunc(live, func(a, b int) int {
			return cmp.Compare(j.SpeedOf(p.s.Nodes[p.idx[j.Extras[a].Node]].GPUType, p.s.Speeds),
				j.SpeedOf(p.s.Nodes[p.idx[j.Extras[b].Node]].GPUType, p.s.Speeds))
		})
		after, lend := now, int64(0)
		var trades []trade
		wanted := map[string]int{}
		for _, xi := range live {
			x := j.Extras[xi]
			from := p.s.Nodes[p.idx[x.Node]].GPUType
			best, bestPace := "", after
			for _, t := range types {
				if t == from || len(j.GPUTypes) > 0 && !slices.Contains(j.GPUTypes, t) ||
					j.SpeedOf(t, p.s.Speeds) <= j.SpeedOf(from, p.s.Speeds) || p.availFor(js, t)-wanted[t] < x.GPUs {
					continue
				}
				js.byType[from] -= x.GPUs
				js.byType[t] += x.GPUs
				if v := pace(js.byType); v > bestPace+1e-12 {
					best, bestPace = t, v
				}
				js.byType[t] -= x.GPUs
				js.byType[from] += x.GPUs
			}
			if best == "" {
				continue
			}
			js.byType[from] -= x.GPUs
			js.byType[best] += x.GPUs
			wanted[best] += x.GPUs
			after = bestPace
			trades = append(trades, trade{xi, best})
			if end := p.firstSlotEnd(js, best); lend == 0 || end < lend {
				lend = end
			}
		}
		if len(trades) == 0 || !TradeUpPays(j.TimeLeft, float64(lend-p.s.Now), now, after, p.lim.RescaleSeconds) {
			continue
		}
		var mine []Grow
		for _, tr := range trades {
			mine = append(mine, p.take(candidate{js: js, typ: tr.typ, n: j.Extras[tr.x].GPUs})...)
		}
		mine = p.orders(mine)
		got := 0
		for _, g := range mine {
			got += g.GPUs
		}
		need := 0
		for _, tr := range trades {
			need += j.Extras[tr.x].GPUs
		}
		if got < need {
			continue // a lend too short to submit: keep the slow GPUs
		}
		grows = append(grows, mine...)
		for _, tr := range trades {
			x := j.Extras[tr.x]
			p.extraEnd[ji][tr.x] = p.s.Now - p.lim.MarginSeconds
			shrinks = append(shrinks, Shrink{Job: j.ID, Extra: x.ID, Node: x.Node, Deadline: p.s.Now,
				Reason: "trading up: GPUs of type " + tr.typ + " are idle and run the job faster"})
		}
	}
	return shrinks, grows
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
		if p.extraEnd[ji][xi] != x.End {
			continue // being ended
		}
		p.markHas(js, p.idx[x.Node])
		js.byType[p.s.Nodes[p.idx[x.Node]].GPUType] += x.GPUs
		live = append(live, xi)
	}
	return js, base, live
}

// firstSlotEnd is the end of the longest lend of type t that job js may
// take (the slots are sorted longest first), Now when none is left.
func (p *planning) firstSlotEnd(js *jobState, t string) int64 {
	for _, sl := range p.byType[t] {
		if !js.blocked[sl.node] && sl.n > 0 {
			return sl.end
		}
	}
	return p.s.Now
}
