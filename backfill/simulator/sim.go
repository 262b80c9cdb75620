package simulator

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// DefaultLimits are the planner limits of easyscale-backfilld's default
// configuration (config.Default().PlannerLimits(): 60 s safety margin,
// 2 min to 1 h lends, whole-minute time limits, waste cap 0.30), which a
// Config with zero Limits gets.
func DefaultLimits() planner.Limits { return config.Default().PlannerLimits() }

// DaemonDefaults returns the elastic policy of easyscale-backfilld's
// default configuration (config.Default()), what easyscale-simulate
// --policy elastic runs without other flags: shrink-to-admit on, by the
// one objective when admit.rule is "objective", start_small.rule,
// rescale_cost, admit.max_loss, admit.horizon and shed_slow_nodes. The caller sets the
// cluster.
func DaemonDefaults() Config {
	d := config.Default()
	return Config{Policy: Elastic, ShrinkToAdmit: d.Admit.Enabled, AdmitMaxLoss: d.Admit.MaxLoss,
		Objective: d.Admit.Rule == config.AdmitObjective, StartSmall: d.StartSmallRule(), RescaleCost: d.RescaleCost.Seconds(),
		ShedSlowNodes: d.ShedSlowNodes, WeighCriticalDelay: true, KeepOffPinned: d.KeepOffPinned,
		MoveToFaster: d.MoveToFaster, TradeUp: d.TradeUp, MoveCost: d.MoveCost.Seconds(), DrainHorizon: d.DrainHorizon,
		AdmitHorizon: d.Admit.Horizon, AdmitAllowance: d.Admit.Allowance}
}

// Policy selects how jobs use GPUs (see the package documentation).
type Policy int

// The policies.
const (
	Rigid Policy = iota
	Elastic
	ElasticCapped
)

// String returns the policy's command-line name.
func (p Policy) String() string {
	switch p {
	case Rigid:
		return "rigid"
	case Elastic:
		return "elastic"
	case ElasticCapped:
		return "elastic-capped"
	}
	return "policy(" + strconv.Itoa(int(p)) + ")"
}

// ParsePolicy parses "rigid", "elastic" or "elastic-capped".
func ParsePolicy(s string) (Policy, error) {
	for _, p := range []Policy{Rigid, Elastic, ElasticCapped} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown policy %q: use rigid, elastic or elastic-capped", s)
}

// GPUGroup is Count GPUs of one type in the simulated cluster.
type GPUGroup struct {
	Type  string
	Count int
}

// Config describes one simulation.
type Config struct {
	// GPUs lists the cluster's GPUs by type, each type once, at most
	// MaxGPUs in all; they are cut into nodes of GPUsPerNode (≥ 1; the last
	// node of a type, or every node of a type with fewer GPUs, is smaller).
	GPUs        []GPUGroup
	GPUsPerNode int
	// Nodes, when not empty, is the cluster node by node instead (nodes of
	// different sizes, as a real node list has them, e.g. ReadNodes); GPUs
	// must then be empty and GPUsPerNode is not used. At most MaxNodes
	// nodes and MaxGPUs GPUs.
	Nodes []NodeSpec
	// Speeds gives each type's speed relative to the reference (1.0 for a
	// type not listed); every key must be a type of GPUs.
	Speeds map[string]float64
	Policy Policy
	// ShrinkToAdmit lets the elastic policies start a queued job that does
	// not fit by shrinking running elastic jobs (planner.Cluster.Admit), as
	// easyscale-backfilld does with its default admit.enabled = true: the
	// daemon's default policy is Elastic with ShrinkToAdmit (what
	// easyscale-simulate --policy elastic runs). False is gap filling alone.
	ShrinkToAdmit bool
	// AdmitMaxLoss caps what shrink-to-admit may take from one job over its
	// life, as a fraction of the GPUs it started with (rounded down; never
	// below its minimum either): the daemon's admit.max_loss, whose default
	// (0.5) zero means.
	AdmitMaxLoss float64
	// StartSmall lets the elastic policies start the queue head on fewer
	// GPUs than it asked for (never below its minimum), as
	// planner.StartSmall decides under this rule; zero: never.
	StartSmall planner.StartSmallRule
	// Objective runs the elastic policies by the planner's one objective,
	// the sum of expected completion times (issue 17, objective.go), as
	// easyscale-backfilld's default configuration does: shrink-to-admit
	// takes from the donors that lose least, only as far as they still end
	// before the longest running job (or the queued job's own end by
	// waiting), and only when the queued job's saved wait exceeds the
	// donors' summed loss (admit.rule "objective"); with StartSmall, any
	// waiting elastic job (not only the queue head) may start small
	// (start_small applies to every queued job); rounds also run on a
	// timer (RoundInterval, the daemon's poll_interval).
	Objective bool
	// AdmitBelowRequest, with Objective and StartSmall, lets
	// shrink-to-admit start a queued elastic job below its request
	// (halving it down to its minimum) when the donors cannot make room
	// for all of it. The daemon does not do this (it admits a job at its
	// request only): a simulator option, off by default.
	AdmitBelowRequest bool
	// KeepOffPinned, with Objective, keeps a queued job that may run on
	// several GPU types off the types that pinned jobs (jobs naming one
	// type) queued ahead of it need, while its other types can hold it and
	// serve it at least planner.DefaultNearlyAsWell as fast
	// (planner.KeepOff), in one spell of at most its run time
	// (planner.KeepOffExpired):
	// it waits for them rather than start on a pinned type. The daemon's
	// keep_off_pinned (on by default; DaemonDefaults sets it) applies the
	// same rule as an ExcNodeList= update of the pending job (BENCHMARKS.md
	// E38).
	KeepOffPinned bool
	// ShedSlowNodes, with an elastic policy, releases right after its
	// start the nodes of a d2 elastic job that add nothing to its
	// throughput (planner.ShedNodes: a slow type whose GPUs the optimal
	// placement leaves idle but whose pace every all-reduce waits for),
	// paying one rescale. The daemon's shed_slow_nodes (on by default on
	// Slurm 22.05) does this where the released nodes are the last of the
	// job's list (it shrinks by NumNodes); DaemonDefaults sets it as the
	// daemon's default does (BENCHMARKS.md, issue 17: E31).
	ShedSlowNodes bool
	// WeighCriticalDelay, with StartSmall ends-earlier, lets a job start
	// small only when it saves itself more than the queued jobs it delays
	// lose past the end of every running job (planner.Cluster.CriticalDelay,
	// StartSmallRequest.Delay): short jobs started small one after another
	// must not keep a long job off the pool it waits for. The daemon always
	// weighs (planner.NodeStartSmallInput Running and Queued);
	// DaemonDefaults sets it (BENCHMARKS.md, issue 17: E36).
	WeighCriticalDelay bool
	// HoldForFast, with Objective, leaves a job that may mix GPU types
	// pending when waiting for faster types ends it sooner than starting
	// now on a mix with slower ones (holdfast.go). A simulator option, off
	// by default: the daemon does not do this.
	HoldForFast bool
	// MoveToFaster, with Objective, moves a running d2 elastic job to
	// faster GPU types that are idle, wanted by no queued job, and end it
	// sooner by planner.MoveToFaster (move.go): the daemon requeues such a
	// job, which resumes from its checkpoint on the faster nodes.
	MoveToFaster bool
	// TradeUp, with an elastic policy, ends a running job's extra jobs on
	// slower GPUs and lends it as many faster idle ones when that pays
	// (planner: tradeup.go), as the daemon's trade_up (on by default) does.
	TradeUp bool
	// MoveOneTypeAfresh, with MoveToFaster, also moves a running one-type
	// (d1) elastic job that names no GPU type to a faster type, where it
	// starts over from step 0 (planner.MoveRequest.Redo: the work done so
	// far is done again). Off by default: a trace does not say which jobs
	// accept a start-over; the daemon moves a d1 job only when its run
	// does (easyscale run --on-other-numerics=start-over, which the
	// status comment carries as numerics=start-over), and otherwise the
	// torch runtime refuses to resume a checkpoint written on other
	// numerics (torchengine.ResumeError). This option models every such
	// job accepting it (BENCHMARKS.md, issue 17, E59).
	MoveOneTypeAfresh bool
	// MoveCost is the seconds a move costs the job (MoveToFaster); 0:
	// planner.DefaultMoveCost.
	MoveCost float64
	// DrainHorizon, with Objective, raises the horizon that bounds
	// shrinks and start-small to the time the cluster needs at the least
	// to run the work of the running and queued jobs of other users
	// (planner.Drain), as the daemon's drain_horizon does.
	DrainHorizon bool
	// AdmitHorizon, with Objective, is how a donor's end counts against
	// the horizon, as the daemon's admit.horizon: planner.HorizonKept, as
	// if it never got its GPUs back (planner.ShrinkLoss);
	// planner.HorizonReturned or "", as if it gets them back when the
	// admitted job's run ends (planner.BorrowLoss);
	// planner.HorizonContested, kept for the donors
	// planner.Pools.Kept names among the running jobs and the queued ones
	// not started, returned for the others.
	AdmitHorizon string
	// AdmitAllowance, with Objective, lets shrink-to-admit make a donor
	// end past the horizon as long as, its GPUs counted as never given
	// back, it ends within (1 + AdmitAllowance) × its run time at the
	// allocation it started on, from its start (planner.AllowedEnd), as
	// the daemon's admit.allowance does (DaemonDefaults sets its default,
	// planner.DefaultAdmitAllowance); 0: the horizon alone bounds it.
	AdmitAllowance float64
	// NodeWeights is how the site weights its nodes for Slurm's node
	// selection, by GPU speed (every policy; zero value: faster types
	// first).
	NodeWeights NodeWeights
	// RescaleCost is the seconds of progress a job loses at each change of
	// its GPU count (every elastic policy); 0: none. DefaultRescaleCost is
	// the figure the benchmarks use.
	RescaleCost float64
	// RoundInterval is the seconds between two planning rounds when no
	// event comes (the daemon's poll_interval); 0: DefaultRoundInterval. A
	// round with nothing to change is skipped, so the simulated timer only
	// runs while a round may still grant GPUs.
	RoundInterval int64
	// Limits are passed to the planner; zero Limits: DefaultLimits(), the
	// daemon's.
	Limits planner.Limits
	// BackfillDepth is how many queued jobs behind the first one a pass
	// considers (0 means 500).
	BackfillDepth int
}

// Sample is the cluster state from T until the next sample.
type Sample struct {
	// T is the time in seconds from the trace start.
	T int64 `json:"t_s"`
	// Allocated counts GPUs held by jobs, extra jobs included; Lent counts
	// those held by extra jobs; Waiting counts queued jobs.
	Allocated int `json:"allocated_gpus"`
	Lent      int `json:"lent_gpus"`
	Waiting   int `json:"waiting_jobs"`
}

// Result holds a simulation's metrics. Times are in seconds.
type Result struct {
	Policy string `json:"policy"`
	// NodeWeights is the site's node weighting (Config.NodeWeights).
	NodeWeights string `json:"node_weights"`
	// Settings is what an elastic policy ran with; nil (left out of the
	// JSON) under the rigid policy.
	Settings *Settings `json:"settings,omitempty"`
	// Input is what easyscale-simulate replayed on which cluster, so that a
	// result file says what produced it; nil (left out) when Run is called
	// from Go.
	Input *Input `json:"input,omitempty"`
	// Jobs counts completed jobs; Skipped counts trace jobs that could
	// never start (0 GPUs, or more GPUs than the whole cluster) and were
	// left out of every metric.
	Jobs    int `json:"jobs"`
	Skipped int `json:"skipped_jobs"`
	// SkippedWhy says, for each skipped job in trace order, why it can
	// never start (its id, its request and what the cluster has).
	SkippedWhy []string `json:"-"`
	TotalGPUs  int      `json:"total_gpus"`
	// MeanJCT and P95JCT summarise completion − submit.
	MeanJCT float64 `json:"mean_jct_s"`
	P95JCT  float64 `json:"p95_jct_s"`
	// LowerBoundMeanJCT is a lower bound on the mean JCT of any policy on
	// this trace and cluster (ComputeLowerBound); JCTOverLowerBound is
	// MeanJCT over it.
	LowerBoundMeanJCT float64 `json:"lower_bound_mean_jct_s"`
	JCTOverLowerBound float64 `json:"jct_over_lower_bound"`
	// MeanQueue is the mean of first start − submit.
	MeanQueue float64 `json:"mean_queue_s"`
	// GPUAllocPct is allocated GPU-time over capacity, in percent;
	// GPUAllocWaitingPct the same over the instants when a job waits.
	GPUAllocPct        float64 `json:"gpu_alloc_pct"`
	GPUAllocWaitingPct float64 `json:"gpu_alloc_while_waiting_pct"`
	Makespan           int64   `json:"makespan_s"`
	// MaxReservationDelay is the largest start − earliest reserved start.
	MaxReservationDelay int64 `json:"max_reservation_delay_s"`
	// ReservedStartPreemptions counts extra jobs the scheduler had to
	// preempt to start a job at or after its reserved start (the planner
	// should have shrunk them: expected 0).
	ReservedStartPreemptions int `json:"reserved_start_preemptions"`
	// Preemptions counts all extra jobs preempted by starting jobs.
	Preemptions int `json:"preempted_extra_jobs"`
	Grows       int `json:"grows"`
	// AdmitShrinks counts queued jobs started by shrinking running elastic
	// jobs' base allocations (shrink-to-admit).
	AdmitShrinks int `json:"admit_shrinks"`
	// Rescales is the total of JobRecord.Rescales; MeanRescales the mean
	// per completed job.
	Rescales     int     `json:"rescales"`
	MeanRescales float64 `json:"mean_rescales_per_job"`
	// SmallStarts counts jobs started on fewer GPUs than they asked for
	// (Config.StartSmall).
	SmallStarts int `json:"small_starts"`
	// Shed counts the starts after which Config.ShedSlowNodes released nodes.
	Shed int `json:"shed"`
	// Moves counts the running jobs moved to faster GPUs
	// (Config.MoveToFaster).
	Moves   int `json:"moves"`
	Shrinks int `json:"shrinks"`
	// Series is the allocation over time, one sample per change.
	Series []Sample `json:"-"`
	// PerJob holds one record per completed job, in completion order.
	PerJob []JobRecord `json:"-"`
}

// Input records the flags of an easyscale-simulate run that chose the jobs
// and the cluster, as given ("" and 0: the flag was left out).
type Input struct {
	Trace string `json:"trace"`
	// GPUs is the cluster's GPUs as TYPE:COUNT,... (from --nodes when it
	// gave the cluster); GPUsPerNode is the node size the run used (0 with
	// --nodes).
	GPUs        string `json:"gpus"`
	GPUsPerNode int    `json:"gpus_per_node"`
	Nodes       string `json:"nodes,omitempty"`
	// Speeds is --speeds: "" means every GPU type at speed 1.
	Speeds  string `json:"speeds"`
	Window  string `json:"window,omitempty"`
	MaxJobs int    `json:"max_jobs,omitempty"`
	// Cluster is --cluster: the one cluster of a multi-cluster table
	// replayed.
	Cluster string `json:"cluster,omitempty"`
}

// JobRecord is one completed job's history. Times are in seconds from the
// trace start.
type JobRecord struct {
	ID string
	// Submit, Start and End are submission, first start and completion.
	Submit, Start, End int64
	// Request is the trace's GPU count, StartGPUs the base allocation it
	// started with, EndBaseGPUs its base allocation when it ended (fewer
	// after shrink-to-admit took GPUs from it) and PeakGPUs the most GPUs
	// (base plus extra jobs) it held at once.
	Request, StartGPUs, EndBaseGPUs, PeakGPUs int
	// Duration is the trace's runtime at the requested size.
	Duration int64
	// StartTypes are the GPU types it started on, sorted, comma-separated.
	StartTypes string
	// Rescales counts the changes of its GPU count after its start (extra
	// jobs granted or ended, base GPUs shrunk; the grows of one planning
	// cycle count once, and so do the shrinks at one instant (a donor's
	// nodes released by one NumNodes update, extra jobs ended together), as
	// the runtime rescales once): each costs a real job a checkpoint-free restart of
	// its workers, seconds.
	Rescales int
}

// alloc is GPUs on one node, by index in sim.nodes (= the planner
// cluster's node index).
type alloc = planner.Alloc

type extra struct {
	id    string
	r     *run
	node  int
	gpus  int
	end   int64
	alive bool
}

type run struct {
	j          *trace.Job
	id         string
	min, max   int
	model      planner.Model
	rule       planner.FitRule // where it may start
	hold       []string        // the faster types it waits for (Config.HoldForFast), nil: none
	off        []string        // the types it is kept off while queued (Config.KeepOffPinned), nil: none
	offSince   int64           // when its one spell of being kept off began, -1: none yet
	gpuTypes   []string        // the types it may grow onto (planner.RunningJob.GPUTypes)
	d2         bool            // determinism d2: may mix GPU types
	startTypes string          // the types it started on (JobRecord.StartTypes)
	rigid      bool            // never grows (only in a replayed snapshot)
	// noGrow and noGrowNodes hold a job whose lends keep failing
	// (planner.RunningJob.NoGrow, NoGrowNodes; only in a replayed snapshot:
	// simulated lends do not fail); offNodes are nodes its owner excluded
	// (planner.RunningJob.OffNodes; only in a replayed snapshot: trace jobs
	// exclude none).
	noGrow      bool
	noGrowNodes []string
	offNodes    []string
	base        []alloc
	orig        int // GPUs of base when it started (shrink-to-admit's max loss)
	extras      []*extra
	rem         float64 // seconds of work at the reference size left
	rate        float64
	last        int64
	limit       int64
	startRun    float64 // seconds it would run on the allocation it started on (planner.AllowedEnd)
	runFrom     int64   // when startRun counts from: its start, or its last move (Slurm's StartTime after the requeue)
	version     int
	start       int64
	planned     int64    // earliest reserved start, 0: never reserved
	spans       [2]int64 // sim.spansOf's result, valid in pass spansPass
	spansPass   int
	pos         int // index in sim.running
	idx         int // index in sim.runs (submit order)
	snapBase    []planner.NodeGPUs
	peak        int   // most GPUs held at once
	held        int   // GPUs held after the last reschedule
	rescales    int   // changes of the GPUs held while running, one per instant (JobRecord.Rescales)
	shrunkAt    int64 // 1 + the instant of the last shrink among them; 0: none
	started     bool
	finished    bool
}

type event struct {
	t       int64
	r       *run
	x       *extra
	version int
	seq     uint64
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(a, b int) bool {
	if h[a].t != h[b].t {
		return h[a].t < h[b].t
	}
	return h[a].seq < h[b].seq
}
func (h eventHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type node struct {
	name   string
	typ    string
	speed  float64
	total  int
	free   int // GPUs held by nobody
	extras []*extra
}

type sim struct {
	freeView  []int // slurmFit's scratch
	cfg       Config
	nodes     []node
	cluster   *planner.Cluster // the same nodes, for the planner's Fit and Admit
	donors    []planner.Donor  // shrinkToAdmit's donors (buildDonors)
	donorRuns []*run           // the run of each of donors
	// donorDelays is each donor's planner.ShrinkLoss (nil without the
	// objective), keeping which donors' ends count as kept
	// (planner.KeepingFor Config.AdmitHorizon) and donorAt each donor's
	// index in s.running, for donorsFor.
	donorDelays []func(int) float64
	keeping     planner.Keeping
	donorAt     []int
	// donorsFresh says donors still describe the running jobs (no start
	// or shrink since buildDonors).
	donorsFresh bool
	speedSum    float64 // capacity(): GPUs weighted by speed
	borrow      float64 // the admitted job's run time, for donors' Loss
	total       int
	runs        []*run
	queue       []*run
	running     []*run
	seq         uint64
	events      eventHeap
	now         int64
	res         Result
	nextX       int
	allocated   int
	lent        int
	jcts        []float64
	sumQueue    float64
	snapNodes   []planner.Node
	nodeIdx     map[string]int
	avail       []int
	availTotal  int
	resv        reservation
	holds       []holding      // the pass's planned starts, in queue order (conservative backfill)
	unheld      []*run         // jobs the pass tested but has not planned yet (planHeld)
	space       nodeSpace      // the free GPUs over time the holds leave (nodeSpaceNow)
	spaceDirty  bool           // a start or shrink changed the running jobs since space was made
	win         []int          // nodeSpace.window's scratch
	spaceTypes  []string       // the GPU types, indexed as nodeSpace.typeOf's
	typeMask    []bool         // earliest's scratch: the types a job may use
	lows        [2]lowScan     // earliest's scans, one per span
	passes      int            // passes run so far (run.spansPass)
	peerPass    int            // the pass peers were read in; -1 after a start
	peers       *planner.Peers // peerMedianFor's jobs
	peerScratch []planner.PeerJob
	plans       *planner.Reservations[*run, int] // the pass's planned starts of the queued jobs (othersOff); nil: not made yet
	extraByID   map[string]*extra
	donorLeft   float64 // longestDonor at the start of the pass
	// horizonLeft is the longest time left of a running job at the start
	// of the pass, horizonUser its owner, horizonOther the longest of
	// other users' jobs (horizon, horizonFor); gain the wait a queued job
	// being admitted saves (the objective's shrink-to-admit, objective.go).
	horizonLeft, horizonOther, gain float64
	horizonUser                     string
	// drain is the work of the running and queued jobs at the start of
	// the pass (Config.DrainHorizon), which horizonFor bounds by.
	drain    planner.Drain
	lastActs planner.Actions
	// replayPending and replayLent are the reservations and other lent
	// GPUs of a replayed snapshot (Replay); nil in a trace replay.
	replayPending []planner.PendingJob
	replayLent    map[string]int
	// replayNothingQueued is the replayed snapshot's NothingQueued (the
	// daemon saw no pending job); nil in a trace replay, where it is
	// whether the queue is empty.
	replayNothingQueued *bool
}

// MaxGPUs bounds the simulated cluster: at most MaxGPUs GPUs in all, and so
// per type. It is ten times the largest GPU clusters built by 2025 (about
// 100,000 GPUs) and keeps a run's node table well under a gigabyte; the
// simulator allocates per node, so an unbounded count would exhaust memory
// before any error could be printed.
const MaxGPUs = 1_000_000

// MaxNodes bounds the simulated cluster's node count (the GPU groups cut
// into nodes of GPUsPerNode). It is well above the largest Slurm clusters
// (tens of thousands of nodes). The planner's passes scan every node: on
// the development machine a 160-job elastic replay on 1,000,000 GPUs took
// 22 s and 200 MB as 200,000 nodes, but 125 s and 1 GB as 1,000,000.
const MaxNodes = 200_000

// NodeCount is how many nodes groups make when cut into nodes of perNode
// GPUs (≥ 1): the sum over groups of ceil(Count/perNode).
func NodeCount(groups []GPUGroup, perNode int) int {
	n := 0
	for _, g := range groups {
		n += (g.Count + perNode - 1) / perNode
	}
	return n
}

// ErrConfig is wrapped by every error Run returns for an invalid Config.
var ErrConfig = errors.New("invalid simulator configuration")

// Run replays jobs (sorted by submit time, as trace tables are) under cfg.
// Jobs asking for 0 GPUs or more than the cluster holds can never start:
// they are skipped, counted in Result.Skipped with the reason in
// Result.SkippedWhy. Errors: an invalid cfg
// (wrapping ErrConfig: a GPU group without a type or with a count outside
// [1, MaxGPUs], a type listed twice, more than MaxGPUs GPUs in all, both
// GPU groups and Nodes, a node without a type or GPUs, more than MaxNodes
// Nodes,
// GPUsPerNode below 1 or making more than MaxNodes nodes, a speed for a type the cluster does
// not have or a speed that is not positive and finite), checked before
// anything is allocated; a repeated job id or an unsorted trace; a planner
// error.
func Run(jobs []trace.Job, cfg Config) (Result, error) {
	s, err := newSim(cfg)
	if err != nil {
		return Result{}, err
	}
	ids := make(map[string]bool, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if ids[j.ID] {
			return Result{}, fmt.Errorf("simulator: job id %q appears twice: ids must be unique (the planner finds jobs by id)", j.ID)
		}
		ids[j.ID] = true
		r := s.newRun(j)
		if why := s.whyNeverStarts(r); why != "" {
			s.res.Skipped++
			s.res.SkippedWhy = append(s.res.SkippedWhy, why)
			continue
		}
		if len(s.runs) > 0 && j.Submit < s.runs[len(s.runs)-1].j.Submit {
			return Result{}, fmt.Errorf("simulator: job %q submitted at %d s, before job %q (%d s) listed ahead of it: the trace must be sorted by submit_time_s: sort it (a table of several clusters, such as msft_itp's itp_jobs.csv, holds one sequence per cluster: replay one cluster's rows)",
				j.ID, j.Submit, s.runs[len(s.runs)-1].j.ID, s.runs[len(s.runs)-1].j.Submit)
		}
		r.idx = len(s.runs)
		s.runs = append(s.runs, r)
	}
	if err := s.loop(); err != nil {
		return Result{}, err
	}
	res := s.finish()
	lb, err := ComputeLowerBound(jobs, cfg)
	if err != nil {
		return Result{}, err
	}
	res.LowerBoundMeanJCT = lb.MeanJCT
	if lb.MeanJCT > 0 {
		res.JCTOverLowerBound = res.MeanJCT / lb.MeanJCT
	}
	return res, nil
}

// validate checks cfg (see Run) without allocating anything per GPU, and
// returns the cluster's GPU count.
func validate(cfg Config) (int, error) {
	if cfg.NodeWeights < WeightsFastestFirst || cfg.NodeWeights > WeightsSlowestFirst {
		return 0, fmt.Errorf("NodeWeights %d: use WeightsFastestFirst, WeightsEqual or WeightsSlowestFirst: %w", cfg.NodeWeights, ErrConfig)
	}
	groups := cfg.GPUs
	if len(cfg.Nodes) > 0 {
		if len(cfg.GPUs) > 0 {
			return 0, fmt.Errorf("both GPU groups and a node list: give one: %w", ErrConfig)
		}
		if len(cfg.Nodes) > MaxNodes {
			return 0, fmt.Errorf("%d nodes: at most %d: %w", len(cfg.Nodes), MaxNodes, ErrConfig)
		}
		for i, nd := range cfg.Nodes {
			if nd.Type == "" || nd.GPUs < 1 || nd.GPUs > MaxGPUs {
				return 0, fmt.Errorf("node %d (%q:%d): need a type name and 1 to %d GPUs: %w", i, nd.Type, nd.GPUs, MaxGPUs, ErrConfig)
			}
		}
		groups = GroupNodes(cfg.Nodes)
	}
	total := 0
	types := make(map[string]bool, len(groups))
	for _, g := range groups {
		switch {
		case g.Type == "" || g.Count < 1:
			return 0, fmt.Errorf("GPU group %q:%d: need a type name and a positive count: %w", g.Type, g.Count, ErrConfig)
		case g.Count > MaxGPUs:
			return 0, fmt.Errorf("GPU group %q:%d: at most %d GPUs per type: %w", g.Type, g.Count, MaxGPUs, ErrConfig)
		case types[g.Type]:
			return 0, fmt.Errorf("GPU type %q listed twice: %w", g.Type, ErrConfig)
		}
		types[g.Type] = true
		total += g.Count
		if total > MaxGPUs {
			return 0, fmt.Errorf("more than %d GPUs in all: %w", MaxGPUs, ErrConfig)
		}
	}
	if total == 0 {
		return 0, fmt.Errorf("the cluster has no GPUs: %w", ErrConfig)
	}
	if len(cfg.Nodes) == 0 {
		if cfg.GPUsPerNode < 1 {
			return 0, fmt.Errorf("%d GPUs per node: need at least 1: %w", cfg.GPUsPerNode, ErrConfig)
		}
		if n := NodeCount(cfg.GPUs, cfg.GPUsPerNode); n > MaxNodes {
			return 0, fmt.Errorf("%d GPUs per node make %d nodes: at most %d: %w", cfg.GPUsPerNode, n, MaxNodes, ErrConfig)
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(cfg.Speeds)) {
		sp := cfg.Speeds[typ]
		if !types[typ] {
			return 0, fmt.Errorf("speed for GPU type %q, which the cluster does not have: %w", typ, ErrConfig)
		}
		if !(sp > 0) || math.IsInf(sp, 0) {
			return 0, fmt.Errorf("GPU type %q has speed %v: need a positive finite speed: %w", typ, sp, ErrConfig)
		}
	}
	return total, nil
}

// nodeList is the cluster node by node: cfg.Nodes, or else each GPU group
// cut into nodes of GPUsPerNode (the last one smaller).
func nodeList(cfg Config) []NodeSpec {
	if len(cfg.Nodes) > 0 {
		return cfg.Nodes
	}
	var out []NodeSpec
	for _, g := range cfg.GPUs {
		for left := g.Count; left > 0; left -= cfg.GPUsPerNode {
			out = append(out, NodeSpec{Type: g.Type, GPUs: min(left, cfg.GPUsPerNode)})
		}
	}
	return out
}

func newSim(cfg Config) (*sim, error) {
	total, err := validate(cfg)
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	if cfg.BackfillDepth <= 0 {
		cfg.BackfillDepth = 500
	}
	if cfg.Limits == (planner.Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if cfg.AdmitMaxLoss == 0 {
		cfg.AdmitMaxLoss = config.Default().Admit.MaxLoss
	}
	if !(cfg.AdmitMaxLoss > 0 && cfg.AdmitMaxLoss <= 1) {
		return nil, fmt.Errorf("simulator: AdmitMaxLoss %v: use a fraction in (0, 1], like the daemon's admit.max_loss", cfg.AdmitMaxLoss)
	}
	if !(cfg.AdmitAllowance >= 0 && cfg.AdmitAllowance <= 10) {
		return nil, fmt.Errorf("simulator: AdmitAllowance %v: use 0 to 10, like the daemon's admit.allowance", cfg.AdmitAllowance)
	}
	s := &sim{cfg: cfg, total: total}
	speeds := map[string]float64{}
	perType := map[string]int{} // nodes of each type so far, for the node names
	for _, nd := range nodeList(cfg) {
		sp := 1.0
		if v, ok := cfg.Speeds[nd.Type]; ok {
			sp = v
		}
		speeds[nd.Type] = sp
		k := perType[nd.Type]
		perType[nd.Type]++
		s.nodes = append(s.nodes, node{name: nd.Type + "-" + strconv.Itoa(k), typ: nd.Type, speed: sp, total: nd.GPUs, free: nd.GPUs})
	}
	s.cfg.Speeds = speeds
	s.nodeIdx = map[string]int{}
	s.extraByID = map[string]*extra{}
	pn := make([]planner.Node, len(s.nodes))
	for n, nd := range s.nodes {
		s.nodeIdx[nd.name] = n
		pn[n] = planner.Node{Name: nd.name, GPUType: nd.typ, Total: nd.total, Weight: cfg.NodeWeights.weight(nd.speed, speeds)}
	}
	s.cluster = planner.NewCluster(pn, speeds)

	s.res.Policy = cfg.Policy.String()
	s.res.NodeWeights = cfg.NodeWeights.String()
	s.res.Settings = settingsOf(cfg)
	s.res.TotalGPUs = s.total
	return s, nil
}

// newRun makes trace job j a run under the policy: its elastic request
// (trace.Job.Elastic: the trace's optional columns, else the documented
// defaults) gives its logical workers, range and determinism level; a job
// naming a GPU type runs only on it; a d1 job starts on one type (and grows
// only on it, see start), a d2 job may mix. Under the rigid policy it runs
// exactly its R GPUs of any types Slurm would give it.
func (s *sim) newRun(j *trace.Job) *run {
	req := j.Elastic()
	r := &run{j: j, id: j.ID, offSince: -1, min: j.GPUs, max: j.GPUs, model: planner.DefaultModel(max(req.LogicalWorkers, 1), max(j.GPUs, 1)),
		rem: float64(j.Duration)}
	if j.GPUType != "" {
		r.rule.Types = []string{j.GPUType}
	}
	switch s.cfg.Policy {
	case Elastic:
		r.min, r.max = req.MinGPUs, min(req.MaxGPUs, s.total)
	case ElasticCapped:
		r.min = req.MinGPUs
	}
	if s.cfg.Policy != Rigid {
		r.rule.OneType, r.d2 = !req.D2, req.D2
	}
	return r
}

// canEverStart reports whether r could start on the empty cluster: it asks
// for at least one GPU and no more than its allowed types hold (in one
// type, for a one-type job). A job naming a type the cluster lacks never
// starts.
func (s *sim) canEverStart(r *run) bool { return s.whyNeverStarts(r) == "" }

// whyNeverStarts says why run r can never start on the cluster, naming
// the job, its request and what the cluster has ("" when it can start).
func (s *sim) whyNeverStarts(r *run) string {
	if r.j.GPUs < 1 {
		return fmt.Sprintf("job %q asks for %d GPUs", r.id, r.j.GPUs)
	}
	if r.j.GPUs > s.total {
		return fmt.Sprintf("job %q asks for %d GPUs, more than the cluster's %d", r.id, r.j.GPUs, s.total)
	}
	byType := map[string]int{}
	for _, nd := range s.nodes {
		if len(r.rule.Types) == 0 || slices.Contains(r.rule.Types, nd.typ) {
			byType[nd.typ] += nd.total
		}
	}
	sum, most := 0, 0
	for _, n := range byType {
		sum += n
		most = max(most, n)
	}
	types := strings.Join(r.rule.Types, ",")
	switch {
	case sum == 0:
		return fmt.Sprintf("job %q asks for GPU type %s, which the cluster does not have (it has %s: --gpus or --nodes; type names are case-sensitive)",
			r.id, types, strings.Join(s.cluster.Types(), ", "))
	case r.rule.OneType && r.j.GPUs > most:
		return fmt.Sprintf("job %q asks for %d GPUs of one type (determinism d1), more than the %d of its largest type", r.id, r.j.GPUs, most)
	case r.j.GPUs > sum:
		return fmt.Sprintf("job %q asks for %d GPUs of type %s, more than the cluster's %d of it", r.id, r.j.GPUs, types, sum)
	}
	return ""
}

func (s *sim) loop() error {
	next := 0
	for next < len(s.runs) || len(s.events) > 0 {
		t := int64(math.MaxInt64)
		if next < len(s.runs) {
			t = s.runs[next].j.Submit
		}
		if len(s.events) > 0 && s.events[0].t < t {
			t = s.events[0].t
		}
		s.now = t
		for next < len(s.runs) && s.runs[next].j.Submit == t {
			s.queue = append(s.queue, s.runs[next])
			next++
		}
		for len(s.events) > 0 && s.events[0].t == t {
			s.handle(heap.Pop(&s.events).(event))
		}
		for _, r := range s.running {
			// Decisions read each job's remaining work now, as the daemon
			// reads its time left now (its ends are unchanged).
			s.advance(r)
		}
		s.schedule()
		s.moveToFaster()
		if s.cfg.Policy != Rigid {
			if err := s.plan(); err != nil {
				return err
			}
			if s.objective() && len(s.lastActs.Grows) > 0 && s.total > s.allocated {
				// Rounds on a timer: the next round may grant what this
				// one could not (a job at most doubles while jobs wait).
				s.push(event{t: s.now + s.roundInterval()})
			}
		}
		s.sample()
		if checkEachPass {
			if err := s.check(); err != nil {
				return fmt.Errorf("simulator: at %d s: %w", s.now, err)
			}
		}
	}
	return nil
}

// checkEachPass makes Run verify the cluster's bookkeeping after every
// scheduling pass (set by tests).
var checkEachPass = false

// check verifies that every node's GPUs are held exactly once (free, base
// allocations, extra jobs) and every running job holds between its minimum
// and maximum GPUs.
func (s *sim) check() error {
	held := make([]int, len(s.nodes))
	for _, r := range s.running {
		base := 0
		for _, a := range r.base {
			held[a.Node] += a.GPUs
			base += a.GPUs
		}
		all := base
		for _, x := range r.extras {
			held[x.node] += x.gpus
			all += x.gpus
		}
		if base < r.min || all > r.max {
			return fmt.Errorf("job %s holds %d base and %d in all GPUs outside [%d, %d]", r.id, base, all, r.min, r.max)
		}
	}
	for n, nd := range s.nodes {
		if nd.free < 0 || nd.free+held[n] != nd.total {
			return fmt.Errorf("node %s: %d free and %d held of %d GPUs", nd.name, nd.free, held[n], nd.total)
		}
	}
	return nil
}

func (s *sim) handle(e event) {
	switch {
	case e.x != nil:
		if e.x.alive && e.x.end == e.t {
			s.endExtra(e.x)
		}
	case e.r != nil && e.version == e.r.version && !e.r.finished:
		s.complete(e.r)
	}
}

func (s *sim) complete(r *run) {
	r.finished = true
	last := s.running[len(s.running)-1]
	s.running[r.pos], last.pos = last, r.pos
	s.running = s.running[:len(s.running)-1]
	for _, x := range r.extras {
		if x.alive {
			s.dropExtra(x)
		}
	}
	r.extras = nil
	for _, a := range r.base {
		s.nodes[a.Node].free += a.GPUs
		s.allocated -= a.GPUs
	}
	jct := float64(s.now - r.j.Submit)
	s.jcts = append(s.jcts, jct)
	s.res.PerJob = append(s.res.PerJob, JobRecord{ID: r.id, Submit: r.j.Submit, Start: r.start, End: s.now,
		Request: r.j.GPUs, StartGPUs: r.orig, EndBaseGPUs: baseGPUs(r), PeakGPUs: r.peak, Duration: r.j.Duration, StartTypes: r.startTypes,
		Rescales: r.rescales})
	s.res.Rescales += r.rescales
	s.res.Makespan = max(s.res.Makespan, s.now)
}

// dropExtra frees an extra job's GPUs without touching its job's rate.
func (s *sim) dropExtra(x *extra) {
	x.alive = false
	delete(s.extraByID, x.id)
	nd := &s.nodes[x.node]
	nd.free += x.gpus
	s.allocated -= x.gpus
	s.lent -= x.gpus
	for i, y := range nd.extras {
		if y == x {
			nd.extras = slices.Delete(nd.extras, i, i+1)
			break
		}
	}
}

func (s *sim) endExtra(x *extra) {
	r := x.r
	s.advance(r)
	s.dropExtra(x)
	for i, y := range r.extras {
		if y == x {
			r.extras = slices.Delete(r.extras, i, i+1)
			break
		}
	}
	s.reschedule(r)
}

// advance books r's progress up to now.
func (s *sim) advance(r *run) {
	r.rem -= r.rate * float64(s.now-r.last)
	r.last = s.now
}

// speedCounts groups r's GPUs (base, plus extras when withExtras) by r's
// speed on them: its own (trace.Job.Speeds) where it lists the type, else
// the cluster's.
func (s *sim) speedCounts(r *run, withExtras bool) []planner.SpeedCount {
	var sc []planner.SpeedCount
	add := func(nd int, g int) {
		sp := s.speedOn(r, nd)
		for i := range sc {
			if sc[i].Speed == sp {
				sc[i].N += g
				return
			}
		}
		sc = append(sc, planner.SpeedCount{Speed: sp, N: g})
	}
	for _, a := range r.base {
		add(a.Node, a.GPUs)
	}
	if withExtras {
		for _, x := range r.extras {
			add(x.node, x.gpus)
		}
	}
	return sc
}

// speedOn is r's speed on node nd's GPUs: its own (trace column speeds)
// where it lists the node's type, else the cluster's.
func (s *sim) speedOn(r *run, nd int) float64 {
	if v, ok := r.j.Speeds[s.nodes[nd].typ]; ok {
		return v
	}
	return s.nodes[nd].speed
}

// rateOf is r's progress rate: reference-size seconds of work per second.
func (s *sim) rateOf(r *run, withExtras bool) float64 {
	base, _ := r.model.Throughput(s.speedCounts(r, false))
	if withExtras && len(r.extras) > 0 {
		all, _ := r.model.Throughput(s.speedCounts(r, true))
		base = max(base, all)
	}
	return base / float64(r.model.RefGPUs)
}

// reschedule sets r's rate from its GPUs and queues its completion.
func (s *sim) reschedule(r *run) {
	held := 0
	for _, a := range r.base {
		held += a.GPUs
	}
	for _, x := range r.extras {
		held += x.gpus
	}
	r.peak = max(r.peak, held)
	// A shrink at the instant of the job's last shrink is part of it: the
	// daemon releases a donor's nodes with one NumNodes update, and extra
	// jobs ended together leave at one step boundary, so the runtime
	// reconfigures once (counted and charged once). A grow is never merged
	// with a shrink: it needs new workers started.
	shrunk := held < r.held
	rescaled := r.held != 0 && held != r.held && !(shrunk && r.shrunkAt == s.now+1)
	if r.held != 0 && shrunk {
		r.shrunkAt = s.now + 1 // 0: never
	} else if held > r.held {
		r.shrunkAt = 0 // a grow between two shrinks keeps them apart
	}
	if rescaled {
		r.rescales++
	}
	r.held = held
	r.rate = s.rateOf(r, true)
	if rescaled && s.cfg.RescaleCost > 0 {
		r.rem += s.cfg.RescaleCost * r.rate // the seconds the restart costs, at the new rate
	}
	r.version++
	end := s.now + int64(math.Ceil(max(r.rem, 0)/r.rate))
	end = min(end, r.limit)
	s.push(event{t: end, r: r, version: r.version})
}

func (s *sim) sample() {
	waiting := len(s.queue)
	ser := s.res.Series
	if n := len(ser); n > 0 && ser[n-1].Allocated == s.allocated && ser[n-1].Lent == s.lent && ser[n-1].Waiting == waiting {
		return
	}
	if n := len(ser); n > 0 && ser[n-1].T == s.now {
		ser = ser[:n-1]
	}
	s.res.Series = append(ser, Sample{T: s.now, Allocated: s.allocated, Lent: s.lent, Waiting: waiting})
}

func (s *sim) finish() Result {
	res := s.res
	res.Jobs = len(s.jcts)
	if len(s.jcts) == 0 {
		return res
	}
	sum := 0.0
	for _, v := range s.jcts {
		sum += v
	}
	res.MeanJCT = sum / float64(len(s.jcts))
	sorted := slices.Clone(s.jcts)
	sort.Float64s(sorted)
	res.P95JCT = sorted[int(math.Ceil(0.95*float64(len(sorted))))-1]
	res.MeanQueue = s.sumQueue / float64(len(s.jcts))
	res.MeanRescales = float64(res.Rescales) / float64(len(s.jcts))
	first := s.runs[0].j.Submit
	res.Makespan -= first
	var used, cap, usedW, capW float64
	for i, p := range res.Series {
		end := res.Makespan + first
		if i+1 < len(res.Series) {
			end = res.Series[i+1].T
		}
		dt := float64(end - p.T)
		used += dt * float64(p.Allocated)
		cap += dt * float64(s.total)
		if p.Waiting > 0 {
			usedW += dt * float64(p.Allocated)
			capW += dt * float64(s.total)
		}
	}
	if cap > 0 {
		res.GPUAllocPct = 100 * used / cap
	}
	if capW > 0 {
		res.GPUAllocWaitingPct = 100 * usedW / capW
	}
	return res
}

// push queues e; equal times pop in push order, so runs are reproducible.
func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}
