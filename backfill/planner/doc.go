// Package planner holds every policy decision of EasyScale's backfill:
// from one snapshot of a Slurm cluster, which elastic jobs grow into idle
// GPUs and which extra jobs must end before a pending job's reserved start
// ([Plan]); where a job starts ([Cluster.Fit]); and which running elastic
// jobs shrink so that a queued job can start ([Cluster.Admit]). Its
// functions are pure: no I/O, no clock, no randomness; "now" is a field of
// the snapshot. The backfill daemon (package daemon) only snapshots Slurm
// and applies the decisions; the trace-driven simulator (package simulator)
// calls the very same functions on its simulated cluster, and a test
// replays snapshots the daemon recorded through the simulator's path
// (backfill/testdata/replay).
//
// # Gaps
//
// A gap is a set of idle GPUs on one node together with the time until which
// they may be lent. For node n and a time t, let
//
//	surplus_n(t) = idle_n + released_n(t) − reserved_n(t)
//
// where idle_n is the smaller of the node's own idle count and its GPUs
// that no listed running job or extra job holds ([FreeGPUs]: the two
// accounts differ when read at different instants), released_n(t) counts
// GPUs of running allocations on n whose time
// limit ends at or before t (an extra job counts only if it ends at least the
// safety margin before t) and reserved_n(t) counts the GPUs that pending jobs
// planned on n (squeue --start) need by t. A GPU lent until E must be back
// Margin seconds before every reservation t with t − Margin < E, so the
// number of GPUs lendable until E is min(idle_n, min over those t of
// surplus_n(t)). Taking the minimum at each reservation start in time order
// gives a staircase of "slots": GPUs lendable until t_k − Margin, and, after
// the last reservation, until Now + MaxLendSeconds.
//
// A waiting job Slurm has not planned yet (no planned start or nodes: every
// job in the seconds between its submission and the next backfill pass)
// reserves nothing, yet may start at that pass on any node it may use. For
// Limits.UnplannedHoldSeconds after it was first seen, the GPUs it may need
// on each such node are taken off idle_n for lends ([UnplannedJob]; summed
// over such jobs, at most the node's GPUs); running extra jobs stay, since
// these nodes are its possible ones, not its planned ones.
//
// # Shrinking
//
// When surplus_n(t) < 0 at some reservation start t, extra jobs on n still
// running at t − Margin are ended with deadline max(Now, t − Margin), latest
// ending first, until the surplus is non-negative or no extra job is left on
// the node. This is the graceful path; Slurm's preemption of the low-priority
// partition is the backstop (issue 5, "Shrinking").
//
// # Intra-job placement
//
// [Place] spreads a job's logical workers (ESTs) over its GPUs to minimise
// the step's compute time max_i(load_i/speed_i) (EasyScale, arXiv
// 2208.14228, §4.2). See [Place] for the algorithm and its optimality
// argument; [Model] turns a placement into a throughput with Pollux's
// sub-linear iteration-time model (Qiao et al., OSDI'21, §3.1).
//
// # Speeds
//
// A job's speed on a GPU type, relative to the reference type (1.0), is its
// own when it declares one (RunningJob.Speeds: the job comment's optional
// speeds=TYPE:SPEED,... field, internal/elastic.ParseSpeeds, or a trace's
// speeds column) and otherwise the site's table (Snapshot.Speeds: the
// configuration's [speeds], spank/gpuctx's peak-FP32 defaults). Per-job
// speeds matter because the speed-up of a GPU generation depends on the
// model (EasyScale, arXiv 2208.14228, §4: its inter-job scheduler profiles
// each job's throughput per device type). In [Model] the step's compute
// time is the placement's bottleneck load/speed and the synchronisation
// term is the reference one divided by the slowest GPU's speed, so on k
// GPUs of one type a job runs exactly speed times as fast as on k
// reference GPUs: the configured ratio (before, a 32-GPU job on V100 at
// 3.1× a T4 ran 2.18× faster, the sync term being fixed in reference
// units). Pollux (OSDI'21, §3.1) fits T_sync per job and placement; we
// scale it with the job's compute speed, which is the assumption a single
// relative speed per type can carry.
//
// # Inter-job allocation
//
// Following EasyScale's inter-job scheduler (§4.3), GPUs are granted one
// grant at a time to the job and GPU type with the largest marginal
// throughput per added GPU, where throughput is measured in reference-GPU
// equivalents (so a 1-GPU and a 64-GPU job compete on the same scale). A
// grant adds c GPUs of one type; it is allowed only when
//
//   - the job stays within its maximum GPU count and per-job and per-user
//     limits on lent GPUs,
//   - the job's GPUs after the round are at most twice its GPUs at the start
//     of the round (at most doubling per round) while a job waits for
//     resources; when none does (Snapshot.NothingQueued) a job grows back
//     to its maximum at once, since no queued job wants the idle GPUs,
//   - the resulting placement wastes at most WasteCap (default 0.30) of the
//     job's GPU time to imbalance, and
//   - the marginal throughput is positive.
//
// Marginal gains can only fall as GPUs are handed out, so a lazy max-heap
// (re-evaluate the popped candidate; grant it only if its gain still holds)
// yields the same grants as re-evaluating every job after every grant.
//
// Type rule: a job lists the GPU types it may grow onto (RunningJob.GPUTypes;
// [AllowedTypes]: a d1 job, bit-identical on one GPU type, only its own
// type(s); a d2 job any), and candidates of other types are never
// considered. Its cap is its MaxGPUs: the daemon gives min(max nodes × GPUs
// per node, logical workers), since every GPU needs a logical worker.
//
// From grants to extra jobs: GPUs of one grant are taken from the slots
// longest lend first; among the slots of the longest lend left, a node where
// the job has no extra job yet goes first (spreading), and among those one
// that holds the whole grant. Grows of one job on one node then merge into
// one extra job ending at the earliest end, an end is capped at
// MarginSeconds before the job's own end (the extra job's time limit runs
// from its start, a little after Now), the time limit is rounded down to Limits.TimeLimitUnit (60 s for
// Slurm) and a grow shorter than MinLendSeconds after that is dropped.
//
// Fairness: equal gains go first to the user holding fewer lent GPUs at the
// start of the cycle, then to the job whose time limit (End) ends first
// (the shortest job finishes and frees its GPUs soonest, as in
// shortest-remaining-time-first), then to the lexicographically smaller job
// ID. An extra job being shrunk counts against its job's maximum until its
// deadline, so a job never holds more than MaxGPUs even while handing GPUs
// back. The
// per-user limit bounds what one user can take; a job never loses its own
// (base) allocation to the planner, so lending is work-conserving without
// ever taking from a rigid job.
//
// # Starting small
//
// [StartSmall] decides whether a queued elastic job starts now on fewer
// GPUs than it asked for (never below its minimum) and grows later. Rules
// ([StartSmallRule]): before-reservation, it ends at the smaller size,
// without counting on growth, no later than its own reserved start, so it
// holds nothing any reservation needs (EASY backfill's test, Lifka 1995,
// applied to the smaller job); ends-earlier, it ends earlier than by
// waiting, which lets a long job hold GPUs that short jobs behind it
// would have been backfilled into (Pollux workload 2: mean JCT 2.1× rigid's,
// BENCHMARKS.md). Both are options; neither is the daemon's default.
//
// # Starting and shrink-to-admit
//
// [Cluster.Fit] is the model of Slurm's node selection that the simulator
// and the planner's admission checks use: select/cons_tres's for a job
// asking --gpus=N (nodes of lower Weight first, then nodes with more free
// GPUs, runs of them in node order, a job that fits one node of the chosen
// run on the fullest of them that holds it), which knows nothing of GPU
// speeds beyond the site's weights; a one-type d1 job is fitted on one
// type at a time, in the order Slurm reaches their nodes.
// [Cluster.FitNodes] is the same for a job asking -N M --gres=gpu:K (only
// nodes with K GPUs free, each giving K); the daemon's admission and
// start-small checks place a queued job asking GPUs per node with it and
// one asking them per job (--gpus) with Fit ([Cluster.Place]). A lab test
// checks both against slurmctld. The daemon's snapshots carry the weights
// Slurm has (scontrol show node) when a job waits for resources and
// shrink-to-admit or start-small, whose checks predict a placement, is on.
// [Cluster.Admit] decides shrink-to-admit: running elastic jobs with more
// time left than the queued job's work give up base GPUs, longest first,
// never below their minimum and never on nodes a reservation needs, until
// Fit finds the queued job an allocation; WholeNodes restricts shrinks to
// whole nodes, as `scontrol update NumNodes=` can apply them. The daemon
// applies it with WholeNodes when its config has admit.enabled (see the
// daemon package, "Shrink-to-admit"); the simulator does only with its
// ShrinkToAdmit option.
//
// # One objective (issue 17, in progress)
//
// The decisions are being moved onto one estimate: the sum of the jobs'
// expected completion times, each from its remaining work and its
// throughput on the GPUs it would hold ([Model], [RunTime]), with the
// cost of a restart. What uses it so far:
//
//   - [Cluster.Admit] with donors' Loss ([BorrowLoss] in the daemon and
//     the simulator): donors yield in order of least loss per GPU, each
//     only as far as it still ends within AdmitRequest.Horizon (the latest
//     expected end of a running job, a limit shrink-to-admit raised counted
//     without the raise, so the longest job, which sets the makespan,
//     never yields), its end counted by its Loss (admit.horizon
//     "returned") or by its Delay ([ShrinkLoss], "kept"; "contested"
//     for the donors [Pools.Kept] names: the longest job of a pool other
//     queued jobs wait for), and
//     the admission stands only when the donors' summed loss is below the
//     wait the queued job saves (AdmitRequest.Gain);
//   - Snapshot.NothingQueued: with no job waiting, a job grows back to its
//     maximum in one round (the daemon and the simulator by default);
//   - [AdmitOnNodes] with NodeAdmitInput.Objective: the daemon's
//     shrink-to-admit by whole nodes under admit.rule "objective" (its
//     default), the donors' Loss from [DefaultModel] of their logical
//     workers at their GPU types' speeds, the gain the queued job's wait
//     until its planned start, the horizon the longest running job's end
//     among other users' jobs ([HorizonFor]: a user's own long job must
//     not loosen the bound for their queued job at another user's
//     expense);
//   - [StartSmall] with StartSmallRequest.Horizon: start-small's
//     ends-earlier rule (the daemon's default) also keeps a job started
//     small from ending after the running job of another user that ends
//     last ([HorizonFor]), and with StartSmallRequest.Delay
//     ([Cluster.CriticalDelay]) from costing the queued jobs that would
//     end after every running job more than it saves; the daemon
//     asks [StartSmallOnNodes] for every waiting elastic job in queue
//     order, the simulator (Config.Objective) for every waiting job at
//     the size and GPU type that end it soonest;
//   - rounds on a timer: the daemon's poll_interval, the simulator's
//     RoundInterval.
//
// What the objective does not decide yet: growth into idle GPUs is still
// [Plan]'s gap filling (largest marginal gain per GPU, capped at
// doubling per round while jobs wait), a simulator option the daemon
// cannot apply stays off by default (Config.AdmitBelowRequest: admitting a
// queued job below its request), one the daemon applies by default
// (Config.KeepOffPinned: [KeepOff], keeping a queued job that may run on
// several GPU types off the types that pinned jobs queued ahead of it
// need while another type serves it at least [DefaultNearlyAsWell] as
// fast and it would still run when the first pinned job could start
// there (KeepOffRequest.PinnedStart), for at most its run time,
// [KeepOffExpired]; the daemon's
// keep_off_pinned, an ExcNodeList= update of the pending job), one the
// daemon applies by default on
// Slurm 22.05 (Config.ShedSlowNodes: [ShedNodes], releasing the nodes a d2
// job's placement leaves idle but whose pace its all-reduce waits for; the
// daemon's shed_slow_nodes, `scontrol update NumNodes=` of the last nodes
// of a job's list, which keeps the batch host), one it applies by default
// (Config.MoveToFaster: [MoveToFaster], moving a long-running d2 job to
// idle GPUs of a faster type that no queued job may use when that ends it
// at least [MoveMargin] sooner after the move's cost; the daemon's
// move_to_faster, `scontrol requeue` and an ExcNodeList= update while it
// waits; with Config.MoveOneTypeAfresh, a simulator option only, also a
// d1 job that names no type, which starts over: [MoveRequest].Redo), one
// [Plan] applies by default (Limits.TradeUp: trading a running job's extra
// jobs on slower GPUs for as many idle faster ones that no reservation
// needs for the lend, when the speed-up over its time left, bounded by
// the lend, pays two resizes by [MoveMargin]: [TradeUpPays], tradeup.go;
// the daemon's trade_up, a shrink and a grow in one cycle), and
// one it cannot apply as the simulator does
// (Config.HoldForFast: [HoldForFaster], leaving the queue head pending
// when Slurm would start it on a mix with slower types and waiting for
// faster ones ends it sooner; Slurm starts a job that fits before the
// daemon's next cycle, so the daemon would have to exclude the slow nodes
// ahead of time, a predictive form that measured worse). An admission's gain is the queued job's
// wait, its run priced on its fastest type: a d2 job admitted onto a mix
// that includes a slow type runs at that type's pace and can end later
// than by waiting (the worst makespan cells of BENCHMARKS.md's hetero
// matrix). Subtracting that slowdown from the gain fixed those cells but
// raised mean JCT elsewhere, since the gain leaves out the jobs queued
// behind an admitted head (BENCHMARKS.md, "Rules tried against them").
// Growth by completion time cut per GPU instead of throughput per GPU was
// measured there too and not adopted.
//
// # Where each rule lives
//
// Every policy rule of the daemon is a function here over plain values;
// the daemon (package daemon) only translates Slurm's text into them and
// applies the result, and the simulator calls the same functions:
//
//   - limits.go: the worker cap and minimum of an elastic job ([GPUBounds],
//     [WorkerCap], [LogicalWorkers], [GPUsPerNode]);
//   - keep.go: shrink-to-admit's admit.max_loss ([KeepAfterLoss], nodes in
//     the daemon, GPUs in the simulator) and who may give up nodes
//     ([NotDonor]);
//   - allowance.go: how far past the horizon shrink-to-admit may make a
//     donor end, admit.allowance ([AllowedEnd], applied by [Cluster.Admit]
//     through Donor.Allowed);
//   - timelimit.go: the one time-limit rule of start-small and
//     shrink-to-admit ([RemainingAtCurrentSize], [RaisedTimeLimit]: the
//     remaining work at the smaller size by the proportional rule plus a
//     margin; [LimitCap]: never past the partition's MaxTime);
//   - queue.go: the queue order ([QueueOrder]);
//   - retry.go: failing lends — when an ended extra job failed
//     ([LendEnd.Outcome]), the consecutive failures per job and node
//     ([LendHistory.Record]) and where a job may still be grown
//     ([RetryPolicy.MayLend]: exponential backoff to a cap, and a stop
//     after StopAfter failures until the job's status changes), applied
//     by [Plan] through RunningJob.NoGrow and NoGrowNodes;
//   - lendfail.go: lends that fail before they run — which refused
//     submissions count against the job and which are Slurm's or the
//     daemon's fault ([SubmitFailure.Outcome], [SlurmUnavailable]), and a
//     lend cancelled pending, counted on its node or, for a limit of the
//     job's user, account or QOS, against the job ([PendingLend.Outcome]);
//   - admitnodes.go, startnodes.go: shrink-to-admit and start-small by
//     whole nodes, as Slurm applies them ([AdmitOnNodes] over
//     [Cluster.Admit]; [StartSmallOnNodes] over [StartSmallSize] and
//     [StartSmall]). Their inputs and answers are what a daemon recording
//     carries; simulator.ReplayAdmit and ReplayStartSmall replay them;
//   - unplanned.go: the hold on GPUs a just-submitted job Slurm has not
//     planned yet may start on ([UnplannedJob]);
//   - nudge.go: which waiting elastic jobs held by a begin time that
//     slurmctld says has passed (a requeued job after cred_expire) to nudge
//     with a begin time update, so that Slurm's scheduler runs now, and
//     when to look again ([PlanNudges], [MaxNudgesPerCycle]).
//
// Slurm's text (host lists, times, time limits) is parsed only in
// internal/slurmcli.
package planner
