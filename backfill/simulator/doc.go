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
// base allocation's speed, so a reserved start can only move earlier. Extra
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
//   - elastic: the first queued job, when R GPUs are not free, may start
//     with the largest count in [ceil(R/2), R) that fits, but only if at that
//     size it would end no later than by waiting for its reserved start at R
//     GPUs (the start-smaller rule); other jobs start at R. Jobs grow
//     through extra jobs up to 2R GPUs;
//   - elastic-capped: as elastic, but it never holds more than R GPUs, which
//     isolates what gap filling alone gains.
//
// Growing and shrinking are the planner's decisions; a shrink takes effect
// at its deadline (EasyScale hands ESTs back at the next step boundary,
// seconds, far below the trace's time scale).
//
// # Metrics
//
// JCT is completion − submit; queueing delay is first start − submit;
// gpu_alloc_pct is allocated GPU-seconds (base plus extra jobs) over
// total GPUs × (last completion − first submit); max_reservation_delay_s is
// the largest (start − earliest reserved start) over all jobs that ever held
// a reservation, which must be 0.
package simulator
