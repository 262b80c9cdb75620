package planner

import (
	"cmp"
	"math"
	"slices"
)

// Alloc is a GPU count on one node of a [Cluster], by node index.
type Alloc struct {
	// Node indexes Cluster.Nodes; GPUs is the count (≥ 1).
	Node, GPUs int
}

// Cluster is the fixed shape of a cluster that [Cluster.Fit] and
// [Cluster.Admit] work on: its nodes in Slurm's node order (which Fit
// follows) and its GPU types. Build it once with [NewCluster]; the
// per-call state (which GPUs a starting job may take) is a slice aligned
// with Nodes.
type Cluster struct {
	// Nodes are the nodes; Idle is ignored.
	Nodes         []Node
	speed         []float64
	byType        map[string][]int
	types         []string // fastest first, then first appearance
	typesByWeight []string // lowest node weight first, then first appearance
	all           []int
	// FillInChoiceOrder makes Fit give each chosen node as many GPUs as
	// the job still needs, in the order cons_tres chose the nodes, as
	// Slurm 24.11 does (measured on its lab); false, each node in node
	// order gives all it has but one for each chosen node after it, as
	// 22.05 does. The nodes chosen are the same.
	FillInChoiceOrder bool
}

// NewCluster indexes nodes for Fit and Admit. speeds gives each type's
// relative speed (a type not listed runs at 1.0). Ties between types of
// equal speed keep the order of the types' first node in nodes.
func NewCluster(nodes []Node, speeds map[string]float64) *Cluster {
	c := &Cluster{Nodes: nodes, speed: make([]float64, len(nodes)), byType: map[string][]int{}}
	for i, n := range nodes {
		sp, ok := speeds[n.GPUType]
		if !ok {
			sp = 1
		}
		c.speed[i] = sp
		if _, seen := c.byType[n.GPUType]; !seen {
			c.types = append(c.types, n.GPUType)
		}
		c.byType[n.GPUType] = append(c.byType[n.GPUType], i)
		c.all = append(c.all, i)
	}
	c.typesByWeight = slices.Clone(c.types) // first appearance
	sp := func(t string) float64 { return c.speed[c.byType[t][0]] }
	slices.SortStableFunc(c.types, func(a, b string) int { return cmp.Compare(sp(b), sp(a)) })
	lightest := func(t string) int {
		w := c.Nodes[c.byType[t][0]].Weight
		for _, n := range c.byType[t] {
			w = min(w, c.Nodes[n].Weight)
		}
		return w
	}
	slices.SortStableFunc(c.typesByWeight, func(a, b string) int { return cmp.Compare(lightest(a), lightest(b)) })
	return c
}

// Types returns the cluster's GPU types, fastest first (ties in the order
// of each type's first node). The slice is the cluster's: do not change it.
func (c *Cluster) Types() []string { return c.types }

// TypeTotal is how many GPUs the cluster's nodes of GPU type t hold, busy
// or not (0 for a type it lacks).
func (c *Cluster) TypeTotal(t string) int {
	n := 0
	for _, i := range c.byType[t] {
		n += c.Nodes[i].Total
	}
	return n
}

// FitRule says which GPUs a job may start on.
type FitRule struct {
	// Types lists the GPU types it may run on; empty: any type. A rigid
	// job names the type it asked for (--gres=gpu:TYPE:N); an elastic job's
	// types come from its determinism level.
	Types []string
	// OneType keeps the whole allocation on one GPU type (d1: bit-identical
	// on one GPU type for the job's life). Without it, a job that fits in
	// no single type may span types (Slurm's untyped --gres=gpu:N, d2).
	OneType bool
}

func (r FitRule) allows(t string) bool { return len(r.Types) == 0 || slices.Contains(r.Types, t) }

// UsesAny reports whether a job under r may run on any of types (a set of
// GPU type names): always when r names no type.
func (r FitRule) UsesAny(types map[string]bool) bool {
	if len(r.Types) == 0 {
		return true
	}
	for _, t := range r.Types {
		if types[t] {
			return true
		}
	}
	return false
}

// Fit picks want GPUs from avail (per node of c, GPUs a starting job may
// take: idle ones and those of preemptible extra jobs) where Slurm's
// select/cons_tres puts a job asking for them with --gpus=want ([consTres]:
// nodes of lower Node.Weight first, then nodes with more free GPUs, runs
// of them in node order, a job that fits one node of the chosen run on the
// fullest of them that holds it; checked against the lab's slurmctld), on
// the nodes of the types rule allows. A rule.OneType job (d1: one GPU
// type, which on Slurm its --gres=gpu:TYPE:N names) is fitted on one
// allowed type at a time, in the order Slurm would reach their nodes
// (the type's lowest node weight, then its first node), and takes the
// first that holds it. It returns nil when no allocation exists. It reads
// avail and never changes it.
func (c *Cluster) Fit(avail []int, want int, rule FitRule) []Alloc {
	if want < 1 {
		return nil
	}
	return c.fitRule(avail, want, 0, rule)
}

// fitRule is consTres on the nodes rule allows: for a rule.OneType job one
// allowed type at a time, in c.typesByWeight order, the first that holds
// it.
func (c *Cluster) fitRule(avail []int, want, perNode int, rule FitRule) []Alloc {
	if rule.OneType {
		for _, typ := range c.typesByWeight {
			if rule.allows(typ) {
				if a := c.consTres(avail, want, perNode, c.byType[typ]); a != nil {
					return a
				}
			}
		}
		return nil
	}
	return c.consTres(avail, want, perNode, c.nodesOf(rule))
}

// nodesOf is the nodes of the types rule allows, in node order.
func (c *Cluster) nodesOf(rule FitRule) []int {
	switch len(rule.Types) {
	case 0:
		return c.all
	case 1:
		return c.byType[rule.Types[0]]
	}
	var out []int
	for _, t := range rule.Types {
		out = append(out, c.byType[t]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FitNodes picks nodes nodes with perNode GPUs each from avail (as for
// Fit) where Slurm's select/cons_tres puts a job asking for them with
// `-N nodes --gres=gpu:perNode` ([consTres] with a per-node request: only
// nodes with perNode GPUs free, nodes of lower Node.Weight first, runs of
// them in node order, a job needing one node on the one with the fewest
// free GPUs; checked against the lab's slurmctld), on the nodes of the
// types rule allows, one type at a time for rule.OneType as in Fit. It
// returns nil when no allocation exists, or nodes or perNode is below 1.
// It reads avail and never changes it.
func (c *Cluster) FitNodes(avail []int, nodes, perNode int, rule FitRule) []Alloc {
	if nodes < 1 || perNode < 1 {
		return nil
	}
	return c.fitRule(avail, nodes, perNode, rule)
}

// Donor is a running elastic job that may give up GPUs of its own (base)
// allocation so that a queued job can start (shrink-to-admit).
type Donor struct {
	// Base is its own allocation by node; Min the fewest GPUs it may keep.
	Base []Alloc
	Min  int
	// TimeLeft is its remaining run time at its current GPUs, in seconds.
	TimeLeft float64
	// Loss, when set, is how much later (seconds) the donor finishes if it
	// gives up gpus of its own GPUs now, the cost of its restarts included
	// (the daemon and the simulator: [BorrowLoss], the GPUs back when the
	// queued job's run ends); it switches Admit to the objective rule (see
	// [Cluster.Admit]). nil: the longest-time-left rule.
	Loss func(gpus int) float64
	// Delay, when set, is how much later (seconds) the donor ends if it
	// never gets those GPUs back ([ShrinkLoss]; admit.horizon "kept"):
	// the larger of it and Loss is what AdmitRequest.Horizon bounds; nil:
	// Loss bounds it (admit.horizon
	// "returned", the default since BENCHMARKS.md E51; "contested" sets it
	// for the donors [Pools.Kept] names).
	Delay func(gpus int) float64
	// RaisedEnd, when set, is how long from now (seconds) its time limit
	// ends once it has given gpus of its GPUs: the limit shrink-to-admit
	// raises it to (the daemon: [RaisedTimeLimit]; the simulator: its
	// remaining work at the smaller size, [RunTime]), never shorter for
	// more GPUs given. A donor holding base GPUs on a node another pending
	// job's reservation names gives only as many as leave that limit ending
	// by the earliest such start ([DonorGives]; objective rule only); nil:
	// such a donor gives none.
	RaisedEnd func(gpus int) float64
	// Allowed, when above 0, is how long from now (seconds) the donor may
	// end at the latest whatever the horizon ([AllowedEnd], admit.allowance;
	// objective rule only): past AdmitRequest.Horizon it gives as many GPUs
	// as keep TimeLeft + Kept(gpus) within Allowed. Kept is how much later
	// it ends if it never gets them back ([ShrinkLoss]); nil, or Allowed 0:
	// the horizon alone bounds it.
	Allowed float64
	Kept    func(gpus int) float64
}

// Admission is the planner's decision to start a queued job by shrinking
// donors: the job starts on Alloc once every Shrinks entry is applied.
type Admission struct {
	Alloc   []Alloc
	Shrinks []DonorShrink
}

// DonorShrink takes GPUs of donor Donor's base allocation on node Node.
// On Slurm this is `scontrol update JobId=… NumNodes=…` (whole nodes, see
// AdmitRequest.WholeNodes) plus a raised time limit ([RunTime] at the
// smaller size); the simulator applies it directly.
type DonorShrink struct {
	// Donor indexes AdmitRequest.Donors.
	Donor, Node, GPUs int
}

// AdmitRequest is what [Cluster.Admit] decides on.
type AdmitRequest struct {
	// Avail is, per node, the GPUs the job may take now without shrinking
	// anyone (as for Fit).
	Avail []int
	// Want is the job's GPU count; Rule where it may run.
	Want int
	Rule FitRule
	// PerNode, when above 0, is the GPUs the job asks on each of Want /
	// PerNode nodes (`-N --gres=gpu:PerNode`, placed by FitNodes); 0: it
	// asks Want GPUs anywhere (--gpus=Want, placed by Fit).
	PerNode int
	// Work is the queued job's run time at Want GPUs, in seconds: only a
	// donor with more time left yields (shortest remaining time first).
	Work float64
	// Donors are the running elastic jobs, in a fixed order (ties in time
	// left go to the earlier one).
	Donors []Donor
	// Reserved reports, for a node, whether the planned start
	// (reservation) of another pending job names it, and the earliest
	// such start in seconds from now; nil: none is reserved. A donor
	// holding base GPUs there gives only what leaves its raised time limit
	// ending by then ([Donor.RaisedEnd], [DonorGives]).
	Reserved func(node int) (start float64, ok bool)
	// JobReserved is Reserved as the job's own placement must respect
	// it: the job takes GPUs on such a node only when its Limit ends by
	// that start ([TakesReserved]); nil: Reserved. The simulator leaves
	// the queue head's reservation out, since its backfill pass keeps the
	// job off the GPUs the head needs by count, finer than by node.
	JobReserved func(node int) (start float64, ok bool)
	// Limit is the longest the job may hold what it takes, in seconds (its
	// time limit at Want GPUs); 0: not known, it takes nothing on a
	// reserved node. StartDelay is how much later than now it may start
	// (seconds): Slurm starts a job waiting its turn at its backfill
	// scheduler's next pass, up to bf_interval later, so the job must end
	// by a reservation's start even when started then.
	Limit, StartDelay float64
	// WholeNodes lets a donor give up only all of its GPUs on a node, and
	// never its last node (Slurm shrinks a running job by nodes:
	// scontrol update NumNodes=).
	WholeNodes bool
	// Gain is how much sooner (seconds) the queued job finishes when it
	// starts now instead of waiting: its wait, e.g. its reserved start −
	// now (a lower bound for a job behind the queue head). Used with donors'
	// Loss: the admission must cut the sum of completion times.
	Gain float64
	// Horizon bounds, with donors' Loss, the time left (seconds) a donor
	// may end with after its shrink: the latest expected end among the
	// running jobs, so shrink-to-admit never lengthens the longest job and
	// with it the makespan. Admit raises it to Gain + Work, when the
	// queued job would end by waiting, which sets the makespan just as
	// well. 0: no bound.
	Horizon float64
}

// Place places a job asking gpus GPUs on avail as Slurm would: FitNodes
// with gpus / perNode nodes of perNode GPUs for a per-node request
// (perNode > 0; nil when gpus is not a multiple of perNode), else Fit.
func (c *Cluster) Place(avail []int, gpus, perNode int, rule FitRule) []Alloc {
	if perNode > 0 {
		if gpus%perNode != 0 {
			return nil
		}
		return c.FitNodes(avail, gpus/perNode, perNode, rule)
	}
	return c.Fit(avail, gpus, rule)
}

// StartsFirst reports whether a queued job ranked ahead of one being
// admitted, asking gpus GPUs (perNode per node when above 0, as Place)
// under rule, fits on after (per node: the idle GPUs plus those the
// admission frees) and not on before (the idle GPUs alone). Slurm starts
// pending jobs in priority order, so such a job would start on the freed
// GPUs instead of the admitted one: AdmitOnNodes refuses that admission,
// and the simulator applies the same rule. It reads before and after and
// never changes them.
func (c *Cluster) StartsFirst(before, after []int, gpus, perNode int, rule FitRule) bool {
	return c.Place(after, gpus, perNode, rule) != nil && c.Place(before, gpus, perNode, rule) == nil
}

// Admit decides whether the queued job of q can start now at q.Want GPUs
// by shrinking the base allocations of donors, never below their minimum
// (shrink-to-admit; EasyScale's and Pollux's schedulers reallocate on
// arrivals, Pollux OSDI'21 §4.2). ok is false, with nothing to apply, when
// no such admission exists. Pure: it changes none of its inputs.
//
// With donors' Loss set (the daemon's and the simulator's policy), the
// rule is the planner's one objective, the sum of expected completion
// times: donors yield in order of least loss per GPU freed, each only as
// far as it still ends within q.Horizon, or, counted as never getting the
// GPUs back, within its own Donor.Allowed (admit.allowance) (and, on a
// node another job plans to start on, with its raised limit ending by
// then: q.Reserved), until Fit
// finds an allocation in q.Avail plus the GPUs they free, less the nodes
// q.JobReserved keeps the job off; only GPUs on the allocation's nodes are
// taken, least loss first, and the admission stands only when the donors'
// summed loss is below q.Gain, the wait the queued job saves. Without Loss
// (the rule before issue 17, kept for the simulator's Legacy mode) donors
// with more time left than q.Work yield, longest first.
func (c *Cluster) Admit(q AdmitRequest) (a Admission, ok bool) {
	objective := slices.ContainsFunc(q.Donors, func(d Donor) bool { return d.Loss != nil })
	if objective && q.Horizon > 0 {
		// Waiting, the queued job itself ends at Gain + Work at the
		// earliest: a donor ending before that does not set the makespan.
		q.Horizon = max(q.Horizon, q.Gain+q.Work)
	}
	var donors []int
	var limit []int      // objective: the most GPUs each donor may give
	var perGPU []float64 // objective: its loss per GPU given
	if objective {
		limit, perGPU = make([]int, len(q.Donors)), make([]float64, len(q.Donors))
	}
	for i, d := range q.Donors {
		if math.IsNaN(d.TimeLeft) || sum(d.Base) <= d.Min {
			continue
		}
		reservedAt, onReserved := EarliestReserved(d.Base, q.Reserved)
		if onReserved && (!objective || d.RaisedEnd == nil) {
			continue
		}
		if !objective {
			if d.TimeLeft <= q.Work {
				continue
			}
			donors = append(donors, i)
			continue
		}
		if d.Loss == nil {
			continue
		}
		delay := d.Loss
		if d.Delay != nil {
			// never below Loss: ShrinkLoss charges one restart and
			// BorrowLoss two, so a kept count must not bound a donor less
			delay = func(g int) float64 { return max(d.Delay(g), d.Loss(g)) }
		}
		most := sum(d.Base) - d.Min
		if q.Horizon > 0 {
			m := mostWithin(d.TimeLeft, most, delay, q.Horizon)
			if d.Kept != nil && d.Allowed > 0 {
				kept := func(g int) float64 { return max(d.Kept(g), d.Loss(g)) } // as Delay: never below Loss
				m = max(m, mostUnder(d.TimeLeft, most, kept, d.Allowed))
			}
			most = m
		}
		if onReserved {
			most = DonorGives(most, reservedAt, d.RaisedEnd)
		}
		if most <= 0 {
			continue
		}
		limit[i], perGPU[i] = most, d.Loss(most)/float64(most)
		donors = append(donors, i)
	}
	if len(donors) == 0 {
		return a, false
	}
	if objective {
		slices.SortStableFunc(donors, func(x, y int) int { return cmp.Compare(perGPU[x], perGPU[y]) })
	} else {
		slices.SortStableFunc(donors, func(x, y int) int { return cmp.Compare(q.Donors[y].TimeLeft, q.Donors[x].TimeLeft) })
	}
	avail := q.Avail
	jobReserved := q.JobReserved
	if jobReserved == nil {
		jobReserved = q.Reserved
	}
	if jobReserved != nil {
		avail = slices.Clone(q.Avail)
		for n := range avail {
			if !TakesReserved(n, q.Limit+q.StartDelay, jobReserved) {
				avail[n] = 0
			}
		}
	}
	tent := slices.Clone(avail)
	total := 0
	for _, v := range avail {
		total += v
	}
	var gives []DonorShrink // what each donor can free, node by node
	for _, di := range donors {
		d := q.Donors[di]
		if objective {
			d.Min = max(d.Min, sum(d.Base)-limit[di])
		}
		for _, g := range gifts(d, q.WholeNodes) {
			if !TakesReserved(g.Node, q.Limit+q.StartDelay, jobReserved) {
				continue // freed, but not for this job: another job plans to start there before it ends
			}
			gives = append(gives, DonorShrink{Donor: di, Node: g.Node, GPUs: g.GPUs})
			tent[g.Node] += g.GPUs
			total += g.GPUs
		}
		if total < q.Want {
			continue
		}
		if a.Alloc = c.Place(tent, q.Want, q.PerNode, q.Rule); a.Alloc != nil {
			break
		}
	}
	if a.Alloc == nil {
		return Admission{}, false
	}
	taken := map[int]int{} // few entries: the donors on the allocation's nodes
	for _, al := range a.Alloc {
		short := al.GPUs - avail[al.Node]
		for _, g := range gives {
			if short <= 0 {
				break
			}
			if g.Node != al.Node {
				continue
			}
			take := min(short, g.GPUs)
			if q.WholeNodes {
				take = g.GPUs
			}
			a.Shrinks = append(a.Shrinks, DonorShrink{Donor: g.Donor, Node: g.Node, GPUs: take})
			taken[g.Donor] += take
			short -= take
		}
	}
	if objective {
		loss := 0.0
		for di, g := range taken {
			loss += q.Donors[di].Loss(g)
		}
		if !(loss < q.Gain) {
			return Admission{}, false
		}
	}
	return a, true
}

// mostWithin is the most GPUs, up to most, a donor with timeLeft seconds
// left may give while timeLeft + delay(gpus) stays within bound (seconds
// from now); delay grows with the GPUs given.
func mostWithin(timeLeft float64, most int, delay func(int) float64, bound float64) int {
	if timeLeft+delay(most) <= bound {
		return most
	}
	lo, hi := 0, most
	for lo < hi {
		if mid := (lo + hi + 1) / 2; timeLeft+delay(mid) <= bound {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// mostUnder is mostWithin for a delay that need not grow with the GPUs
// given (ShrinkLoss: logical workers round onto the GPUs left, so giving
// one GPU can cost more than giving two): the most GPUs g, up to most,
// such that giving any count up to g keeps timeLeft + delay within bound.
// It asks delay of each count in turn (a donor holds few GPUs).
func mostUnder(timeLeft float64, most int, delay func(int) float64, bound float64) int {
	for g := 1; g <= most; g++ {
		if !(timeLeft+delay(g) <= bound) {
			return g - 1
		}
	}
	return most
}

// BorrowLoss is how much later (seconds) a job with work seconds of work
// left finishes when GPUs from shrink to GPUs to for borrow seconds and are
// then given back: the work it misses meanwhile, borrow · (1 −
// Throughput(to)/Throughput(from)), over its rate, but never more than
// [ShrinkLoss] without the restarts (never given back), plus two restarts
// (the shrink and the grow back). The GPUs a queued job borrows serve it
// for its run time only; after that they go back to the pool, so charging
// the donor's whole remaining run (ShrinkLoss) would count the same GPUs
// against every later admission too. +Inf when to has no usable GPU.
func BorrowLoss(m Model, from, to []SpeedCount, work, borrow, restart float64) float64 {
	tpFrom, _ := m.Throughput(from)
	tpTo, _ := m.Throughput(to)
	if tpTo <= 0 || tpFrom <= 0 {
		return math.Inf(1)
	}
	never := RunTime(m, to, work) - RunTime(m, from, work)
	return min(max(borrow, 0)*(1-tpTo/tpFrom), never) + 2*restart
}

// ShrinkLoss is how much later (seconds) a job with work seconds of work
// left (measured at m.RefGPUs reference GPUs) finishes when it moves from
// GPUs from to GPUs to and pays restart seconds for the move:
// RunTime(to) − RunTime(from) + restart. It assumes the job never grows
// back, so it bounds the loss from above. +Inf when to has no usable GPU.
func ShrinkLoss(m Model, from, to []SpeedCount, work, restart float64) float64 {
	return RunTime(m, to, work) - RunTime(m, from, work) + restart
}

// gifts lists what donor d can give up, node by node in base order, never
// below its minimum (whole nodes only, never the last, with wholeNodes).
func gifts(d Donor, wholeNodes bool) []Alloc {
	left := sum(d.Base) - d.Min
	var out []Alloc
	for i, b := range d.Base {
		g := min(b.GPUs, left)
		if wholeNodes && (g < b.GPUs || i == len(d.Base)-1 && len(out) == i) {
			continue
		}
		if g > 0 {
			out = append(out, Alloc{b.Node, g})
			left -= g
		}
	}
	return out
}

func sum(a []Alloc) int {
	n := 0
	for _, x := range a {
		n += x.GPUs
	}
	return n
}

// RunTime is how long work seconds of a job's work (measured at
// m.RefGPUs reference GPUs) take on gpus, in seconds: work · RefGPUs /
// Throughput(gpus). It is +Inf on no usable GPU. The simulator sets time
// limits with it, and a shrunk job's new time limit is now + RunTime at its
// smaller size.
func RunTime(m Model, gpus []SpeedCount, work float64) float64 {
	tp, _ := m.Throughput(gpus)
	if tp <= 0 {
		return math.Inf(1)
	}
	return work * float64(m.RefGPUs) / tp
}
