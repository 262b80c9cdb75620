package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// AdmitNode is one node a queued job could start on, as [AdmitOnNodes]
// and [StartSmallOnNodes] see it.
type AdmitNode struct {
	Name, GPUType string
	// Total GPUs; Free are those a starting job may take now: idle ones
	// and those of the daemon's running extra jobs (Slurm preempts the
	// extra jobs' partition for it), at most Total.
	Total, Free int
	// Weight is the node's Slurm scheduling weight (Node.Weight: lower
	// first; 0 and equal weights leave free GPUs and node order to decide).
	Weight int `json:",omitempty"`
}

// NodeAdmitQueued is a pending job waiting for resources, as
// shrink-to-admit sees it.
type NodeAdmitQueued struct {
	ID string
	// PeerMedian, under the objective (NodeAdmitInput.Objective), is the
	// median time left of the jobs running or waiting beside it
	// ([Peers.MedianFor] its owner): a queued job whose time limit is
	// longer than [WithinPeerBound] allows is not admitted. 0: no bound
	// (a recording made before it existed has none).
	PeerMedian time.Duration `json:",omitempty"`
	// Refused says why the daemon cannot act for it ("" when it can): its
	// request or time limit could not be read, or where it may run (its
	// --exclude, --constraint, partition) is unknown or unchecked.
	Refused string
	// Nodes, GPUsPerNode, GPUType ("": any) and Limit are what it asks
	// (squeue NumNodes, TRES per node, TimeLimit): it starts only in
	// exactly that layout ([Cluster.FitNodes]), unless PerJob.
	Nodes, GPUsPerNode int
	GPUType            string
	Limit              time.Duration
	// PerJob: it asks its Nodes × GPUsPerNode GPUs per job (--gpus=N,
	// squeue's TRES per job), which Slurm may spread over any nodes
	// ([Cluster.Fit]).
	PerJob bool `json:",omitempty"`
	// OnlyNodes is its --nodelist (none: any node); Allowed are the nodes
	// it may run on (its partitions, not its --exclude, within OnlyNodes).
	OnlyNodes, Allowed []string
	// Reserved are the nodes other pending jobs' reservations name
	// (squeue --start): a donor holding one shrinks only as far as leaves
	// its raised time limit ending by the earliest such start (later, it
	// would move the reservation: [DonorGives]), and it goes to one only
	// when its Limit ends by then ([TakesReserved]).
	Reserved []ReservedNode
	// ReservedStart is when Slurm's backfill plans to start it (squeue
	// --start), Unix seconds; 0: none planned or unreadable. Under the
	// objective, its wait ReservedStart − Now is what an admission gains.
	ReservedStart int64
	// User is its owner ("": unknown). Running jobs of the same user never
	// widen the horizon its admission is bounded by ([HorizonFor]).
	User string `json:",omitempty"`
}

// ReservedNode is a node that another pending job's reservation names
// (squeue --start's SCHEDNODES).
type ReservedNode struct {
	Node string
	// Start is the earliest start among those jobs, Unix seconds (0: not
	// known, nothing ends by it).
	Start int64 `json:",omitempty"`
}

// NodeAdmitDonor is a running job that might give up whole nodes.
type NodeAdmitDonor struct {
	ID    string
	Facts DonorFacts
	// Unreadable: its start or time limit could not be read.
	Unreadable bool
	// Nodes is its own allocation in Slurm's node-list order: `scontrol
	// update NumNodes=N` keeps the first N nodes and releases the others.
	Nodes []NodeGPUs
	// MinNodes is its request's minimum; OrigNodes its node count before
	// its first shrink-to-admit (the daemon's store), for [KeepAfterLoss].
	MinNodes, OrigNodes int
	// Elapsed is how long it has run, TimeLeft how long until its time
	// limit ends, Limit its time limit; Step and TotalSteps its runtime's
	// progress report (0, 0: none), for [RemainingAtCurrentSize].
	Elapsed, TimeLeft, Limit time.Duration
	Step, TotalSteps         int
	// LimitRaised is how much shrink-to-admit has raised its time limit
	// (the raises the daemon's store records, at most its limit; 0: never
	// shrunk). Its end counts in the horizon
	// without it: a raise sized for never getting the nodes back must not
	// let the next admission lengthen another job (a tester's finding: one
	// job's raised limit let the longest job yield, cycle after cycle).
	LimitRaised time.Duration `json:",omitempty"`
	// LogicalWorkers is its request's logical worker count (es-req lw=;
	// 0: none declared, then its GPUs now), for its throughput model under
	// the objective.
	LogicalWorkers int
	// Cap is the longest limit it may be given (its partitions' MaxTime):
	// it gives up no more nodes than leave its raised limit within it.
	Cap LimitCap `json:",omitzero"`
	// User is its owner ("": unknown), for [HorizonFor].
	User string `json:",omitempty"`
}

// NodeAdmitInput is one cycle's shrink-to-admit question, in plain values
// ([AdmitOnNodes]). A daemon recording carries it as JSON (durations in
// nanoseconds, as time.Duration encodes).
type NodeAdmitInput struct {
	// Now is the cycle's time, Unix seconds, against which the queued jobs'
	// Reserved starts count (0: not known; reserved nodes are then kept
	// off whatever the job's limit).
	Now int64 `json:",omitempty"`
	// StartDelay is how much later than Now an admitted job may start
	// ([AdmitRequest].StartDelay: Slurm's bf_interval, plus slack).
	StartDelay time.Duration `json:",omitempty"`
	// Nodes are the nodes the daemon manages and Slurm may start jobs on.
	Nodes []AdmitNode
	// Speeds are the site's relative speeds by GPU type (Cluster.Fit
	// prefers faster types).
	Speeds map[string]float64
	// Queue lists the jobs waiting for resources in partitions where
	// shrink-to-admit is on, in [QueueOrder].
	Queue []NodeAdmitQueued
	// Donors lists the running elastic jobs, in a fixed order (ties in time
	// left go to the earlier one).
	Donors []NodeAdmitDonor
	// MaxLoss is admit.max_loss; TimeLimit how a donor's limit is raised.
	MaxLoss   float64
	TimeLimit TimeLimitRule
	// Objective, when set, decides by the planner's one objective
	// (admit.rule "objective", see [AdmitOnNodes]); nil: the
	// longest-time-left rule (admit.rule "longest-left").
	Objective *NodeObjective `json:",omitempty"`
}

// NodeObjective is what the one objective needs beyond a
// [NodeAdmitInput]'s nodes, queue and donors.
type NodeObjective struct {
	// Now is the cycle's time, Unix seconds.
	Now int64
	// RescaleCost is the progress one resize costs a job (rescale_cost):
	// a shrink now and, when the lent nodes come back, a grow.
	RescaleCost time.Duration
	// Horizon is the longest time left (time limit end − now) of a running
	// job that is not in Donors, whoever owns it (a recording made before
	// Others existed has only this); the remaining times of Donors (every
	// running elastic job) are added by AdmitOnNodes. No shrink may make a
	// donor end after the latest of them: the makespan never grows.
	Horizon time.Duration
	// Others are the running jobs not in Donors, each with its owner and
	// time left: a queued job's horizon counts those of other users only
	// ([HorizonFor]).
	Others []JobLeft `json:",omitempty"`
	// Drain, when set, raises a queued job's horizon to the time the
	// cluster needs at the least to run the work of other users' running
	// and pending jobs ([Drain], drain_horizon); nil: no such bound (a
	// recording made before it existed has none).
	Drain *Drain `json:",omitempty"`
	// AdmitHorizon (admit.horizon) is how a donor's end counts against the
	// horizon: [HorizonKept], as if it never got its nodes back (its Delay,
	// [ShrinkLoss]); [HorizonReturned] or "" (a recording made before
	// E56), as if it gets them back when the queued job's run ends (its
	// Loss, [BorrowLoss]; the default); [HorizonContested], kept for the
	// donors [Pools.Kept] names among the running elastic jobs (Donors,
	// with the GPU types of their nodes and their time left without a raise
	// of their limit, as for the horizon) and the queued jobs (Queue, with
	// their GPU types; those Refused left out), returned for the others.
	AdmitHorizon string `json:",omitempty"`
	// Allowance (admit.allowance, ≥ 0) lets a donor give nodes past the
	// horizon while, counted as never getting them back ([ShrinkLoss]), it
	// still ends within [AllowedEnd] of its run at its start allocation
	// ([StartRun]: its time limit before its first shrink, Limit −
	// LimitRaised, or its progress report's pace when that is less) and
	// its Elapsed; 0 (a recording made
	// before it existed): the horizon alone bounds it.
	Allowance float64 `json:",omitempty"`
}

// JobLeft is a running job's owner ("": unknown) and its time left.
type JobLeft struct {
	User string
	Left time.Duration
}

// HorizonFor is the horizon that bounds what running jobs may be made to
// give up for a job of user: the longest time left among jobs, those of
// user left out. A user's own long job must not let the daemon make
// another user's job end later: with it counted, anyone could loosen the
// bound for their queued job by starting a long placeholder (a tester's
// finding). An unknown user ("") on either side counts.
func HorizonFor(user string, jobs []JobLeft) time.Duration {
	var most time.Duration
	for _, j := range jobs {
		if user == "" || j.User != user {
			most = max(most, j.Left)
		}
	}
	return most
}

// NodeShrink is one donor of a [NodeAdmission]: job Job goes from
// FromNodes to its first ToNodes nodes, releasing Released, and its time
// limit from OldLimit to NewLimit ([RaisedTimeLimit]: Remaining at
// FromNodes is AtSmall at ToNodes).
type NodeShrink struct {
	Job                           string
	OrigNodes, FromNodes, ToNodes int
	Released                      []string
	OldLimit, NewLimit            time.Duration
	Remaining, AtSmall            time.Duration
}

// NodeAdmission is the decision to start queued job Queued on Alloc once
// every Shrinks entry (by job id) is applied.
type NodeAdmission struct {
	Queued  string
	Alloc   []NodeGPUs
	Shrinks []NodeShrink
}

// donorCand is a donor that passed the rules of every queued job alike.
type donorCand struct {
	d         *NodeAdmitDonor
	keep      int // nodes
	perNode   int
	base      []Alloc // last node first
	remaining time.Duration
}

// raisedEnd is c's [Donor.RaisedEnd]: how long from now its time limit
// ends once it has given g GPUs, as whole nodes from the end of its node
// list (c.base's order), raised by [RaisedTimeLimit] under rule.
func (c donorCand) raisedEnd(rule TimeLimitRule) func(g int) float64 {
	from := len(c.d.Nodes)
	return func(g int) float64 {
		given := 0
		for _, b := range c.base {
			if g < b.GPUs {
				break
			}
			g -= b.GPUs
			given++
		}
		if given == 0 {
			return (c.d.Limit - c.d.Elapsed).Seconds()
		}
		limit, _ := RaisedTimeLimit(c.d.Limit, c.d.Elapsed, c.remaining, from, from-given, rule)
		return (limit - c.d.Elapsed).Seconds()
	}
}

// AdmitOnNodes decides shrink-to-admit by whole nodes, as Slurm applies
// it: the first queued job of in.Queue that [Cluster.Admit] (with
// WholeNodes) can start now by shrinking donors, at most one per cycle.
// Donors are the jobs [NotDonor] allows, with a readable start and time
// limit, above the fewest nodes they may keep ([KeepAfterLoss] of
// OrigNodes, never below MinNodes), on nodes of in.Nodes, and with their
// remaining time ([RemainingAtCurrentSize]) as the time left Admit
// compares with the queued job's limit. Because NumNodes= releases the
// last nodes of a job's node list, each donor's shrink is then turned into
// "keep the first N nodes", and the queued job must fit on exactly the
// nodes that releases plus the free ones, in the layout it asked for (its
// node count, its GPUs per node), where Slurm would place it
// ([Cluster.FitNodes], with the nodes' weights), else the job is passed
// over. Each
// donor's time limit is raised by [RaisedTimeLimit]. why lists, per queued
// job passed over, the reason (for the daemon's debug log). Pure.
func AdmitOnNodes(in NodeAdmitInput) (a NodeAdmission, ok bool, why []string) {
	if len(in.Nodes) == 0 {
		return a, false, nil
	}
	nodes := make([]Node, len(in.Nodes))
	idx := make(map[string]int, len(in.Nodes))
	baseAvail := make([]int, len(in.Nodes))
	for i, n := range in.Nodes {
		nodes[i] = Node{Name: n.Name, GPUType: n.GPUType, Total: n.Total, Weight: n.Weight}
		idx[n.Name] = i
		baseAvail[i] = n.Free
	}
	cluster := NewCluster(nodes, in.Speeds)
	cands, skipped := admitDonors(in, idx)
	kept := keptFor(in, idx, cands)
	for k, q := range in.Queue {
		if q.Refused != "" {
			why = append(why, "queued job "+q.ID+": "+q.Refused)
			continue
		}
		a, no := admitOne(in, cluster, idx, baseAvail, cands, kept, skipped, q)
		if no == "" {
			no = takenByAhead(in, cluster, idx, baseAvail, a, in.Queue[:k])
		}
		if no == "" {
			return a, true, why
		}
		why = append(why, "queued job "+q.ID+": "+no)
	}
	return NodeAdmission{}, false, why
}

// takenByAhead says which queued job ranked ahead of the admitted one
// would start on the nodes admission a frees instead of it ("": none).
// Slurm starts pending jobs in priority order: a job ahead that fits on
// the idle GPUs plus the released nodes (its layout, GPU type and allowed
// nodes, all nodes when they were not read), and did not fit on the idle
// GPUs alone, takes them first (a tester saw a job admitted for a
// lower-ranked one start on the freed node, and that one wait 13 min past
// its planned start). A job ahead whose request could not be read is not
// counted.
func takenByAhead(in NodeAdmitInput, cluster *Cluster, idx map[string]int, baseAvail []int, a NodeAdmission, ahead []NodeAdmitQueued) string {
	after := slices.Clone(baseAvail)
	for _, sh := range a.Shrinks {
		di := slices.IndexFunc(in.Donors, func(d NodeAdmitDonor) bool { return d.ID == sh.Job })
		for _, name := range sh.Released {
			i, ok := idx[name]
			if !ok || di < 0 {
				continue
			}
			for _, b := range in.Donors[di].Nodes {
				if b.Node == name {
					after[i] = min(after[i]+b.GPUs, cluster.Nodes[i].Total)
				}
			}
		}
	}
	for _, p := range ahead {
		if p.Nodes < 1 || p.GPUsPerNode < 1 {
			continue
		}
		mask := func(avail []int) []int {
			out := slices.Clone(avail)
			if len(p.Allowed) == 0 {
				return out
			}
			for i := range out {
				if !slices.Contains(p.Allowed, cluster.Nodes[i].Name) {
					out[i] = 0
				}
			}
			return out
		}
		rule := FitRule{}
		if p.GPUType != "" {
			rule.Types = []string{p.GPUType}
		}
		want, perNode := p.Nodes*p.GPUsPerNode, p.GPUsPerNode
		if p.PerJob {
			perNode = 0
		}
		if cluster.StartsFirst(mask(baseAvail), mask(after), want, perNode, rule) {
			return "job " + p.ID + ", ranked ahead of it, would start on the nodes freed for it (Slurm starts jobs in priority order)"
		}
	}
	return ""
}

// admitDonors applies the rules that hold for every queued job alike; the
// reasons for the others are returned as skipped.
func admitDonors(in NodeAdmitInput, idx map[string]int) (cands []donorCand, skipped []string) {
	for i := range in.Donors {
		d := &in.Donors[i]
		if no := NotDonor(d.Facts); no != "" {
			skipped = append(skipped, d.ID+": "+no)
			continue
		}
		if d.Unreadable {
			skipped = append(skipped, d.ID+": start, end or time limit not readable")
			continue
		}
		keep := KeepAfterLoss(d.OrigNodes, d.MinNodes, in.MaxLoss)
		if keep >= len(d.Nodes) {
			skipped = append(skipped, fmt.Sprintf("%s: at the fewest nodes it may keep (%d: its minimum, admit.max_loss of %d)", d.ID, keep, d.OrigNodes))
			continue
		}
		remaining := RemainingAtCurrentSize(d.TimeLeft, d.Elapsed, d.Step, d.TotalSteps)
		capped, no := capKeep(d, keep, remaining, in.TimeLimit)
		if no != "" {
			skipped = append(skipped, d.ID+": "+no)
			continue
		}
		keep = capped
		gpus := 0
		for _, n := range d.Nodes {
			gpus += n.GPUs
		}
		c := donorCand{d: d, keep: keep, perNode: gpus / len(d.Nodes), remaining: remaining}
		known := true
		for i := len(d.Nodes) - 1; i >= 0; i-- { // last node first: NumNodes= releases from the end
			n, ok := idx[d.Nodes[i].Node]
			if !ok {
				known = false
				break
			}
			c.base = append(c.base, Alloc{Node: n, GPUs: d.Nodes[i].GPUs})
		}
		if !known || c.perNode < 1 {
			skipped = append(skipped, d.ID+": a node unknown to the planner")
			continue
		}
		cands = append(cands, c)
	}
	return cands, skipped
}

// capKeep is the fewest nodes, at least keep, donor d may go to with its
// raised limit ([RaisedTimeLimit] of remaining) within d.Cap; no says why
// it may give up none ("" when it may). The raised limit only grows as it
// gives up more nodes.
func capKeep(d *NodeAdmitDonor, keep int, remaining time.Duration, rule TimeLimitRule) (int, string) {
	if d.Cap == (LimitCap{}) {
		return keep, ""
	}
	from := len(d.Nodes)
	for to := max(keep, 1); to < from; to++ {
		limit, _ := RaisedTimeLimit(d.Limit, d.Elapsed, remaining, from, to, rule)
		if d.Cap.Refuses(limit) == "" {
			return to, ""
		}
	}
	limit, _ := RaisedTimeLimit(d.Limit, d.Elapsed, remaining, from, from-1, rule)
	return from, fmt.Sprintf("it gives up no node: at %d nodes %s", from-1, d.Cap.Refuses(limit))
}

// keptRule is how admitOne counts each donor's end against the horizon
// (NodeObjective.AdmitHorizon, [KeepingFor]), at[c] each candidate's index
// among the running jobs the Keeping indexed (-1: none).
type keptRule struct {
	keeping Keeping
	at      []int
}

// keptFor is in's keptRule for cands.
func keptFor(in NodeAdmitInput, idx map[string]int, cands []donorCand) keptRule {
	o := in.Objective
	if o == nil || len(cands) == 0 {
		return keptRule{}
	}
	at := map[*NodeAdmitDonor]int{} // a donor's index in running
	pools := func() *Pools {
		var running []PoolJob
		for i := range in.Donors {
			d := &in.Donors[i]
			if d.Unreadable {
				continue
			}
			left := max(max(d.TimeLeft, 0)-d.LimitRaised, 0) // its end as its owner set it, as for the horizon
			job := PoolJob{User: d.User, TimeLeft: RemainingAtCurrentSize(left, d.Elapsed, d.Step, d.TotalSteps).Seconds()}
			for _, n := range d.Nodes {
				if k, ok := idx[n.Node]; ok && !slices.Contains(job.Types, in.Nodes[k].GPUType) {
					job.Types = append(job.Types, in.Nodes[k].GPUType)
				}
			}
			at[d] = len(running)
			running = append(running, job)
		}
		var queued []FitRule
		for _, q := range in.Queue {
			switch {
			case q.Refused != "": // its request is not read: it contests no pool
			case q.GPUType != "":
				queued = append(queued, FitRule{Types: []string{q.GPUType}})
			default:
				queued = append(queued, FitRule{})
			}
		}
		return NewPools(running, queued)
	}
	r := keptRule{keeping: KeepingFor(o.AdmitHorizon, pools), at: make([]int, len(cands))}
	for i, c := range cands {
		if j, ok := at[c.d]; ok {
			r.at[i] = j
		} else {
			r.at[i] = -1
		}
	}
	return r
}

// kept reports whether candidate i's end counts as kept when a job of user
// is admitted.
func (r keptRule) kept(i int, user string) bool {
	return r.keeping.Kept(r.at[i], user)
}

// admitOne decides for queued job q; no says why it cannot be admitted
// ("" when it can).
func admitOne(in NodeAdmitInput, cluster *Cluster, idx map[string]int, baseAvail []int, cands []donorCand, kept keptRule,
	skipped []string, q NodeAdmitQueued) (a NodeAdmission, no string) {
	fromNow := func(at int64) float64 { // nothing ends by an unknown start
		if at > 0 && in.Now > 0 {
			return float64(at - in.Now)
		}
		return 0
	}
	reserved := map[int]float64{} // by node index: the earliest start of another job there, seconds from now
	for _, r := range q.Reserved {
		if i, ok := idx[r.Node]; ok {
			reserved[i] = fromNow(r.Start)
		}
	}
	for _, n := range q.OnlyNodes {
		if _, ok := idx[n]; !ok {
			return a, "it asks for node " + n + ", which this daemon does not manage"
		}
	}
	allowed := map[int]bool{} // the nodes the queued job may run on (partition, --exclude, --nodelist)
	for _, name := range q.Allowed {
		if i, ok := idx[name]; ok {
			allowed[i] = true
		}
	}
	if in.Objective != nil && !WithinPeerBound(q.Limit.Seconds(), q.PeerMedian.Seconds()) {
		return a, fmt.Sprintf("its time limit %v is over %g × %v, the median time left of the jobs running or waiting "+
			"(a job far longer than most, started ahead of its turn, holds the nodes while the short jobs arriving wait)",
			q.Limit, StartSmallPeerFactor, q.PeerMedian.Round(time.Second))
	}
	reservedFn := func(n int) (float64, bool) { at, ok := reserved[n]; return at, ok }
	avail := slices.Clone(baseAvail) // Slurm starts it nowhere else, before or after the shrinks
	var keptOff []string             // allowed nodes it may not take: a planned start there comes first
	for i := range avail {
		if !allowed[i] {
			avail[i] = 0
		} else if !TakesReserved(i, (q.Limit + in.StartDelay).Seconds(), reservedFn) {
			avail[i] = 0
			keptOff = append(keptOff, fmt.Sprintf("%s (in %v)", cluster.Nodes[i].Name, time.Duration(reserved[i])*time.Second))
		}
	}
	skipped = slices.Clone(skipped)
	donors := make([]Donor, len(cands))
	for i, c := range cands {
		if in.Objective == nil && c.remaining.Seconds() <= q.Limit.Seconds() {
			skipped = append(skipped, fmt.Sprintf("%s: %v left, less than the queued job's %v", c.d.ID, c.remaining.Round(time.Second), q.Limit))
		}
		donors[i] = Donor{Base: c.base, Min: c.keep * c.perNode, TimeLeft: c.remaining.Seconds(), RaisedEnd: c.raisedEnd(in.TimeLimit)}
	}
	if len(donors) == 0 {
		if len(skipped) == 0 {
			return a, "no donor: no running elastic job may give up a node"
		}
		return a, "no donor: " + strings.Join(skipped, "; ")
	}
	var gain, horizon float64
	if o := in.Objective; o != nil {
		if gain = float64(q.ReservedStart - o.Now); q.ReservedStart == 0 || gain <= 0 {
			return a, "no planned start in the future (squeue --start) to weigh the donors' loss against"
		}
		running := slices.Clone(o.Others)
		for _, d := range in.Donors { // every running elastic job, donor or not
			if !d.Unreadable {
				left := max(max(d.TimeLeft, 0)-d.LimitRaised, 0) // its end as its owner set it
				running = append(running, JobLeft{User: d.User, Left: RemainingAtCurrentSize(left, d.Elapsed, d.Step, d.TotalSteps)})
			}
		}
		horizon = max(o.Horizon, HorizonFor(q.User, running)).Seconds()
		horizon = max(horizon, o.Drain.Bound(q.User))
		for i, c := range cands {
			var delay func(int) float64
			donors[i].Loss, delay = nodeDonorLoss(c, in, cluster, q.Limit.Seconds(), o.RescaleCost.Seconds())
			if kept.kept(i, q.User) {
				donors[i].Delay = delay
			}
			if a := AllowedEnd(o.Allowance, StartRun(c.d.Limit, c.d.LimitRaised, c.d.Elapsed, c.d.Step, c.d.TotalSteps), c.d.Elapsed.Seconds()); a > 0 {
				donors[i].Allowed, donors[i].Kept = a, delay
			}
		}
	}
	rule := FitRule{}
	if q.GPUType != "" {
		rule.Types = []string{q.GPUType}
	}
	want := q.Nodes * q.GPUsPerNode
	perNode := q.GPUsPerNode
	if q.PerJob {
		perNode = 0
	}
	adm, ok := cluster.Admit(AdmitRequest{Avail: avail, Want: want, PerNode: perNode, Rule: rule, Work: q.Limit.Seconds(),
		Donors: donors, Reserved: reservedFn, Limit: q.Limit.Seconds(), StartDelay: in.StartDelay.Seconds(),
		WholeNodes: true, Gain: gain, Horizon: horizon})
	if !ok {
		what := "reservations, time left, type, layout"
		if in.Objective != nil {
			what = fmt.Sprintf("reservations, type, layout, or the donors would lose more than the %v it waits, or end after the longest running job", time.Duration(gain)*time.Second)
		}
		if len(keptOff) > 0 {
			skipped = append(skipped, fmt.Sprintf("kept off %s: another pending job's planned start or an advance reservation begins there before its time limit plus %v (bf_interval and slack) would end",
				strings.Join(keptOff, ", "), in.StartDelay))
		}
		return a, "planner.Admit found no admission (" + what + ")" + strings.Join(append([]string{""}, skipped...), "; ")
	}
	// Nodes each donor gives up, as counts: NumNodes= releases its last ones.
	give := make([]int, len(cands))
	for _, sh := range adm.Shrinks {
		give[sh.Donor]++
	}
	tent := slices.Clone(avail)
	a.Queued = q.ID
	for di, k := range give {
		if k == 0 {
			continue
		}
		c := cands[di]
		from := len(c.d.Nodes)
		to := from - k
		if to < c.keep {
			return NodeAdmission{}, fmt.Sprintf("job %s would go below %d nodes", c.d.ID, c.keep)
		}
		sh := NodeShrink{Job: c.d.ID, OrigNodes: c.d.OrigNodes, FromNodes: from, ToNodes: to, OldLimit: c.d.Limit, Remaining: c.remaining}
		for _, b := range c.d.Nodes[to:] {
			if i := idx[b.Node]; allowed[i] && TakesReserved(i, (q.Limit+in.StartDelay).Seconds(), reservedFn) {
				tent[i] += b.GPUs
			}
			sh.Released = append(sh.Released, b.Node)
		}
		sh.NewLimit, sh.AtSmall = RaisedTimeLimit(c.d.Limit, c.d.Elapsed, c.remaining, from, to, in.TimeLimit)
		a.Shrinks = append(a.Shrinks, sh)
	}
	slices.SortFunc(a.Shrinks, func(x, y NodeShrink) int { return cmp.Compare(x.Job, y.Job) })
	alloc := cluster.Place(tent, want, perNode, rule)
	if alloc == nil {
		return NodeAdmission{}, "the released nodes do not hold it in the layout it asked for"
	}
	for _, al := range alloc {
		a.Alloc = append(a.Alloc, NodeGPUs{Node: cluster.Nodes[al.Node].Name, GPUs: al.GPUs})
	}
	return a, ""
}

// nodeDonorLoss returns donor c's Loss and Delay for [Cluster.Admit] under
// the objective: how much later it ends when it gives up g GPUs of its
// nodes, from the end of its node list as `scontrol update NumNodes=`
// releases them, for borrow seconds (the queued job's time limit, the
// longest it can hold them; [BorrowLoss]) and if it never gets them back
// ([ShrinkLoss]), each with restart seconds per resize. Its throughput is
// [DefaultModel] of its logical workers at its GPUs now, each GPU at its
// type's speed (in.Speeds, 1 for a type not listed), and its remaining
// work is its remaining time at its current size.
func nodeDonorLoss(c donorCand, in NodeAdmitInput, cluster *Cluster, borrow, restart float64) (loss, delay func(g int) float64) {
	now := 0
	for _, b := range c.base {
		now += b.GPUs
	}
	lw := c.d.LogicalWorkers
	if lw < 1 {
		lw = now
	}
	m := DefaultModel(lw, now)
	speedsAfter := func(g int) []SpeedCount { // c.base is last node first: the first ones go
		var out []SpeedCount
		for _, b := range c.base {
			take := min(g, b.GPUs)
			g -= take
			if b.GPUs > take {
				out = append(out, SpeedCount{Speed: cluster.speed[b.Node], N: b.GPUs - take})
			}
		}
		return out
	}
	from := speedsAfter(0)
	tp, _ := m.Throughput(from)
	work := c.remaining.Seconds() * tp / float64(m.RefGPUs) // RunTime(m, from, work) is its remaining time
	loss = func(g int) float64 { return BorrowLoss(m, from, speedsAfter(g), work, borrow, restart) }
	delay = func(g int) float64 { return ShrinkLoss(m, from, speedsAfter(g), work, restart) }
	return loss, delay
}
