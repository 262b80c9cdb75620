// Package config reads and validates easyscale-backfilld's admin
// configuration, a TOML file (default /etc/easyscale/backfill.toml; an
// annotated example is contrib/backfill.toml).
//
// Loading goes decode → reject unknown keys (by name) → defaults → validate.
// Every validation error is a [*FieldError] naming the TOML key, the value
// and the fix; all of them are reported at once (errors.Join).
package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/easyscale/easyscale-slurm/backfill/planner"

	"github.com/easyscale/easyscale-slurm/internal/gpuspeed"
	"github.com/easyscale/easyscale-slurm/internal/spelling"
)

// DefaultPath is where the daemon looks for its configuration.
const DefaultPath = "/etc/easyscale/backfill.toml"

// DefaultWorkerCommand is the batch script (sbatch --wrap) of an extra job:
// srun starts one `easyscale worker` per task (the daemon submits one task
// per lent GPU), each joining the elastic job's coordinator. The
// placeholders are replaced, shell-quoted, by the daemon (see
// [Extra.WorkerCommand]).
const DefaultWorkerCommand = `srun easyscale worker --join "$(cat {coordinator_file})" --token-file {token_file}`

// DefaultSpeeds are the relative training speeds per GRES type used when the
// config has no [speeds] entry for a type: the project's one table,
// internal/gpuspeed (peak dense FP32 throughput from the vendor data sheets
// divided by the V100's 15.7 TFLOPS), keyed by GRES type in lower case
// (gpuspeed.GRESTypes). They are the same priors the runtime's
// logical-worker placement reads from easyscale-gpuctx, so the planner's
// imbalance and waste estimates agree with how the job will really place
// its workers. "H100 PCIe" has no GRES spelling (a type name has no
// spaces); other types, e.g. k80 or a10, have no default: add them under
// [speeds] or they are not lent. These are coarse priors, not measurements
// of this project's workloads: measure yours (e.g. `easyscale run` step
// times on one GPU of each type) and override.
var DefaultSpeeds = gpuspeed.GRESTypes()

// Duration is a time.Duration written in TOML as a Go duration string
// ("90s", "5m", "1h30m").
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like \"30s\" or \"5m\": %w", b, err)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is the whole admin configuration. TOML keys are given in brackets.
type Config struct {
	// set records which of warnedKeys the file set (Warnings).
	set map[string]bool
	// PollInterval is the time between two cycles [poll_interval], 1s..1h,
	// default 10s.
	PollInterval Duration `toml:"poll_interval"`
	// MaxBackoff caps the wait between retries of failed cycles
	// [max_backoff], ≥ poll_interval, default 5m. Retries wait poll_interval,
	// then double it each failure up to this cap, but never past a scheduled
	// shrink; while slurmctld does not answer the daemon instead pings it
	// every poll_interval and cycles as soon as it answers.
	MaxBackoff Duration `toml:"max_backoff"`
	// Partitions lists the partitions whose nodes may be lent [partitions];
	// empty: every partition.
	Partitions []string `toml:"partitions"`
	// Nodes narrows the nodes this daemon manages to these names [nodes];
	// empty: every node of Partitions. Elastic jobs are grown only when all of
	// their nodes are managed, and only extra jobs on managed nodes are
	// reconciled, so several daemons may manage disjoint node sets.
	Nodes []string `toml:"nodes"`
	// GPUTypes lists the GRES types that may be lent [gpu_types]; empty:
	// every type with a speed.
	GPUTypes []string `toml:"gpu_types"`
	// Speeds overrides [DefaultSpeeds]: GPU type → speed relative to the
	// reference type (1.0) [speeds]; each > 0 and ≤ 100.
	Speeds map[string]float64 `toml:"speeds"`
	// SafetyMargin is how long before a reserved start lent GPUs must be
	// free [safety_margin], 0..1h, default 60s. Keep it above Slurm's
	// KillWait so that an extra job killed at its time limit is gone in time.
	SafetyMargin Duration `toml:"safety_margin"`
	// TimeLimitMargin is the margin start-small and shrink-to-admit add to
	// a resized job's raised time limit, as a fraction of its remaining
	// run time at the smaller size [time_limit_margin], in [0, 1], default
	// 0.1; the margin added is at least safety_margin
	// (planner.RaisedTimeLimit). It covers the resize itself and the steps
	// a job redoes, which the proportional rule does not.
	TimeLimitMargin float64 `toml:"time_limit_margin"`
	// RescaleCost is what one resize (a grow, a shrink, a start on fewer
	// nodes) costs a job in progress [rescale_cost], 0..1h, default 30s:
	// the objective charges it to every resize it weighs (planner.BorrowLoss).
	// 30 s covers an extra job scheduled and started on the lab plus the
	// joining worker's start (torch_rescale_fresh_s 3.3 s, BENCHMARKS.md).
	RescaleCost Duration `toml:"rescale_cost"`
	// MoveCost is what moving a running job to faster GPUs costs it
	// [move_cost], 0..1h, default 150s (planner.DefaultMoveCost): Slurm
	// makes a requeued job eligible again after cred_expire (120 s by
	// default; nudge_eligible, once the job's excluded nodes are set, makes
	// it eligible sooner), then it restarts and redoes the steps since its
	// newest checkpoint. Set it to the site's cred_expire plus about half
	// a checkpoint interval; the default errs on the side of fewer moves.
	MoveCost Duration `toml:"move_cost"`
	// GracePeriod is how long an extra job has, after SIGTERM, to hand its
	// logical workers back before it is cancelled [grace_period], 1s..30m,
	// default 30s.
	GracePeriod Duration `toml:"grace_period"`
	// MinLend is the shortest lend worth a grow [min_lend], ≥ 1m (Slurm time
	// limits are whole minutes), default 2m.
	MinLend Duration `toml:"min_lend"`
	// MaxLend caps an extra job's time limit when no reservation bounds it
	// [max_lend], ≥ min_lend, ≤ 7 days, default 1h.
	MaxLend Duration `toml:"max_lend"`
	// PendingTimeout is how long a submitted extra job may stay pending
	// before it is cancelled (the gap it was meant for is gone), which
	// counts as a failed lend on its node ([retry])
	// [pending_timeout], ≥ 1s, default 30s.
	PendingTimeout Duration `toml:"pending_timeout"`
	// UnplannedHold is how long after the daemon first sees a waiting job
	// that Slurm has not planned yet (squeue shows no expected start or no
	// planned nodes) the GPUs it may start on are not lent [unplanned_hold],
	// 0..1h, default 60s; 0 holds none. Keep it above SchedulerParameters'
	// bf_interval (Slurm's default 30s): a job is normally planned at the
	// first backfill pass after its submission, and from then on its planned
	// start bounds lends (planner.UnplannedJob).
	UnplannedHold Duration `toml:"unplanned_hold"`
	// NudgeEligible makes the daemon nudge Slurm's scheduler when a waiting
	// elastic job's begin time passes, as a requeued job's does
	// `cred_expire` after its requeue [nudge_eligible], default true: an
	// `scontrol update JobId=ID StartTime=now-300` of the eligible job (slurmctld raises it to its own now), once
	// while it waits, so that it starts at once rather than at the
	// scheduler's next pass (planner.PlanNudges). The daemon also runs one
	// extra cycle per poll_interval, 250 ms after the earliest such begin
	// time.
	NudgeEligible bool `toml:"nudge_eligible"`
	// ShedSlowNodes makes the daemon release the nodes of a running elastic
	// d2 job (--determinism=d2) that add nothing to its throughput
	// [shed_slow_nodes], default true where the Slurm series allows it: on a
	// mix of GPU types the optimal placement of its logical workers can
	// leave a slow node's GPUs without one while every all-reduce waits for
	// that node (planner.ShedNodes). When they are the last nodes of its
	// list, `scontrol update JobId=ID NumNodes=N` releases them for the jobs
	// waiting for them; the batch host is always kept, and only jobs in
	// Partitions and not in Admit.OffPartitions are touched (ShrinkOn).
	// Under Slurm the runtime places logical workers evenly rather than by
	// speed, so a worker on a released node is lost and its step redone,
	// as at any shrink; the job then runs at least as fast as before (the
	// best placement on the kept nodes is no slower than any on all). On
	// by default since it beat the policy without it over 960 cells
	// (BENCHMARKS.md, issue 17: E31). On a Slurm series it was not run on (daemon.MixedShrinkSafeSeries,
	// 22.05; on 24.11.5 slurmctld crashed after such a shrink) the default
	// is off, with one log line, and an explicit true is refused at start.
	ShedSlowNodes bool `toml:"shed_slow_nodes"`
	// shedDefaulted records that the file did not set shed_slow_nodes
	// (ShedSlowNodesDefaulted).
	shedDefaulted bool
	// speedsSet are the GPU types the file's [speeds] names, sorted
	// (SpeedsSet).
	speedsSet []string
	// KeepOffPinned keeps a pending elastic job that may run on several GPU
	// types (no type in its --gres) off the types that pinned jobs (jobs
	// naming one type, --gres=gpu:TYPE:N) queued ahead of it need, while its
	// other types can hold its request and serve it at least
	// planner.DefaultNearlyAsWell as fast (planner.KeepOff)
	// [keep_off_pinned], default true: the daemon adds the nodes those
	// pinned jobs may use to the pending job's excluded nodes (`scontrol
	// update JobId=ID ExcNodeList=...`) and takes exactly those out again
	// once no pinned job ahead needs them or the job's time limit has passed
	// since it was first kept off, and keeps it off no more (one spell per
	// job; issue 17, BENCHMARKS.md E38). Nodes the job's owner excluded stay excluded, and a list its
	// owner changes is left to the owner; only jobs in Partitions that may
	// run only on managed nodes are kept off.
	KeepOffPinned bool `toml:"keep_off_pinned"`
	// MoveToFaster moves a running elastic d2 job to faster GPU types
	// [move_to_faster], default true: when it runs on GPUs slower than
	// others of another type, idle or lent to this daemon's extra jobs
	// (which Slurm preempts for it), that no pending job may use, its time
	// left is at least a tenth of the longest other running job's
	// (planner.MoveAmongLongest) and the move ends it sooner
	// (planner.MoveToFaster; weighed at the GPUs it holds, its extra jobs'
	// included, when the faster nodes hold that many: it restarts on its
	// own node count and grows onto the rest), the daemon requeues it
	// (`scontrol requeue`), cancels its extra jobs, adds the slower nodes
	// (its own and the others it may run on) to its excluded nodes while
	// it waits, and the runtime resumes it from its newest checkpoint on
	// the faster nodes, bit-identical. Once per job; jobs with an extra job
	// this daemon did not record, jobs Slurm may not requeue, jobs naming a GPU type, a --nodelist or a
	// --constraint, job arrays and heterogeneous jobs, and jobs outside
	// Partitions (or in admit.off_partitions) are left alone, and a job
	// moves only onto nodes its partitions and --exclude allow; the
	// owner's excluded nodes are put back when the job waits again after
	// it ran (issue 17, BENCHMARKS.md E40, E54, E55). A d1 job that names
	// no GPU type is moved onto one type when its run starts over where
	// its checkpoint has other numerics (status comment numerics=start-over:
	// easyscale run --on-other-numerics=start-over), the work it has done
	// counted against the move (E59).
	MoveToFaster bool `toml:"move_to_faster"`
	// TradeUp moves a running elastic job's extra jobs to faster GPUs
	// [trade_up], default true: when GPUs of a faster type the job may
	// use are idle and no reservation needs them for the lend, and the
	// job still has long enough to run for its speed-up to pay two
	// resizes (rescale_cost) by 10 %, the daemon submits an extra job of
	// the same GPU count on the faster GPUs and, once sbatch took it, ends
	// the one on slower GPUs, in the same cycle, within the lend caps
	// (planner.TradeUpPays; issue 17, BENCHMARKS.md
	// E71). The job's own allocation stays (move_to_faster
	// moves that). false: never.
	TradeUp bool `toml:"trade_up"`
	// DrainHorizon raises the horizon that bounds shrink-to-admit and
	// start-small [drain_horizon], default true: besides the longest
	// time left of another user's running job, a running job may be made
	// to end as late as the managed nodes need at the least to run the
	// work of the running and pending jobs of users other than the queued
	// job's (planner.Drain: GPUs × time left or time limit × the GPUs'
	// speed, over the nodes' speed-weighted GPUs): ending by then it does
	// not set the makespan (issue 17, BENCHMARKS.md E41).
	DrainHorizon bool `toml:"drain_horizon"`
	// DryRun logs decisions without calling sbatch, scancel or scontrol update [dry_run];
	// the daemon then keeps its state in an in-memory copy of StateDB and
	// writes nothing on disk.
	DryRun bool `toml:"dry_run"`
	// StateDB is the daemon's SQLite file [state_db], default
	// /var/lib/easyscale/backfill.db; it must be on a local filesystem.
	StateDB string `toml:"state_db"`
	// MetricsAddress is where /metrics is served [metrics_address], a
	// host:port; "off" disables it. Default 127.0.0.1:9478.
	MetricsAddress string `toml:"metrics_address"`
	// Extra configures the extra jobs [extra].
	Extra Extra `toml:"extra"`
	// Limits caps what is lent [limits].
	Limits Limits `toml:"limits"`
	// Admit configures shrink-to-admit [admit].
	Admit Admit `toml:"admit"`
	// StartSmall configures starting a queued elastic job on fewer nodes
	// than it asked for [start_small].
	StartSmall StartSmall `toml:"start_small"`
	// Retry bounds how often an elastic job whose extra jobs fail is grown
	// again [retry].
	Retry Retry `toml:"retry"`
	// Retention bounds the rows state_db keeps [retention].
	Retention Retention `toml:"retention"`
	// Log configures logging [log].
	Log Log `toml:"log"`
}

// Extra configures the extra Slurm jobs that grow elastic jobs.
type Extra struct {
	// Partition is where extra jobs run [extra.partition], default "low":
	// it must be preemptible by the partitions of the jobs that wait
	// (PreemptType=preempt/partition_prio), which is the backstop when the
	// daemon is late.
	Partition string `toml:"partition"`
	// QOS is the extra jobs' QOS [extra.qos]; "" leaves Slurm's default.
	QOS string `toml:"qos"`
	// WorkerCommand is the extra job's batch script (sbatch --wrap)
	// [extra.worker_command], default [DefaultWorkerCommand]. Placeholders:
	// {job_id} (the elastic job), {rendezvous} (WorkDir/.easyscale/JOBID),
	// {coordinator_file} and {token_file} (inside it); each is replaced by
	// a shell-quoted value. Any other {word} is an error. It must launch
	// the worker with srun: the extra job has one task per lent GPU, and only
	// srun starts one worker per task (a command without the word srun is an
	// error).
	WorkerCommand string `toml:"worker_command"`
}

// Limits caps lending, per job and per user, and the imbalance allowed.
type Limits struct {
	// MaxExtraGPUsPerJob caps GPUs lent to one job [limits.max_extra_gpus_per_job], ≥ 0 (0: no cap).
	MaxExtraGPUsPerJob int `toml:"max_extra_gpus_per_job"`
	// MaxExtraGPUsPerUser caps GPUs lent to one user's jobs [limits.max_extra_gpus_per_user], ≥ 0 (0: no cap).
	MaxExtraGPUsPerUser int `toml:"max_extra_gpus_per_user"`
	// WasteCap is the largest fraction of a grown job's GPU time lost to
	// imbalance [limits.waste_cap], in (0, 1), default 0.30 (EasyScale §4.3).
	WasteCap float64 `toml:"waste_cap"`
}

// Admit configures shrink-to-admit: when a queued job cannot start, the
// daemon shrinks running elastic jobs by whole nodes (`scontrol update
// NumNodes=`) and raises their time limits so that it can (see the daemon
// package documentation, "Shrink-to-admit").
type Admit struct {
	// Enabled turns shrink-to-admit on [admit.enabled], default true:
	// without it, queued jobs wait behind elastic jobs that hold GPUs they
	// could give up, and elastic loses to rigid on mean JCT on Pollux
	// workloads 2, 4 and 8 (BENCHMARKS.md, issue 10). easyscale-simulate's
	// --policy elastic runs it too; --shrink-to-admit=false measures gap
	// filling alone.
	Enabled bool `toml:"enabled"`
	// OffPartitions lists partitions where it is off [admit.off_partitions]:
	// a running job in one is never shrunk, and a queued job in one never
	// makes another job shrink.
	OffPartitions []string `toml:"off_partitions"`
	// MaxLoss caps what one job may lose over its life
	// [admit.max_loss], in (0, 1], default 0.5: the fraction of the nodes
	// it had before its first shrink-to-admit (rounded down; a job whose cap
	// rounds to zero nodes is never shrunk). A job never goes below the
	// minimum of its request either.
	MaxLoss float64 `toml:"max_loss"`
	// Rule decides which jobs give up nodes and when [admit.rule],
	// default "objective": the planner's one objective (the donors that
	// lose least, only when they lose less than the queued job's wait,
	// never ending after the longest running job or the queued job's own
	// end by waiting: planner.AdmitOnNodes). "longest-left" is the rule
	// before it: jobs with more time left than the queued job's limit,
	// longest first.
	Rule string `toml:"rule"`
	// Horizon says how rule "objective" counts a donor's end against the
	// horizon (the latest end of the running jobs, the queued job's own
	// end by waiting, the drain bound) [admit.horizon], default
	// "returned": the donor gets its nodes back when the queued job's run
	// ends (planner.BorrowLoss, the loss the admission is weighed by).
	// "kept" counts it as if it ran to its end on the smaller allocation
	// (planner.ShrinkLoss), the count used before 5 December 2026: fewer
	// admissions, a longer mean JCT, a makespan guard that holds even when
	// the pool's queue takes the lent nodes for good (BENCHMARKS.md, E51).
	// "contested" counts "kept" for a donor whose pool is contested and
	// whose end is its pool's latest (planner.Pools.Kept: another pending
	// job besides the admitted one may use its GPU types, so the nodes it
	// lends go to the queue, not back to it, and no running elastic job of
	// another user on those types has more time left), "returned" for the
	// others: a shorter makespan for a longer mean JCT (BENCHMARKS.md,
	// E56).
	// Set with rule "longest-left", which weighs no horizon, it does
	// nothing ([Config.Warnings] says so).
	Horizon string `toml:"horizon"`
	// Allowance lets rule "objective" shrink a job past the horizon
	// [admit.allowance], ≥ 0 and at most 10, default 0.75
	// (planner.DefaultAdmitAllowance): as long as, its nodes counted as
	// never given back, it still ends within (1 + allowance) × its run at
	// the allocation it started on, from its start (planner.AllowedEnd):
	// its time limit before its first shrink, or its runtime's progress
	// report's pace when that is less (planner.StartRun).
	// 0: the horizon alone bounds it, and the job with the most time left
	// never yields while it has the most (BENCHMARKS.md, issue 17, E69).
	// Set with rule "longest-left" it does nothing.
	Allowance float64 `toml:"allowance"`
}

// The admit.rule values.
const (
	AdmitObjective   = "objective"
	AdmitLongestLeft = "longest-left"
)

// The admit.horizon values (planner.NodeObjective.AdmitHorizon).
const (
	AdmitHorizonContested = planner.HorizonContested
	AdmitHorizonReturned  = planner.HorizonReturned
	AdmitHorizonKept      = planner.HorizonKept
)

// StartSmall configures start-small: a queued job (any, in queue order,
// one per cycle), when it is an elastic EasyScale job waiting for
// resources, may start now on fewer
// nodes than it asked for (never below its --elastic minimum) when
// planner.StartSmall says so under Rule; the daemon then lowers its node
// count and raises its time limit to cover its work at that size plus a
// margin (TimeLimitMargin; `scontrol update JobId=… NumNodes=…
// TimeLimit=…`, an operator's right), on whole
// idle nodes that no other job's reservation names. The default,
// ends-earlier, is what easyscale-simulate's --policy elastic runs and
// BENCHMARKS.md measures ("The backfill policy on a heterogeneous
// cluster"); before issue 17 (no horizon, the queue head only) it was off
// by default, because ends-earlier then doubled mean JCT on Pollux
// workload 2.
type StartSmall struct {
	// Rule is off, before-reservation (it must end at the smaller size
	// before its own reserved start: nothing can move) or ends-earlier (it
	// ends earlier than by waiting, never after the running job that ends
	// last, and saves itself more than the queued jobs it would delay lose
	// past that end: planner.Cluster.CriticalDelay) [start_small.rule],
	// default ends-earlier.
	Rule string `toml:"rule"`
	// Partitions lists where it applies [start_small.partitions]; empty:
	// every partition.
	Partitions []string `toml:"partitions"`
}

// StartSmallRule is Rule parsed (Validate has checked it).
func (c *Config) StartSmallRule() planner.StartSmallRule {
	r, _ := planner.ParseStartSmallRule(c.StartSmall.Rule)
	return r
}

// StartSmallOn reports whether start-small may act for a queued job in
// partition p (a comma-separated list for a job queued in several: each
// must be one start_small.partitions lists, when it lists any).
func (c *Config) StartSmallOn(p string) bool {
	if c.StartSmallRule() == planner.StartSmallOff {
		return false
	}
	for _, one := range strings.Split(p, ",") { // a job queued in several: every one must allow it
		if len(c.StartSmall.Partitions) > 0 && !slices.Contains(c.StartSmall.Partitions, one) {
			return false
		}
	}
	return true
}

// Retry bounds the retries of failing lends: an extra job that ends on
// its own well before its time limit while its elastic job runs has failed
// (planner.LendEnd.Outcome), and so has one whose sbatch Slurm refused
// (planner.SubmitFailure.Outcome) or, on its node only, one cancelled
// after pending_timeout (planner.PendingLend.Outcome); the job is grown again only after a wait
// that doubles with each consecutive failure, job-wide and on the failed
// node, and not at all after StopAfter of them until its status changes
// (planner.RetryPolicy.MayLend; see the daemon package documentation,
// "Failing extra jobs").
type Retry struct {
	// Base is the wait after one failed lend [retry.base], 1s..24h,
	// default 1m; it doubles with each further consecutive failure.
	Base Duration `toml:"base"`
	// Max caps the wait [retry.max], base..24h, default 1h.
	Max Duration `toml:"max"`
	// StopAfter is how many consecutive failed lends stop growing a job
	// until its status changes [retry.stop_after], 0..1000, default 5;
	// 0: never stop (the waits still apply).
	StopAfter int `toml:"stop_after"`
}

// Retention bounds what state_db keeps, so that it does not grow without
// bound: ended extra jobs and decisions beyond the newest count, or older
// than MaxAge, are deleted every cycle (an ended extra job Slurm still
// lists is kept, so that it is still known as this daemon's).
type Retention struct {
	// Decisions is how many of the newest decisions are kept
	// [retention.decisions], 100..10000000, default 10000.
	Decisions int `toml:"decisions"`
	// EndedExtras is how many of the newest ended extra jobs are kept
	// [retention.ended_extras], 100..10000000, default 1000.
	EndedExtras int `toml:"ended_extras"`
	// MaxAge is how long an ended extra job or a decision is kept at most
	// [retention.max_age], 1h..8760h, default 168h (a week); finished
	// shrink-to-admit records of jobs no longer running go at this age too.
	MaxAge Duration `toml:"max_age"`
}

// RetryPolicy returns the planner's retry rule for this configuration.
func (c *Config) RetryPolicy() planner.RetryPolicy {
	return planner.RetryPolicy{BaseSeconds: int64(c.Retry.Base.Seconds()), MaxSeconds: int64(c.Retry.Max.Seconds()),
		StopAfter: c.Retry.StopAfter}
}

// Log configures the hclog logger.
type Log struct {
	// Level is trace, debug, info, warn or error [log.level], default info.
	Level string `toml:"level"`
	// JSON writes one JSON object per line [log.json].
	JSON bool `toml:"json"`
}

// ErrUnknownKeys is wrapped by the error for a file with keys this version
// does not know; the message lists them.
var ErrUnknownKeys = errors.New("unknown keys")

// FieldError is one invalid setting: the TOML key, the value as written and
// what to do about it.
type FieldError struct {
	Key   string
	Value string
	Fix   string
}

// Error formats the error as "KEY = VALUE: FIX".
func (e *FieldError) Error() string { return fmt.Sprintf("%s = %s: %s", e.Key, e.Value, e.Fix) }

// Load reads the file at path and returns the validated configuration with
// defaults filled in. Errors name the file; see [Parse].
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading backfill config: %w", err)
	}
	c, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("backfill config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes TOML text, rejects unknown keys (an error wrapping
// [ErrUnknownKeys] that lists them all), fills defaults and validates.
// Validation errors are [*FieldError]s joined with errors.Join.
func Parse(text string) (*Config, error) {
	var c Config
	md, err := toml.Decode(text, &c)
	if err != nil {
		return nil, fmt.Errorf("parsing TOML: %w", explainTypeMismatch(err))
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String() + whereItBelongs(k)
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("%w %s: remove or rename them (the keys are listed in contrib/backfill.toml, installed as PREFIX/share/easyscale/backfill.toml)", ErrUnknownKeys, strings.Join(keys, ", "))
	}
	c.applyDefaults(md.IsDefined)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// knownKeys maps each table ("" for the top level) to the keys Config
// accepts there, read from the toml tags.
func knownKeys() map[string]map[string]bool {
	out := map[string]map[string]bool{"": {}}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("toml")
		if f.Type.Kind() != reflect.Struct || f.Type == reflect.TypeFor[Duration]() {
			out[""][name] = true
			continue
		}
		out[name] = map[string]bool{}
		for j := range f.Type.NumField() {
			out[name][f.Type.Field(j).Tag.Get("toml")] = true
		}
	}
	return out
}

// whereItBelongs returns, for an unknown key that is known in another
// table, " (it belongs under [TABLE]: TABLE.KEY)" or " (it is a top-level
// key: ...)", else "". A top-level key written below a [table] header
// belongs to that table in TOML, a common slip.
func whereItBelongs(k toml.Key) string {
	if len(k) == 0 {
		return ""
	}
	name, table := k[len(k)-1], strings.Join(k[:len(k)-1], ".")
	known := knownKeys()
	var places []string
	for _, t := range slices.Sorted(maps.Keys(known)) {
		if t == table || !known[t][name] {
			continue
		}
		if t == "" {
			places = append(places, fmt.Sprintf("it is a top-level key: write %s above the first [table] header", name))
			continue
		}
		places = append(places, fmt.Sprintf("it belongs under [%s]: %s.%s", t, t, name))
	}
	if len(places) == 0 {
		if near := closestKey(known[table], name); near != "" {
			if table != "" {
				near = table + "." + near
			}
			return " (did you mean " + near + "?)"
		}
		return ""
	}
	return " (" + strings.Join(places, "; ") + ")"
}

// closestKey is the key of keys nearest to name by edit distance when it
// is a likely misspelling (at most 2 edits, and fewer than half of name's
// letters), else "". Ties go to the first in sorted order.
func closestKey(keys map[string]bool, name string) string {
	best, bestD := "", 3
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if d := spelling.Distance(k, name); d < bestD && 2*d < len([]rune(name)) {
			best, bestD = k, d
		}
	}
	return best
}

// warnedKeys are the keys [Config.Warnings] names when the file sets
// them where they do nothing (Config.set records which it set).
var warnedKeys = []string{"admit.rule", "admit.horizon", "admit.allowance", "admit.max_loss", "move_cost", "start_small.partitions"}

// Warnings lists, one sentence each, what the file sets that does
// nothing with its other settings (valid, so Validate does not refuse it;
// the daemon and --check-config print each): admit.rule, horizon,
// allowance and max_loss with shrink-to-admit off, admit.horizon and
// allowance with admit.rule "longest-left", move_cost with move_to_faster off, start_small.partitions with
// start_small.rule "off". Empty when there is none.
func (c *Config) Warnings() []string {
	var w []string
	if !c.Admit.Enabled {
		// Not admit.off_partitions: shedding and moves keep off those
		// partitions too (ShrinkOn; a tester's finding).
		for _, key := range []string{"admit.rule", "admit.horizon", "admit.allowance", "admit.max_loss"} {
			if c.set[key] {
				w = append(w, key+" does nothing: shrink-to-admit is off (admit.enabled = false)")
			}
		}
	} else if c.Admit.Rule == AdmitLongestLeft {
		if c.set["admit.horizon"] {
			w = append(w, fmt.Sprintf("admit.horizon = %q does nothing: admit.rule = %q weighs no horizon (only rule %q does); leave admit.horizon out, or set admit.rule = %q",
				c.Admit.Horizon, AdmitLongestLeft, AdmitObjective, AdmitObjective))
		}
		if c.set["admit.allowance"] {
			w = append(w, fmt.Sprintf("admit.allowance = %v does nothing: admit.rule = %q weighs no horizon (only rule %q does); leave admit.allowance out, or set admit.rule = %q",
				c.Admit.Allowance, AdmitLongestLeft, AdmitObjective, AdmitObjective))
		}
	}
	if c.set["move_cost"] && !c.MoveToFaster {
		w = append(w, "move_cost does nothing: move_to_faster = false")
	}
	if c.set["start_small.partitions"] && c.StartSmallRule() == planner.StartSmallOff {
		w = append(w, `start_small.partitions does nothing: start_small.rule = "off"`)
	}
	for i, t := range c.speedsSet {
		for _, u := range c.speedsSet[i+1:] {
			if strings.EqualFold(t, u) {
				w = append(w, fmt.Sprintf("speeds.%s and speeds.%s differ only in case: Slurm's GRES types are case-sensitive, so each "+
					"applies only to nodes whose GRES type is spelt so; keep the one spelt as `sinfo -o %%G` prints it", t, u))
			}
		}
	}
	return w
}

// SpeedsSet returns the GPU types the file's [speeds] names (sorted; the
// defaults, DefaultSpeeds, not among them): the daemon warns when one
// matches no node's GRES type but for its case.
func (c *Config) SpeedsSet() []string { return c.speedsSet }

// ShedSlowNodesDefaulted reports whether ShedSlowNodes is the default
// rather than set by the file: the daemon turns a default true off on a
// Slurm series where releasing nodes is not known to be safe, and refuses
// an explicit one.
func (c *Config) ShedSlowNodesDefaulted() bool { return c.shedDefaulted }

// Default returns the configuration of an empty file.
func Default() *Config {
	var c Config
	c.applyDefaults(func(...string) bool { return false })
	return &c
}

// applyDefaults fills every key the file does not set (defined reports
// whether it does), so that an explicit zero is validated, not replaced.
func (c *Config) applyDefaults(defined func(key ...string) bool) {
	dur := func(key string, d *Duration, v time.Duration) {
		if !defined(key) {
			d.Duration = v
		}
	}
	dur("poll_interval", &c.PollInterval, 10*time.Second)
	dur("max_backoff", &c.MaxBackoff, 5*time.Minute)
	dur("grace_period", &c.GracePeriod, 30*time.Second)
	dur("min_lend", &c.MinLend, 2*time.Minute)
	dur("max_lend", &c.MaxLend, time.Hour)
	dur("pending_timeout", &c.PendingTimeout, 30*time.Second)
	dur("safety_margin", &c.SafetyMargin, 60*time.Second)
	dur("rescale_cost", &c.RescaleCost, 30*time.Second)
	dur("move_cost", &c.MoveCost, 150*time.Second)
	dur("unplanned_hold", &c.UnplannedHold, 60*time.Second)
	if !defined("nudge_eligible") {
		c.NudgeEligible = true
	}
	if !defined("keep_off_pinned") {
		c.KeepOffPinned = true
	}
	if !defined("trade_up") {
		c.TradeUp = true
	}
	if !defined("move_to_faster") {
		c.MoveToFaster = true
	}
	if !defined("drain_horizon") {
		c.DrainHorizon = true
	}
	if c.shedDefaulted = !defined("shed_slow_nodes"); c.shedDefaulted {
		c.ShedSlowNodes = true
	}
	if !defined("retry", "base") {
		c.Retry.Base.Duration = time.Minute
	}
	if !defined("retry", "max") {
		c.Retry.Max.Duration = time.Hour
	}
	if !defined("retry", "stop_after") {
		c.Retry.StopAfter = 5
	}
	if !defined("retention", "decisions") {
		c.Retention.Decisions = 10000
	}
	if !defined("retention", "ended_extras") {
		c.Retention.EndedExtras = 1000
	}
	if !defined("retention", "max_age") {
		c.Retention.MaxAge.Duration = 7 * 24 * time.Hour
	}
	str := func(dst *string, v string, key ...string) {
		if !defined(key...) {
			*dst = v
		}
	}
	str(&c.StateDB, "/var/lib/easyscale/backfill.db", "state_db")
	str(&c.MetricsAddress, "127.0.0.1:9478", "metrics_address")
	str(&c.Extra.Partition, "low", "extra", "partition")
	str(&c.Extra.WorkerCommand, DefaultWorkerCommand, "extra", "worker_command")
	str(&c.Log.Level, "info", "log", "level")
	str(&c.StartSmall.Rule, planner.StartSmallEndsEarlier.String(), "start_small", "rule")
	str(&c.Admit.Rule, AdmitObjective, "admit", "rule")
	str(&c.Admit.Horizon, AdmitHorizonReturned, "admit", "horizon")
	c.set = map[string]bool{}
	for _, key := range warnedKeys {
		if defined(strings.Split(key, ".")...) {
			c.set[key] = true
		}
	}
	if !defined("limits", "waste_cap") {
		c.Limits.WasteCap = 0.30
	}
	if !defined("time_limit_margin") {
		c.TimeLimitMargin = 0.1
	}
	if !defined("admit", "max_loss") {
		c.Admit.MaxLoss = 0.5
	}
	if !defined("admit", "allowance") {
		c.Admit.Allowance = planner.DefaultAdmitAllowance
	}
	if !defined("admit", "enabled") {
		c.Admit.Enabled = true
	}
	c.speedsSet = sortedKeys(c.Speeds)
	speeds := make(map[string]float64, len(DefaultSpeeds)+len(c.Speeds))
	for t, s := range DefaultSpeeds {
		speeds[t] = s
	}
	for t, s := range c.Speeds {
		speeds[t] = s
	}
	c.Speeds = speeds
}

// The metrics endpoint can be turned off with this value of metrics_address.
const metricsOff = "off"

// MetricsEnabled reports whether /metrics is served (metrics_address is not
// "off").
func (c *Config) MetricsEnabled() bool { return c.MetricsAddress != metricsOff }

var (
	slurmName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	placeholder = regexp.MustCompile(`\{[a-z_]*\}`)
	srunWord    = regexp.MustCompile(`(^|[\s;&|(])srun(\s|$)`)
	// Placeholders lists what WorkerCommand may contain.
	placeholders = map[string]bool{"{job_id}": true, "{rendezvous}": true, "{coordinator_file}": true, "{token_file}": true}
)

// Validate checks every field and returns all problems, each a
// [*FieldError] with the fix, joined with errors.Join (nil when valid).
func (c *Config) Validate() error {
	var errs []error
	bad := func(key string, value any, fix string, args ...any) {
		errs = append(errs, &FieldError{Key: key, Value: fmt.Sprintf("%q", fmt.Sprint(value)), Fix: fmt.Sprintf(fix, args...)})
	}
	between := func(key string, d Duration, lo, hi time.Duration, example string) {
		if d.Duration < lo || d.Duration > hi {
			bad(key, d, "must be between %v and %v; e.g. %s = %q", lo, hi, key, example)
		}
	}
	between("poll_interval", c.PollInterval, time.Second, time.Hour, "10s")
	between("safety_margin", c.SafetyMargin, 0, time.Hour, "60s")
	between("grace_period", c.GracePeriod, time.Second, 30*time.Minute, "30s")
	between("min_lend", c.MinLend, time.Minute, 7*24*time.Hour, "2m")
	between("max_lend", c.MaxLend, time.Minute, 7*24*time.Hour, "1h")
	between("pending_timeout", c.PendingTimeout, time.Second, time.Hour, "30s")
	between("max_backoff", c.MaxBackoff, time.Second, 24*time.Hour, "5m")
	between("rescale_cost", c.RescaleCost, 0, time.Hour, "30s")
	between("move_cost", c.MoveCost, 0, time.Hour, "150s")
	between("unplanned_hold", c.UnplannedHold, 0, time.Hour, "60s")
	if c.MaxLend.Duration < c.MinLend.Duration {
		bad("max_lend", c.MaxLend, "must be at least min_lend (%v); raise max_lend or lower min_lend", c.MinLend)
	}
	if c.MaxBackoff.Duration < c.PollInterval.Duration {
		bad("max_backoff", c.MaxBackoff, "must be at least poll_interval (%v); max_backoff is 5m when not set: set it to %v or more, or lower poll_interval",
			c.PollInterval, c.PollInterval)
	}
	c.validateNames(bad)
	for _, t := range sortedKeys(c.Speeds) {
		if s := c.Speeds[t]; !(s > 0 && s <= 100) || math.IsNaN(s) {
			bad("speeds."+t, s, "a relative speed must be > 0 and ≤ 100 (the reference type is 1.0)")
		}
	}
	for _, t := range c.GPUTypes {
		if _, ok := c.Speeds[t]; !ok {
			bad("gpu_types", t, "GPU type %q has no speed: add it under [speeds], e.g. %s = 1.0", t, t)
		}
	}
	if c.Limits.MaxExtraGPUsPerJob < 0 {
		bad("limits.max_extra_gpus_per_job", c.Limits.MaxExtraGPUsPerJob, "must be ≥ 0 (0: no cap)")
	}
	if c.Limits.MaxExtraGPUsPerUser < 0 {
		bad("limits.max_extra_gpus_per_user", c.Limits.MaxExtraGPUsPerUser, "must be ≥ 0 (0: no cap)")
	}
	if w := c.Limits.WasteCap; !(w > 0 && w < 1) {
		bad("limits.waste_cap", w, "must be in (0, 1); EasyScale uses 0.30")
	}
	if m := c.TimeLimitMargin; !(m >= 0 && m <= 1) {
		bad("time_limit_margin", m, "must be in [0, 1]: the fraction of a resized job's remaining run time added to its raised time limit; e.g. time_limit_margin = 0.1")
	}
	if m := c.Admit.MaxLoss; !(m > 0 && m <= 1) {
		bad("admit.max_loss", m, "must be in (0, 1]: the fraction of a job's nodes shrink-to-admit may take; e.g. admit.max_loss = 0.5")
	}
	if a := c.Admit.Allowance; !(a >= 0 && a <= 10) {
		bad("admit.allowance", a, "must be in [0, 10]: how far past the horizon shrink-to-admit may make a job end, its expected end kept within (1 + allowance) × its run at its start allocation (its time limit before its first shrink, or its pace so far), counted from its start; e.g. admit.allowance = %v (0: never past the horizon)", planner.DefaultAdmitAllowance)
	}
	if r := c.Admit.Rule; r != AdmitObjective && r != AdmitLongestLeft {
		bad("admit.rule", r, "must be %q or %q", AdmitObjective, AdmitLongestLeft)
	}
	if h := c.Admit.Horizon; h != AdmitHorizonContested && h != AdmitHorizonReturned && h != AdmitHorizonKept {
		bad("admit.horizon", h, "must be %q, %q or %q", AdmitHorizonContested, AdmitHorizonReturned, AdmitHorizonKept)
	}
	c.validateRetry(bad)
	if _, err := planner.ParseStartSmallRule(c.StartSmall.Rule); err != nil {
		bad("start_small.rule", c.StartSmall.Rule, "must be off, before-reservation or ends-earlier")
	}
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		bad("log.level", c.Log.Level, "must be one of trace, debug, info, warn, error")
	}
	if c.MetricsAddress != metricsOff {
		if _, port, err := net.SplitHostPort(c.MetricsAddress); err != nil || port == "" {
			bad("metrics_address", c.MetricsAddress, "must be HOST:PORT, e.g. \"127.0.0.1:9478\", or \"off\"")
		}
	}
	if !strings.HasPrefix(c.StateDB, "/") {
		bad("state_db", c.StateDB, "must be an absolute path on a local disk, e.g. \"/var/lib/easyscale/backfill.db\"")
	}
	for _, p := range placeholder.FindAllString(c.Extra.WorkerCommand, -1) {
		if !placeholders[p] {
			bad("extra.worker_command", p, "unknown placeholder; use {job_id}, {rendezvous}, {coordinator_file} or {token_file}")
		}
	}
	if strings.TrimSpace(c.Extra.WorkerCommand) == "" {
		bad("extra.worker_command", c.Extra.WorkerCommand, "must not be blank; leave it out for the default")
	} else if !srunWord.MatchString(c.Extra.WorkerCommand) {
		bad("extra.worker_command", c.Extra.WorkerCommand, "must start the worker with srun (one task per lent GPU: "+
			"without srun only one worker runs and the other GPUs idle); e.g. %q", DefaultWorkerCommand)
	}
	return errors.Join(errs...)
}

func (c *Config) validateRetry(bad func(string, any, string, ...any)) {
	r := c.Retry
	if r.Base.Duration < time.Second || r.Base.Duration > 24*time.Hour {
		bad("retry.base", r.Base, "must be between 1s and 24h0m0s: the wait after one failed extra job, doubled per further failure; e.g. retry.base = \"1m\"")
	}
	if r.Max.Duration < r.Base.Duration || r.Max.Duration > 24*time.Hour {
		bad("retry.max", r.Max, "must be between retry.base (%v) and 24h0m0s: the longest wait between failing extra jobs; e.g. retry.max = \"1h\"", r.Base)
	}
	if r.StopAfter < 0 || r.StopAfter > 1000 {
		bad("retry.stop_after", r.StopAfter, "must be between 0 (never stop) and 1000: consecutive failed extra jobs after which a job is not grown until its status changes; e.g. retry.stop_after = 5")
	}
	k := c.Retention
	if k.Decisions < 100 || k.Decisions > 10_000_000 {
		bad("retention.decisions", k.Decisions, "must be between 100 and 10000000: the newest decisions state_db keeps; e.g. retention.decisions = 10000")
	}
	if k.EndedExtras < 100 || k.EndedExtras > 10_000_000 {
		bad("retention.ended_extras", k.EndedExtras, "must be between 100 and 10000000: the newest ended extra jobs state_db keeps; e.g. retention.ended_extras = 1000")
	}
	if k.MaxAge.Duration < time.Hour || k.MaxAge.Duration > 365*24*time.Hour {
		bad("retention.max_age", k.MaxAge, "must be between 1h0m0s and 8760h0m0s: how long state_db keeps an ended extra job or a decision; e.g. retention.max_age = \"168h\"")
	}
}

func (c *Config) validateNames(bad func(string, any, string, ...any)) {
	check := func(key string, names []string) {
		seen := map[string]bool{}
		for _, n := range names {
			if !slurmName.MatchString(n) {
				bad(key, n, "not a Slurm name (letters, digits, '_', '.', '-')")
			}
			if seen[n] {
				bad(key, n, "listed twice; remove the duplicate")
			}
			seen[n] = true
		}
	}
	check("partitions", c.Partitions)
	check("nodes", c.Nodes)
	check("gpu_types", c.GPUTypes)
	check("admit.off_partitions", c.Admit.OffPartitions)
	check("start_small.partitions", c.StartSmall.Partitions)
	if !slurmName.MatchString(c.Extra.Partition) {
		bad("extra.partition", c.Extra.Partition, "not a Slurm partition name; e.g. \"low\"")
	}
	if c.Extra.QOS != "" && !slurmName.MatchString(c.Extra.QOS) {
		bad("extra.qos", c.Extra.QOS, "not a Slurm QOS name; leave it out for the partition's default")
	}
	for t := range c.Speeds {
		if !slurmName.MatchString(t) {
			bad("speeds", t, "not a GRES type name")
		}
	}
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ShrinkOn reports whether the daemon may shrink a running job of
// partition p (shed_slow_nodes) for its own sake: p is one of partitions
// when that is set, and not one of admit.off_partitions, where "a running
// job is never shrunk".
func (c *Config) ShrinkOn(p string) bool {
	return everyPartition(p, func(one string) bool {
		return !slices.Contains(c.Admit.OffPartitions, one) && (len(c.Partitions) == 0 || slices.Contains(c.Partitions, one))
	})
}

// everyPartition reports whether ok holds for every partition of p, a
// comma-separated list as squeue prints it for a job queued in several.
func everyPartition(p string, ok func(partition string) bool) bool {
	for _, one := range strings.Split(p, ",") {
		if !ok(one) {
			return false
		}
	}
	return true
}

// AdmitOn reports whether shrink-to-admit may act in partition p (a
// comma-separated list for a job queued in several, as squeue prints it):
// it is enabled and none of them is in admit.off_partitions.
func (c *Config) AdmitOn(p string) bool {
	return c.Admit.Enabled && everyPartition(p, func(one string) bool { return !slices.Contains(c.Admit.OffPartitions, one) })
}
