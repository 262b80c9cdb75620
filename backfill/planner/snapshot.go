package planner

import (
	"errors"
	"fmt"
	"slices"
)

// ErrInvalidSnapshot is wrapped by every error [Plan] returns for a snapshot
// that contradicts itself (unknown node, negative counts, min above max...).
var ErrInvalidSnapshot = errors.New("invalid snapshot")

// Snapshot is everything the planner sees of the cluster at one instant.
// Times are integer seconds on one clock (Unix time in the daemon, seconds
// from the trace start in the simulator).
type Snapshot struct {
	// Now is the instant of the snapshot, in seconds.
	Now int64
	// Nodes lists every node the planner may lend GPUs on.
	Nodes []Node
	// Running lists running jobs, elastic and rigid. Rigid jobs matter only
	// through the time their GPUs are released.
	Running []RunningJob
	// Pending lists waiting jobs; only those with a planned start shape gaps.
	Pending []PendingJob
	// Unplanned lists waiting jobs Slurm has not planned yet; for
	// Limits.UnplannedHoldSeconds after they were first seen, no grow takes
	// GPUs they may start on ([UnplannedJob]).
	Unplanned []UnplannedJob `json:",omitempty"`
	// OtherLent counts, per user, GPUs lent to that user's jobs that are not
	// listed in Running (a caller may leave out jobs the planner cannot act
	// on); it counts toward per-user limits and fairness. May be nil.
	OtherLent map[string]int
	// Speeds maps a GPU type to its speed relative to the reference type
	// (1.0). Every node's type must be present and positive.
	Speeds map[string]float64
	// Limits holds the admin's limits and margins.
	Limits Limits
	// NothingQueued says no job waits for resources: then no queued job
	// wants the idle GPUs, and a job may grow back to its maximum in one
	// round instead of at most doubling (see the package documentation,
	// "Inter-job allocation").
	NothingQueued bool `json:",omitempty"`
	// NodeIndex optionally maps each node name to its index in Nodes, as
	// [IndexNodes] builds it, for a caller that plans many snapshots over
	// the same nodes (the simulator); nil: Plan builds it. Plan checks that
	// it indexes Nodes exactly.
	NodeIndex map[string]int `json:"-"`
}

// IndexNodes returns the index of nodes by name for Snapshot.NodeIndex, or
// an error wrapping ErrInvalidSnapshot naming a node listed twice.
func IndexNodes(nodes []Node) (map[string]int, error) {
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if _, dup := idx[n.Name]; dup {
			return nil, fmt.Errorf("node %q listed twice: %w", n.Name, ErrInvalidSnapshot)
		}
		idx[n.Name] = i
	}
	return idx, nil
}

// Node is one Slurm node's GPUs of a single type.
type Node struct {
	// Name is the Slurm node name.
	Name string
	// GPUType is the GRES type, e.g. "v100"; it must be a key of Speeds.
	GPUType string
	// Total is the node's GPU count; Idle (≤ Total) is how many are free now.
	Total, Idle int
	// Weight is the node's Slurm scheduling weight (slurm.conf Weight=):
	// select/cons_tres allocates nodes of lower weight first
	// ([Cluster.Fit]). Equal weights (0 included) leave the choice to free
	// GPUs and node order.
	Weight int `json:",omitempty"`
}

// NodeGPUs is a GPU count on one named node.
type NodeGPUs struct {
	// Node is the node name.
	Node string
	// GPUs is the count. In a PlannedNodes list, 0 means "all of the node's
	// GPUs" (squeue --start names nodes, not counts).
	GPUs int
}

// Extra is one extra Slurm job lent to an elastic job: it runs
// `easyscale worker --join` on GPUs of one node until End.
type Extra struct {
	// ID is the extra job's Slurm job id.
	ID string
	// Node and GPUs say where it runs and on how many GPUs.
	Node string
	GPUs int
	// End is when its time limit ends, in seconds.
	End int64
	// Leaving says the extra job is being ended already (the daemon
	// signalled it): it holds its GPUs until End and counts against its
	// job's maximum and the lend caps, as an extra job this round shrinks
	// does, and is never traded up again (tradeup.go).
	Leaving bool `json:",omitempty"`
}

// RunningJob is a running Slurm job.
type RunningJob struct {
	// ID is the Slurm job id; User is its owner (for per-user limits).
	ID, User string
	// Elastic marks an EasyScale job that may grow; rigid jobs never do.
	Elastic bool
	// Base is the job's own allocation, GPUs by node.
	Base []NodeGPUs
	// End is when the base allocation's time limit ends, in seconds
	// (0: unknown, never counted as released).
	End int64
	// Extras are the extra jobs currently lent to it.
	Extras []Extra
	// MinGPUs and MaxGPUs bound the job's total GPUs (base plus extras).
	MinGPUs, MaxGPUs int
	// Model gives the job's throughput as a function of its GPUs.
	Model Model
	// GPUTypes lists the GPU types the job may grow onto; empty means any
	// type. A d1 job (bit-identical on one GPU type, the default) lists the
	// type(s) of its own allocation, a d2 job leaves it nil
	// ([AllowedTypes] makes the list from the job's determinism level).
	GPUTypes []string
	// Speeds optionally gives the job's own throughput per GPU type relative
	// to the reference type (1.0), as the job declared it (the comment's
	// speeds= field, a trace's speeds column); a type it does not list runs
	// at the snapshot's Speeds. Each value > 0 and ≤ 100.
	Speeds map[string]float64 `json:",omitempty"`
	// NoGrow: the job is not grown this plan, and NoGrowNodes lists nodes
	// it is not grown onto (names the snapshot does not list are
	// ignored): its lends keep failing ([RetryPolicy.MayLend]; the daemon
	// sets them from the job's [LendHistory]). Its extra jobs stay and
	// count as before.
	NoGrow      bool     `json:",omitempty"`
	NoGrowNodes []string `json:",omitempty"`
	// OffNodes are nodes the job may never run on, so never grown onto
	// (names the snapshot does not list are ignored): the daemon lists its
	// owner's --exclude, and every node but its own when it asks node
	// features (--constraint), which the daemon does not evaluate.
	OffNodes []string `json:",omitempty"`
	// TimeLeft is how long the job still runs at its GPUs now, in
	// seconds (the daemon's [RemainingAtCurrentSize], the simulator's
	// work left over its rate); 0: not known, and its extra jobs are
	// never traded up (tradeup.go).
	TimeLeft float64 `json:",omitempty"`
}

// SpeedOf is job j's speed on GPU type t: its own Speeds[t] when it lists
// t, else site[t] (the configuration's speed table).
func (j *RunningJob) SpeedOf(t string, site map[string]float64) float64 {
	if v, ok := j.Speeds[t]; ok {
		return v
	}
	return site[t]
}

// PendingJob is a waiting job and, if Slurm's backfill planned one, its
// reserved start.
type PendingJob struct {
	// ID is the Slurm job id.
	ID string
	// PlannedStart is Slurm's expected start in seconds (0: none planned).
	PlannedStart int64
	// PlannedNodes are the nodes Slurm planned it on (SchedNodes).
	PlannedNodes []NodeGPUs
}

// Limits are the admin's knobs. Zero values pick the defaults noted.
type Limits struct {
	// MarginSeconds is how long before a reserved start a lent GPU must be
	// back (default 0).
	MarginSeconds int64
	// MinLendSeconds is the shortest lend worth a grow (default 60).
	MinLendSeconds int64
	// MaxLendSeconds caps a lend when no reservation bounds it (default 3600).
	MaxLendSeconds int64
	// MaxExtraGPUsPerJob and MaxExtraGPUsPerUser cap lent GPUs (0: no cap).
	MaxExtraGPUsPerJob, MaxExtraGPUsPerUser int
	// WasteCap is the largest fraction of a grown job's GPU time allowed to be
	// lost to imbalance (default 0.30, EasyScale §4.3).
	WasteCap float64
	// TimeLimitUnit is the granularity of a grow's time limit in seconds:
	// limits are rounded down to a whole number of units (60 for Slurm,
	// whose --time counts minutes; 0 or 1: whole seconds).
	TimeLimitUnit int64
	// UnplannedHoldSeconds is how long after a waiting job is first seen
	// the GPUs it may start on are held from grows while Slurm has not
	// planned it (Snapshot.Unplanned); 0: none are held. The daemon's
	// default is 60 s: two of Slurm's default backfill intervals.
	UnplannedHoldSeconds int64 `json:",omitempty"`
	// RescaleSeconds is the progress one resize costs a job, in seconds
	// (the daemon's rescale_cost), which trading up weighs
	// ([TradeUpPays]); 0: resizes are free.
	RescaleSeconds float64 `json:",omitempty"`
	// TradeUp moves running jobs' extra jobs to faster idle GPUs when that
	// pays (tradeup.go; the daemon's trade_up); false: never.
	TradeUp bool `json:",omitempty"`
}

func (l Limits) withDefaults() Limits {
	if l.MinLendSeconds <= 0 {
		l.MinLendSeconds = 60
	}
	if l.MaxLendSeconds <= 0 {
		l.MaxLendSeconds = 3600
	}
	if l.WasteCap <= 0 {
		l.WasteCap = 0.30
	}
	return l
}

// validate checks the snapshot's internal consistency and returns the node
// index by name.
func (s *Snapshot) validate() (map[string]int, error) {
	idx := s.NodeIndex
	if idx == nil {
		var err error
		if idx, err = IndexNodes(s.Nodes); err != nil {
			return nil, err
		}
	} else if len(idx) != len(s.Nodes) {
		return nil, fmt.Errorf("node index of %d names for %d nodes: %w", len(idx), len(s.Nodes), ErrInvalidSnapshot)
	}
	for i, n := range s.Nodes {
		if j, ok := idx[n.Name]; !ok || j != i {
			return nil, fmt.Errorf("node %q (#%d) is not at its place in the node index: %w", n.Name, i, ErrInvalidSnapshot)
		}
		if n.Total < 0 || n.Idle < 0 || n.Idle > n.Total {
			return nil, fmt.Errorf("node %q: idle %d of total %d GPUs: %w", n.Name, n.Idle, n.Total, ErrInvalidSnapshot)
		}
		if sp, ok := s.Speeds[n.GPUType]; !ok || !(sp > 0) {
			return nil, fmt.Errorf("node %q: GPU type %q has no positive speed: %w", n.Name, n.GPUType, ErrInvalidSnapshot)
		}
	}
	for _, j := range s.Running {
		if err := validateJob(j, idx); err != nil {
			return nil, fmt.Errorf("running job %q: %w", j.ID, err)
		}
	}
	for _, p := range s.Pending {
		for _, ng := range p.PlannedNodes {
			if _, ok := idx[ng.Node]; !ok && p.PlannedStart > 0 {
				continue // planned on a node the planner does not manage
			}
			if ng.GPUs < 0 {
				return nil, fmt.Errorf("pending job %q: %d GPUs on node %q: %w", p.ID, ng.GPUs, ng.Node, ErrInvalidSnapshot)
			}
		}
	}
	for _, u := range s.Unplanned {
		for _, ng := range u.Nodes {
			if ng.GPUs < 0 {
				return nil, fmt.Errorf("unplanned job %q: %d GPUs on node %q: %w", u.ID, ng.GPUs, ng.Node, ErrInvalidSnapshot)
			}
		}
	}
	return idx, nil
}

func validateJob(j RunningJob, idx map[string]int) error {
	for _, b := range j.Base {
		if b.GPUs < 0 {
			return fmt.Errorf("%d GPUs on node %q: %w", b.GPUs, b.Node, ErrInvalidSnapshot)
		}
	}
	for _, x := range j.Extras {
		if _, ok := idx[x.Node]; !ok {
			return fmt.Errorf("extra job %q on unknown node %q: %w", x.ID, x.Node, ErrInvalidSnapshot)
		}
		if x.GPUs < 1 {
			return fmt.Errorf("extra job %q has %d GPUs: %w", x.ID, x.GPUs, ErrInvalidSnapshot)
		}
	}
	if !j.Elastic {
		return nil
	}
	for t, v := range j.Speeds {
		if !(v > 0 && v <= 100) {
			return fmt.Errorf("speed %v on GPU type %q: need > 0 and ≤ 100: %w", v, t, ErrInvalidSnapshot)
		}
	}
	if j.MinGPUs < 1 || j.MinGPUs > j.MaxGPUs {
		return fmt.Errorf("min %d and max %d GPUs: need 1 ≤ min ≤ max: %w", j.MinGPUs, j.MaxGPUs, ErrInvalidSnapshot)
	}
	if err := j.Model.validate(); err != nil {
		return fmt.Errorf("throughput model: %w", err)
	}
	for _, b := range j.Base {
		if _, ok := idx[b.Node]; !ok {
			return fmt.Errorf("elastic job on unknown node %q: %w", b.Node, ErrInvalidSnapshot)
		}
	}
	return nil
}

// AllowedTypes returns the GPU types a job may grow onto given its
// determinism level and the types of the nodes of its own allocation: for
// d2 (results independent of the GPU type) nil, meaning any type; for every
// other level (d1, bit-identical on one GPU type, the default) the sorted,
// distinct baseTypes (callers pass at least one: an empty list would also
// mean any type). Source: EasyScale §3.3 (D1 keeps a job on one device
// type; D2 admits heterogeneous devices).
func AllowedTypes(d2 bool, baseTypes []string) []string {
	if d2 {
		return nil
	}
	out := slices.Clone(baseTypes)
	slices.Sort(out)
	return slices.Compact(out)
}

// FreeGPUs returns, per node of s (in the order of s.Nodes), the GPUs idle
// by both of the snapshot's accounts: the node's own count (Node.Idle) and
// its Total less the GPUs that the running jobs listed hold on it (their
// base allocations and extra jobs, started or not), never below 0. The two
// agree when they were read at one instant. A caller that reads them apart
// (the daemon: sinfo, then squeue) may see a job that started in between
// running on GPUs the node still counts as idle; lending those GPUs would
// make an extra job that waits behind that job in the preemptible
// partition, or one that Slurm preempts at once (seen on the lab: a pinned
// job started on the v100 nodes the moment their extra jobs were
// preempted, and the next cycle lent its GPUs again). idx is the node
// index by name ([IndexNodes]); entries on nodes it does not list are
// ignored.
func FreeGPUs(s *Snapshot, idx map[string]int) []int {
	held := make([]int, len(s.Nodes))
	for _, j := range s.Running {
		for _, b := range j.Base {
			if ni, ok := idx[b.Node]; ok && b.GPUs > 0 {
				held[ni] += b.GPUs
			}
		}
		for _, x := range j.Extras {
			if ni, ok := idx[x.Node]; ok && x.GPUs > 0 {
				held[ni] += x.GPUs
			}
		}
	}
	free := make([]int, len(s.Nodes))
	for ni, n := range s.Nodes {
		free[ni] = max(0, min(n.Idle, n.Total-held[ni]))
	}
	return free
}
