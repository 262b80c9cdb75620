// Package daemon is easyscale-backfilld: it lends GPUs that Slurm leaves idle
// to running EasyScale elastic jobs and takes them back before any waiting
// job's reserved start (issue 5; EasyScale, arXiv 2208.14228, §4.3).
//
// # One cycle
//
//	         ┌──────────── every poll_interval (backoff while Slurm is down) ───────────┐
//	         ▼                                                                           │
//	Snapshotter ──► reconcile ──► planner.Plan ──► shrink ──► grow ──► metrics, decisions┘
//	scontrol ping   Slurm vs.      pure: gaps,      SIGTERM,    sbatch extra
//	sinfo, squeue   the SQLite     shrinks,         scancel     jobs (Actuator)
//	scontrol show   store          grants
//
// The snapshot reads `scontrol ping` (a down controller answers in
// milliseconds, while sinfo would retry for ~9 s), `sinfo` (GPUs per node
// from Gres/GresUsed, idle CPUs, state), one `squeue --states=all` (running
// jobs with their TRES-per-node/per-job GPU counts and end times; pending
// jobs with the start and nodes Slurm's backfill planned, i.e. what
// `squeue --start` shows; extra jobs in final states) and, once per elastic
// job, `scontrol show job` for its user, account and WorkDir. A job is
// elastic when its comment parses with elastic.ParseComment; it can grow once
// its rendezvous directory WorkDir/.easyscale/JOBID holds `coordinator` and
// `token` (the daemon must see WorkDir, as on a shared filesystem).
//
// # Growing: extra jobs
//
// Slurm 22.05 cannot grow a running GPU job: `--dependency=expand` fails with
// "has allocated GRES" and leaves the expand job stuck (NOTES.md §4). So a
// job grows by one extra job per lent node: same user (root submits with
// --uid), the job's account, partition extra.partition (preemptible),
// --nodes=1 --ntasks=1 --nodelist=NODE --gres=gpu:TYPE:N, --no-requeue,
// --chdir=WorkDir (relative paths resolve as in the job), output to
// DIR/extra-<id>.out,
// --time ending before the gap closes minus safety_margin, rounded down to
// whole minutes and never after the parent's own end,
// --job-name=es-extra-JOBID, --comment="es-extra parent=JOBID", running
// extra.worker_command (default `srun easyscale worker --join "$(cat
// DIR/coordinator)" --token-file DIR/token`). The worker joins the job's
// coordinator and is admitted at the next step boundary.
//
// The planner counts GPUs; the request counts nodes (physical workers). The
// daemon maps them with the job's GPUs per node g: MinGPUs = min·g, MaxGPUs =
// max·g, and it never gives a job more physical workers (own nodes plus one
// per extra job) than min(max, logical workers). Grows of one job on one node
// in the same cycle become one extra job. CPU-only elastic jobs are not
// grown (the planner lends GPUs).
//
// # Shrinking
//
// For each shrink the planner returns (deadline = reserved start −
// safety_margin) the daemon sends `scancel --signal=TERM` once now +
// grace_period + 2·poll_interval reaches the deadline; the worker hands its
// logical workers back at the next step boundary and exits 0. After
// grace_period, or at the deadline, `scancel` ends it; with cycles every
// poll_interval that is before the deadline. An extra job that has
// not started is cancelled at once. Slurm's partition-priority preemption
// of extra.partition is the backstop; because extra jobs are --no-requeue a
// preempted one ends (state PREEMPTED, recorded) instead of coming back
// later, and the runtime goes on at its own size.
//
// # State, restarts and reconciliation
//
// Every decision and every submitted extra job is written to the daemon's
// SQLite file (statedb.OpenBackfill; one daemon per file, enforced by flock).
// Reconciliation runs at the start of every cycle, so a restart after
// SIGKILL takes no special path: recorded extra jobs that ended are marked
// with their final state; extra jobs whose parent is no longer running, that
// stayed pending past pending_timeout, or that outlived their grace period
// are cancelled; an extra job Slurm runs but the file does not know (killed
// between sbatch and the write) is adopted when its parent is a running
// elastic job on managed nodes — cancelling it would shrink that job by
// mistake — and cancelled when it has not started or its parent is gone.
// When slurmctld is unreachable the cycle stops before reconciling, so
// nothing is marked ended or cancelled on stale information; the daemon logs
// the error and retries after poll_interval, doubling up to max_backoff.
//
// # Scope
//
// The partitions, nodes and gpu_types keys bound the nodes a daemon manages.
// An elastic job grows only when all of its nodes are managed, and extra jobs
// of jobs outside that scope are left alone (they count toward their user's
// lent GPUs), so several daemons may manage disjoint parts of one cluster.
//
// # Metrics
//
// /metrics on metrics_address serves easyscale_backfill_{cycles_total,
// gaps_found_total, idle_gpus, gpus_lent, gpus_granted_total, grows_total,
// shrinks_total, reconciled_total, extra_ends_total, planning_seconds,
// cycle_seconds, slurm_failures_total} and the Go/process collectors.
package daemon
