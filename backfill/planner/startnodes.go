package planner

import (
	"fmt"
	"time"
)

// StartSmallSize is how many units a queued job that asked for asked
// units, and accepts no fewer than minimum, starts small on when avail
// units are free now: all of them, but at most one fewer than it asked
// for (at its full request it is not small). ok is false when that is
// below minimum (or below 1). The units are whole nodes in the daemon
// ([StartSmallOnNodes]) and GPUs in the simulator, which then takes the
// largest size at most this that Cluster.Fit can place.
func StartSmallSize(asked, minimum, avail int) (size int, ok bool) {
	size = min(avail, asked-1)
	return size, size >= max(minimum, 1)
}

// StartSmallNode is one node the queue head might start small on.
type StartSmallNode struct {
	AdmitNode
	// Usable: the daemon manages it, Slurm may start jobs on it, and the
	// queued job may run there (its partitions, not its --exclude).
	Usable bool
	// Reserved: another pending job's reservation (squeue --start) names it.
	Reserved bool
	// Closed: Slurm starts no job on it now (down, drained, not
	// responding): no queued job is counted as starting there.
	Closed bool `json:",omitempty"`
}

// NodeStartSmallInput is one cycle's start-small question for the queue
// head, an elastic EasyScale job, in plain values ([StartSmallOnNodes]).
type NodeStartSmallInput struct {
	Rule StartSmallRule
	// Job is the queue head's id.
	Job string
	// AskedNodes, GPUsPerNode, GPUType ("": any) and Limit are what it asks
	// (squeue NumNodes, TRES per node, TimeLimit).
	AskedNodes, GPUsPerNode int
	GPUType                 string
	Limit                   time.Duration
	// MinNodes, MaxNodes and LogicalWorkers are its elastic request
	// (es-req min= max= lw=; LogicalWorkers 0: none declared).
	MinNodes, MaxNodes, LogicalWorkers int
	// Now and ReservedStart are Unix seconds: ReservedStart is when
	// Slurm's backfill plans to start it at its request (0: none planned
	// or unreadable).
	Now, ReservedStart int64
	// Nodes are the cluster's nodes.
	Nodes []StartSmallNode
	// TimeLimit is how its limit is raised.
	TimeLimit TimeLimitRule
	// Horizon is the longest time left of a running job (StartSmallRequest.Horizon).
	Horizon time.Duration
	// PeerMedian is the median time left of the jobs running or waiting
	// for resources (StartSmallRequest.PeerMedian); 0: no bound.
	PeerMedian time.Duration `json:",omitempty"`
	// Cap is the longest limit it may be given (its partitions' MaxTime);
	// a raised limit past it refuses the start.
	Cap LimitCap `json:",omitzero"`
	// Running and Queued, with rule ends-earlier, weigh the start against
	// the queued jobs it would make end later past every running job
	// ([Cluster.CriticalDelay]): Running are the running jobs' own
	// allocations with the end of their time limits, Queued the other jobs
	// waiting for resources (at most [CriticalDelayJobs] are weighed).
	// Empty Queued: nothing is weighed.
	Running []NodeRelease   `json:",omitempty"`
	Queued  []NodeQueuedJob `json:",omitempty"`
}

// NodeRelease is a running job's own allocation (GPUs by node name), free
// again at At, the end of its time limit (Unix seconds).
type NodeRelease struct {
	At    int64
	Nodes []NodeGPUs
}

// NodeQueuedJob is a job waiting for resources as start-small weighs it:
// job Job (the one deciding is skipped) wants Nodes × GPUsPerNode GPUs of
// GPUType ("": any type) for at most Limit, on the nodes named in On (its
// partitions, --nodelist, --exclude; nil: any node).
type NodeQueuedJob struct {
	Job                string
	Nodes, GPUsPerNode int
	GPUType            string
	Limit              time.Duration
	On                 []string `json:",omitempty"`
	// PerJob: it asks its GPUs per job (--gpus=N), placed by Fit; else
	// per node (FitNodes), as NodeAdmitQueued.PerJob.
	PerJob bool `json:",omitempty"`
}

// NodeStartSmall is the decision to start job Job now on ToNodes whole idle
// nodes instead of FromNodes later: its time limit goes from OldLimit to
// NewLimit ([RaisedTimeLimit]); by the rule's model it ends at End (Unix
// seconds). Slurm picks the nodes among the idle ones.
type NodeStartSmall struct {
	Job                string
	FromNodes, ToNodes int
	End                int64
	OldLimit, NewLimit time.Duration
}

// StartSmallOnNodes decides start-small for a queued job by whole nodes,
// as Slurm applies it (`scontrol update JobId=… NumNodes=K` of the pending
// job): it must ask more nodes than its minimum and have a planned start
// in the future; it may go onto the whole idle nodes (every GPU Free, at
// least GPUsPerNode of them) of its GPU type that are Usable and that no
// other reservation names, [StartSmallSize] of them; and [StartSmall] must
// allow that under in.Rule, the job's work being its time limit at the
// size it asked for and its run time at the smaller size the proportional
// one its raised limit allows for (its own lw= or any model could claim a
// shorter run while it holds the nodes for the whole limit), on one GPU
// type so that speeds cancel. Its new time limit is [RaisedTimeLimit] of
// its whole limit from AskedNodes to ToNodes: the run time of a job that
// scales linearly, plus the margin, and in.Cap must allow it. why says why not ("" when ok), naming
// the job as "queue head ID". Pure.
func StartSmallOnNodes(in NodeStartSmallInput) (s NodeStartSmall, ok bool, why string) {
	head := "job " + in.Job + ": "
	if in.AskedNodes <= in.MinNodes {
		return s, false, fmt.Sprintf("%sasks %d nodes, its minimum is %d", head, in.AskedNodes, in.MinNodes)
	}
	if in.ReservedStart <= in.Now {
		return s, false, head + "no planned start in the future"
	}
	idle := 0
	for _, n := range in.Nodes {
		if n.Usable && !n.Reserved && n.Free == n.Total && n.Total >= in.GPUsPerNode && (in.GPUType == "" || n.GPUType == in.GPUType) {
			idle++
		}
	}
	k, enough := StartSmallSize(in.AskedNodes, in.MinNodes, idle)
	if !enough {
		return s, false, fmt.Sprintf("%s%d whole idle nodes for it, its minimum is %d", head, idle, in.MinNodes)
	}
	asked := in.AskedNodes * in.GPUsPerNode
	// The decision is made on the time the job may hold the nodes, its
	// raised limit, which assumes linear scaling: a model from the job's
	// own comment (lw=) could let it end "early" by the model while it holds
	// the nodes for twice as long (the horizon and ends-earlier would not
	// bind). A linear model (no synchronisation cost, a logical worker
	// count divisible by both sizes) gives exactly that run time.
	small := k * in.GPUsPerNode
	linear := Model{LogicalWorkers: asked * small, RefGPUs: asked, Gamma: 1}
	req := StartSmallRequest{Rule: in.Rule, Model: linear, Work: in.Limit.Seconds(),
		Now: in.Now, ReservedStart: in.ReservedStart, Horizon: in.Horizon.Seconds(),
		AtRequest: []SpeedCount{{Speed: 1, N: asked}}, Small: []SpeedCount{{Speed: 1, N: k * in.GPUsPerNode}}}
	// The peer bound is checked on the raised limit, the time it may hold
	// the nodes, margin included (StartSmall would check its run time).
	if raised, _ := RaisedTimeLimit(in.Limit, 0, in.Limit, in.AskedNodes, k, in.TimeLimit); in.Rule == StartSmallEndsEarlier &&
		!WithinPeerBound(raised.Seconds(), in.PeerMedian.Seconds()) {
		return s, false, fmt.Sprintf("%son %d of its %d nodes its raised time limit %v would be over %g × %v, the median time left of the jobs running or waiting "+
			"(a job far longer than most, started ahead of its turn, holds its nodes while the short jobs arriving wait)",
			head, k, in.AskedNodes, raised, StartSmallPeerFactor, in.PeerMedian.Round(time.Second))
	}
	end, yes := StartSmall(req)
	if !yes {
		return s, false, fmt.Sprintf("%son %d of its %d nodes it would end at %s, which rule %s does not allow (reserved start %s)",
			head, k, in.AskedNodes, time.Unix(end, 0).UTC().Format(time.RFC3339), in.Rule, time.Unix(in.ReservedStart, 0).UTC().Format(time.RFC3339))
	}
	limit, _ := RaisedTimeLimit(in.Limit, 0, in.Limit, in.AskedNodes, k, in.TimeLimit)
	if no := in.Cap.Refuses(limit); no != "" {
		return s, false, fmt.Sprintf("%son %d of its %d nodes %s", head, k, in.AskedNodes, no)
	}
	if in.Rule == StartSmallEndsEarlier && len(in.Queued) > 0 {
		// Weighed over the time it may hold the nodes, its raised limit,
		// as every running job is taken to end at its limit.
		req.Delay = nodeCriticalDelay(in, k, in.Now+int64(limit.Seconds()))
		if _, yes := StartSmall(req); !yes {
			saves := float64(in.ReservedStart-in.Now) + RunTime(linear, req.AtRequest, req.Work) - RunTime(linear, req.Small, req.Work)
			return s, false, fmt.Sprintf("%son %d of its %d nodes it would make the queued jobs that end last end %.0f s later in all, more than the %.0f s it saves itself",
				head, k, in.AskedNodes, req.Delay, saves)
		}
	}
	return NodeStartSmall{Job: in.Job, FromNodes: in.AskedNodes, ToNodes: k, End: end, OldLimit: in.Limit, NewLimit: limit}, true, ""
}

// nodeCriticalDelay is [Cluster.CriticalDelay] for in's job holding k of
// the whole idle nodes it may start on until until: the first k in node
// order (Slurm picks among them; to a queued job's earliest start whole
// idle nodes of one type are alike, and a job that names no type is held
// on the first idle nodes whatever their type), every open node's Free
// GPUs available (none on a Closed node or one another job's reservation
// names), the running jobs' allocations freed at the end of their limits,
// and the first [CriticalDelayJobs] jobs of in.Queued that
// [CriticalJob.MayBeDelayed] keeps, each for its time limit at its
// request. Seconds.
func nodeCriticalDelay(in NodeStartSmallInput, k int, until int64) float64 {
	nodes := make([]Node, len(in.Nodes))
	idx := make(map[string]int, len(in.Nodes))
	avail := make([]int, len(in.Nodes))
	var hold []Alloc
	for i, n := range in.Nodes {
		nodes[i] = Node{Name: n.Name, GPUType: n.GPUType, Total: n.Total, Weight: n.Weight}
		idx[n.Name] = i
		if !n.Closed && !n.Reserved {
			avail[i] = n.Free
		}
		if len(hold) < k && n.Usable && !n.Reserved && n.Free == n.Total && n.Total >= in.GPUsPerNode &&
			(in.GPUType == "" || n.GPUType == in.GPUType) {
			hold = append(hold, Alloc{Node: i, GPUs: n.Total})
		}
	}
	c := NewCluster(nodes, nil)
	cd := CriticalDelayInput{Now: in.Now, Avail: avail, Horizon: in.Horizon.Seconds(), Hold: hold, Until: until}
	for _, r := range in.Running {
		rel := Release{At: r.At}
		for _, ng := range r.Nodes {
			if i, ok := idx[ng.Node]; ok && ng.GPUs > 0 {
				rel.Alloc = append(rel.Alloc, Alloc{Node: i, GPUs: ng.GPUs})
			}
		}
		if len(rel.Alloc) > 0 {
			cd.Releases = append(cd.Releases, rel)
		}
	}
	types, held := c.holdTypes(hold), float64(until-in.Now)
	for _, q := range in.Queued {
		if len(cd.Queued) == CriticalDelayJobs {
			break
		}
		if q.Job == in.Job {
			continue
		}
		cj := CriticalJob{GPUs: q.Nodes * q.GPUsPerNode, PerNode: q.GPUsPerNode, Run: q.Limit.Seconds()}
		if q.PerJob {
			cj.PerNode = 0
		}
		if q.On != nil {
			cj.On = make([]bool, len(nodes))
			for _, name := range q.On {
				if i, ok := idx[name]; ok {
					cj.On[i] = true
				}
			}
		}
		if q.GPUType != "" {
			cj.Rule = FitRule{Types: []string{q.GPUType}, OneType: true}
		}
		if cj.MayBeDelayed(types, held, cd.Horizon) && cj.mayUse(hold) {
			cd.Queued = append(cd.Queued, cj)
		}
	}
	return c.CriticalDelay(cd)
}
