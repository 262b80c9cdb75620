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
	// pending job's StartTime while it lies ahead; 0 when squeue prints
	// none, which it does once the begin time has passed.
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
	// WakeAt is the second after the earliest begin time still ahead (Unix
	// seconds), when the next round should look again; 0 when none lies
	// ahead.
	WakeAt int64
}

// PlanNudges decides which jobs held by their begin time to nudge at now
// (Unix seconds): a job whose begin time has passed (Begin 0 or ≤ now) is
// eligible, but Slurm starts it only at its scheduler's next pass, and a
// job that becomes eligible by the clock alone is no event: the main
// scheduler waits for its sched_interval (60 s by default) and backfill
// skips passes in which no job, node or partition changed (measured on the
// lab: 7–17 s after the begin time; docs/first-node-loss.md). A nudge is an
// update of the job's begin time to now, which for an eligible job changes
// nothing but is an event: slurmctld runs its scheduler after any job
// update (proc_req.c `_slurm_rpc_update_job` → `queue_job_scheduler`;
// job_mgr.c raises a begin time in the past to now), and the job started
// 0.6–0.9 s after it on the lab. Each job is nudged once while it stays
// held (nudged reports the jobs already nudged), at most
// [MaxNudgesPerCycle] a round; a job whose begin time lies ahead is never
// nudged (that would start it early), only woken for.
func PlanNudges(jobs []BeginHeld, now int64, nudged func(id string) bool) NudgePlan {
	var p NudgePlan
	for _, j := range jobs {
		if j.Begin > now {
			if p.WakeAt == 0 || j.Begin+1 < p.WakeAt {
				p.WakeAt = j.Begin + 1
			}
			continue
		}
		if len(p.Nudge) < MaxNudgesPerCycle && !nudged(j.ID) && !slices.Contains(p.Nudge, j.ID) {
			p.Nudge = append(p.Nudge, j.ID)
		}
	}
	return p
}
