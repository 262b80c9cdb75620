// Package simulator replays a GPU-cluster job trace through a Slurm-like
// scheduler and the backfill planner (package planner) to compare a rigid
// cluster with an elastic, gap-filling one.
//
// # Slurm model
//
// Each event instant (arrival, completion, end of an extra job, shrink
// deadline) runs one scheduling pass: jobs start in submit order (FIFO)
// while they fit; the first job that does not fit gets a reservation, the
// earliest time at which enough GPUs are free if every running job ends at
// its time limit. Each later job (at most BackfillDepth of them, like
// bf_max_job_test) is tested in turn, as Slurm's sched/backfill tests
// them: it starts now if its GPUs stay free for its whole time limit,
// else it too is planned its earliest such start, and that span is taken
// from the free GPUs over time before the next job is tested
// (conservative backfill: no job starts in a way that delays one tested
// before it; nodeSpace, after Slurm's node_space_map). A job whose time
// limit depends on the GPU type it lands on is fitted for its run on its
// fastest type, then on its slowest. Every planned start is what
// squeue --start shows the daemon (the planner's Snapshot.Pending).
// EASY backfill (Lifka 1995), which plans the head alone and which this
// simulator modelled until BENCHMARKS.md E67, flattered rigid: it let
// short jobs delay a large job behind the head for hours. Time limits are
// exact: a job's limit is its remaining work at its
// base allocation's speed, so a reserved start can only move earlier (a
// job shrunk to admit another is kept off reserved nodes: see Jobs). Extra
// jobs sit in a preemptable partition: a job the scheduler starts goes on
// free GPUs when they hold it, even of a slower type, and preempts extra
// jobs only when they do not, as select/cons_tres does (it tries a job
// without preemption first; the lab shows it,
// TestANormalJobThatFitsOnIdleNodesPreemptsNothing in internal/slurmlab).
// Reservations count lent GPUs as free. Where on the free GPUs a job goes
// is select/cons_tres's choice for --gpus=R (planner.Cluster.Fit: nodes
// with more free GPUs first, runs of them in node order, a job that fits
// one node of the chosen run on the fullest of them; checked against the lab's
// slurmctld, TestTheSimulatorPlacesJobsWhereSlurmDoes in tests/slurm). It
// knows GPU speeds only through the nodes' Slurm Weight, which the
// simulated site sets by speed (Config.NodeWeights, --node-weights: faster
// types first by default; equal, Slurm's default, lets a job start on
// slower GPUs while faster ones are free and span types by node order). A
// d1 job, on one GPU type, takes the type whose nodes Slurm reaches first
// (lowest weight, then node order) that holds it.
// Nodes are in the order of --gpus (or of the --nodes file), as a site's
// slurm.conf lists them.
//
// # Jobs
//
// The same rules hold for every policy. A trace job asking for R GPUs
// declares an elastic request (trace.Job.Elastic): its logical workers L
// (ESTs), a range of GPUs and a determinism level, from the trace's optional
// columns logical_workers, min_gpus, max_gpus and determinism, and for what
// the trace does not say the documented defaults (L = max_gpus or 2R,
// max_gpus = L, min_gpus = ceil(R/2), d1). Its throughput model is
// [planner.DefaultModel](L, R); the trace's duration is its runtime on R
// reference GPUs. Its progress rate on any set of GPUs is Throughput/R; an
// extra GPU that would slow the job is left idle by the runtime, so the
// rate never falls below that of the base allocation. A job's speed on a
// GPU type is its own (the optional column speeds, TYPE:SPEED,...) where it
// lists the type, else Config.Speeds' (the daemon's: a job's comment
// speeds= over the [speeds] table). A job that names a
// GPU type (gpu_type) runs only on that type; a job naming a type the
// cluster lacks can never start. Policies:
//
//   - rigid: every job starts at exactly R GPUs and never changes; an
//     untyped job may span GPU types, as Slurm's --gres=gpu:N does;
//   - elastic (Config.ShrinkToAdmit false: gap filling alone, the daemon
//     with [admit] enabled = false). Every job starts at R GPUs and grows through extra jobs
//     up to its maximum (never past L: each GPU needs a logical worker), as
//     the planner decides with the daemon's default limits (at most
//     doubling per round while a job is queued, to its maximum at once
//     when none is) (DefaultLimits:
//     the safety margin, 2 min to 1 h lends, time limits in whole minutes,
//     an extra job ending the margin before its job). A d1 job (bit-identical on one
//     GPU type, the default) starts on one type and grows only on it; a d2
//     job may start across types and grow onto any (any it names, for a
//     job with a gpu_type);
//   - elastic with Config.ShrinkToAdmit: the policy easyscale-backfilld
//     runs with its default configuration, and easyscale-simulate's
//     --policy elastic (its --shrink-to-admit defaults to true). As elastic,
//     and when a queued job does not fit, the scheduler may start it at R by
//     shrinking the base allocations of running elastic jobs, never below
//     their minimum, as planner.Cluster.Admit decides (EasyScale's and
//     Pollux's schedulers reallocate on arrivals). Only a job with more time
//     left (at its current rate) than the queued job's work at R yields,
//     longest first, so GPUs move from long jobs to short ones (shortest
//     remaining time first, which minimises mean JCT). A job holding GPUs
//     on a node that the planned start of another queued job names (the
//     head's reservation and the first BackfillDepth jobs behind it, each
//     planned as the head is) yields only as many as leave its raised time
//     limit (its remaining work at its smaller base, planner.RunTime)
//     ending by that start, and the queued job goes onto such a node only
//     if it ends by then, ahead of it or behind (planner.DonorGives,
//     planner.TakesReserved; the daemon's rule, BENCHMARKS.md E66). A
//     shrunk job grows back through
//     extra jobs when GPUs are idle. On Slurm this needs the job's own
//     allocation shrunk (scontrol update, which the EasyScale runtime
//     survives) and its time limit raised (an operator's right), which
//     easyscale-backfilld does by default (admit.enabled). A job never
//     loses more than Config.AdmitMaxLoss (the daemon's admit.max_loss,
//     0.5) of the GPUs it started with. Under Config.Objective a donor
//     ends no later than the horizon, or, counted as never getting its
//     GPUs back, than (1 + Config.AdmitAllowance) × its run time at the
//     allocation it started on, from its start (the daemon's
//     admit.allowance, 0.5 in DaemonDefaults; planner.AllowedEnd);
//   - elastic-capped: as elastic, but it never holds more than R GPUs, which
//     isolates what gap filling and shrink-to-admit gain without growth.
//
// Start small (Config.StartSmall, --start-small RULE, elastic policies,
// default off): after the backfill pass, a queue head that still
// waits may start now on the most GPUs left that fit it (at least its
// minimum, fewer than R) when planner.StartSmall says so under the rule;
// the pass then runs again for the new head. before-reservation starts it
// only when it ends at that size before its reserved start, so no
// reservation moves; ends-earlier whenever it ends earlier than by waiting,
// which on Pollux workload 2 starts a long job small that then holds GPUs
// the short jobs behind it would have been backfilled into (mean JCT 2.1×
// rigid's). easyscale-backfilld applies the same rule per partition with
// [start_small]. The zero Config has it off; DaemonDefaults has the
// daemon's default: ends-earlier with the horizon for any waiting job
// (Config.Objective), weighed against the queued jobs it would delay past
// the end of every running job (Config.WeighCriticalDelay,
// planner.Cluster.CriticalDelay; BENCHMARKS.md E36), and bounded, as an
// admission under the objective is, by the median time left of the jobs
// running and queued, the job's own user's queued jobs left out
// (planner.WithinPeerBound, planner.Peers; BENCHMARKS.md E67, E68).
//
// With Config.KeepOffPinned (DaemonDefaults sets it, as the daemon's
// keep_off_pinned is on by default) each pass first keeps every queued job
// that may run on several GPU types off the types that pinned jobs queued
// ahead of it need (planner.KeepOff, by each type's capacity, in one spell
// of at most the job's run time, planner.KeepOffExpired; not a type its
// run there at its request would leave before the first pinned job
// waiting for it could start, by the running jobs' time limits,
// earliestFit): where it may start, its
// reservation, start-small and shrink-to-admit all leave those types out,
// as the pending job's ExcNodeList= makes Slurm do (BENCHMARKS.md E38).
//
// With Config.MoveToFaster (DaemonDefaults sets it, as the daemon's
// move_to_faster is on by default) each pass ends by moving every running
// d2 elastic job whose base allocation includes GPUs slower than others of
// its types that are idle or lent to extra jobs (on no node the head's
// reservation needs, of a type no queued job may use) onto those, at its
// base GPU count, ending its own extra jobs and the extra jobs there that
// it needs (Slurm preempts them for the requeued job), when
// planner.MoveToFaster says so, weighing the pace it keeps with its extra
// jobs against the faster GPUs' at the count it holds with them (at most
// its maximum) when they are idle, onto which it then grows; the move
// costs it Config.MoveCost seconds of progress (the daemon's requeue and
// restart; BENCHMARKS.md E40, E54, E55). With Config.MoveOneTypeAfresh as
// well (off by default: the daemon does it only for jobs run with
// --on-other-numerics=start-over), a d1 job that names no
// GPU type moves too, onto one faster type, and starts over there: the
// work it had done counts against the move (planner.MoveRequest.Redo;
// E59).
//
// With Config.TradeUp (DaemonDefaults sets it, as the daemon's trade_up is
// on by default) the planner's round also trades a running job's extra
// jobs on slower GPUs for as many idle faster ones when that pays
// (planner.TradeUpPays, weighed at the job's time left, its work left over
// its rate); the simulator ends the slow extra jobs and starts the new
// ones at the same instant, which charges the job two rescales (a grow is
// never merged with a shrink; BENCHMARKS.md E71).
//
// Every policy decision is the planner's, the same functions the daemon
// calls: grows and shrinks of extra jobs (planner.Plan, with the type rule,
// the worker cap, merging, rounding and spreading), where a job starts
// (planner.Cluster.Fit, the model of Slurm's node selection), shrink-to-admit
// (planner.Cluster.Admit, with planner.KeepAfterLoss for max_loss),
// start-small (planner.StartSmallSize, planner.StartSmall) and time limits
// (planner.RunTime). [Replay] runs a snapshot the daemon recorded through
// the simulator's path; the test expects the daemon's decisions. The
// daemon decides shrink-to-admit and start-small by whole nodes, as Slurm
// applies them (planner.AdmitOnNodes, planner.StartSmallOnNodes, over the
// same Cluster.Admit, StartSmall and a time limit of planner.RaisedTimeLimit),
// while the trace simulation works in GPUs with exact limits;
// [ReplayAdmit] and [ReplayStartSmall] run the daemon's recorded questions
// through those planner functions, apply the answers to a simulated
// cluster, and the test expects the daemon's answers. A shrink takes effect at its deadline
// (EasyScale hands ESTs back at the next step boundary, seconds, far below
// the trace's time scale).
//
// # Jobs that can never start
//
// A job asking for 0 GPUs, or for more GPUs than the whole cluster holds
// (than its GPU type holds, for a job naming a type; than the largest type
// holds, for a d1 elastic job), could never be scheduled: Slurm would reject it at submission (or, for
// more GPUs than the partition's, leave it pending forever). The simulator
// leaves such jobs out of every metric and counts them in
// Result.Skipped (skipped_jobs in the JSON and in the summary line, with a
// note on stderr). Compare runs only when their skip counts agree: a small
// cluster that skips the big jobs looks fast.
//
// # Cluster
//
// Config.GPUs cuts each GPU type into nodes of GPUsPerNode (--gpus,
// --gpus-per-node); Config.Nodes gives the cluster node by node instead, for
// real node lists with nodes of several sizes (--nodes FILE, read by
// ReadNodes: a CSV with columns gpu and model, such as the Alibaba v2023
// openb openb_node_list_all_node.csv; each model in lower case is a GPU
// type). BENCHMARKS.md maps openb's models to speeds.
//
// # Limits
//
// A cluster holds at most MaxGPUs GPUs (types together) cut into at most
// MaxNodes nodes; Run checks the Config before it allocates anything and
// returns an error wrapping ErrConfig. Job ids must be unique (package
// trace refuses a repeated one with line and id).
//
// # Lower bound
//
// Run also reports a lower bound on the mean JCT any policy could reach
// on the trace and cluster (ComputeLowerBound; lower_bound_mean_jct_s and
// jct_over_lower_bound in the JSON): the largest of every job alone at its
// best size from its submission, the preemptive single-machine relaxation
// of the cluster's capacity solved by shortest remaining processing time
// first (its GPUs counted by number and, separately, by speed: a slow type
// as the fraction of a fast GPU it is for the jobs that may use it), and
// the same relaxation per pool of GPU types (the jobs pinned to a type on
// that type's GPUs, the others on the whole cluster, summed).
//
// # Metrics
//
// JCT is completion − submit; queueing delay is first start − submit;
// gpu_alloc_pct is allocated GPU-seconds (base plus extra jobs) over
// total GPUs × (last completion − first submit); max_reservation_delay_s is
// the largest (start − earliest reserved start) over all jobs that ever held
// a reservation, which must be 0. Result.PerJob keeps every job's submit,
// start, end, GPU counts and rescales (changes of its GPU count after its
// start: extra jobs granted or ended, base GPUs shrunk) for per-job
// comparisons between policies; rescales and mean_rescales_per_job sum
// them in the JSON, small_starts counts jobs started small. Under an
// elastic policy the JSON's settings object echoes what the policy ran
// with (Settings: shrink_to_admit, admit_horizon, start_small, ...), so
// that a file says how to reproduce it; flags that do nothing under the
// policy chosen are named in a warning on stderr.
package simulator
