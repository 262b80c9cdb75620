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
// its time limit (EASY backfill, Lifka 1995, as in Slurm's sched/backfill);
// later jobs (at most BackfillDepth of them, like bf_max_job_test) start now
// if they end before the reservation or use only GPUs the reservation does
// not need. Time limits are exact: a job's limit is its remaining work at its
// base allocation's speed, so a reserved start can only move earlier (a
// job shrunk to admit another is kept off reserved nodes: see Jobs). Extra
// jobs sit in a preemptable partition: the scheduler counts their GPUs as
// free and preempts them when a job it starts needs them.
//
// # Jobs
//
// The same rules hold for every policy. A trace job asking for R GPUs runs
// L = 2R logical workers (ESTs) with [planner.DefaultModel](2R, R); the
// trace's duration is its runtime on R reference GPUs. Its progress rate on
// any set of GPUs is Throughput/R; an extra GPU that would slow the job is
// left idle by the runtime, so the rate never falls below that of the base
// allocation. Policies:
//
//   - rigid: every job starts at exactly R GPUs and never changes;
//   - elastic: every job starts at R GPUs and grows through extra jobs up
//     to 2R (the planner's decisions). When a queued job does not fit, the
//     scheduler may start it at R by shrinking the base allocations of
//     running elastic jobs, never below their minimum ceil(R/2)
//     (shrink-to-admit, as EasyScale's and Pollux's schedulers reallocate
//     on arrivals). Only a job with more time left (at its current rate)
//     than the queued job's work at R yields, longest first, so GPUs move
//     from long jobs to short ones (shortest remaining time first, which
//     minimises mean JCT). For the queue head any such job may yield; for
//     a backfill candidate only jobs holding no GPU on the head's reserved
//     nodes, because a shrunk job's time limit moves to its remaining work
//     at its smaller base and that must not delay the reservation. A
//     shrunk job grows back through extra jobs when GPUs are idle. On Slurm
//     this needs the job's own allocation shrunk (scontrol update, which
//     the EasyScale runtime survives) and its time limit raised (an
//     operator's right); easyscale-backfilld does not do this yet;
//   - elastic-capped: as elastic, but it never holds more than R GPUs, which
//     isolates what gap filling and shrink-to-admit gain without growth.
//
// Starting the queue head smaller than R when R GPUs are not free was
// tried and dropped: a long job started small holds GPUs for longer, and
// the short jobs behind it, which EASY backfill would have run in that
// time, wait (Pollux workload 2: mean JCT 2× rigid's).
//
// Growing and shrinking are the planner's decisions; a shrink takes effect
// at its deadline (EasyScale hands ESTs back at the next step boundary,
// seconds, far below the trace's time scale).
//
// # Jobs that can never start
//
// A job asking for 0 GPUs, or for more GPUs than the whole cluster holds,
// could never be scheduled: Slurm would reject it at submission (or, for
// more GPUs than the partition's, leave it pending forever). The simulator
// leaves such jobs out of every metric and counts them in
// Result.Skipped (skipped_jobs in the JSON and in the summary line, with a
// note on stderr). Compare runs only when their skip counts agree: a small
// cluster that skips the big jobs looks fast.
//
// # Limits
//
// A cluster holds at most MaxGPUs GPUs (types together) cut into at most
// MaxNodes nodes; Run checks the Config before it allocates anything and
// returns an error wrapping ErrConfig. Job ids must be unique (package
// trace refuses a repeated one with line and id).
//
// # Metrics
//
// JCT is completion − submit; queueing delay is first start − submit;
// gpu_alloc_pct is allocated GPU-seconds (base plus extra jobs) over
// total GPUs × (last completion − first submit); max_reservation_delay_s is
// the largest (start − earliest reserved start) over all jobs that ever held
// a reservation, which must be 0. Result.PerJob keeps every job's submit,
// start, end and GPU counts for per-job comparisons between policies.
package simulator
