package planner

import "slices"

// BeginHeld is a waiting elastic job that Slurm holds by its begin time
// (squeue Reason "BeginTime"): every requeued job is, for `cred_expire`
// after its requeue (120 s by default; Slurm's job_mgr.c sets the begin
// time of a requeued job to now + the credential lifetime + 1), and so is a
// job submitted with --begin.
type BeginHeld struct {
	// ID is the Slurm job id.
	ID string
	// Begin is its begin time in Unix seconds, as squeue prints it in a
	// pending job's StartTime while it lies ahead by slurmctld's clock; 0
	// when squeue prints none, which it does once the begin time has passed.
	Begin int64
}

// MaxNudgesPerCycle bounds the nudges of one round, so that however many
// jobs users hold by begin times the daemon adds at most this many
// `scontrol update` calls to a cycle.
const MaxNudgesPerCycle = 4

// NudgePlan is what one round does about jobs held by their begin time.
type NudgePlan struct {
	// Nudge are the jobs to nudge now, in the order given.
	Nudge []string
	// WakeAt is the earliest begin time squeue still prints (Unix
	// seconds), when the next round should look again; 0 when it prints
	// none.
	WakeAt int64
}

// PlanNudges decides which jobs held by their begin time to nudge: a job
// whose begin time has passed is eligible, but Slurm starts it only at its
// scheduler's next pass, and a job that becomes eligible by the clock
// alone is no event: the main scheduler waits for its sched_interval (60 s
// by default) and backfill skips passes in which no job, node or partition
// changed (measured on the lab: 2–17 s after the begin time;
// docs/first-node-loss.md). A nudge is an update of the job's begin time to
// a time in the past, which slurmctld raises to its own now (job_mgr.c
// `_update_job`), so for an eligible job it changes nothing but is an
// event: slurmctld runs its scheduler after any job update (proc_req.c
// `_slurm_rpc_update_job` → `queue_job_scheduler`); on the lab the job
// started 0.2 s after it. Only a job whose begin time slurmctld itself
// says has passed (squeue prints none: Begin 0) is nudged, whatever the
// daemon's clock says, so a nudge never starts a job early; each once
// while it stays held (nudged reports the jobs already nudged), at most
// [MaxNudgesPerCycle] a round. For a begin time squeue still prints the
// plan says when to look again.
func PlanNudges(jobs []BeginHeld, nudged func(id string) bool) NudgePlan {
	var p NudgePlan
	for _, j := range jobs {
		if j.Begin != 0 {
			if p.WakeAt == 0 || j.Begin < p.WakeAt {
				p.WakeAt = j.Begin
			}
			continue
		}
		if len(p.Nudge) < MaxNudgesPerCycle && !nudged(j.ID) && !slices.Contains(p.Nudge, j.ID) {
			p.Nudge = append(p.Nudge, j.ID)
		}
	}
	return p
}
