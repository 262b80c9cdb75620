package cli

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// defaultSlurmdTimeout is slurm.conf's default SlurmdTimeout (seconds), the
// bound of the wait for Slurm's verdict on a silent batch host when
// `scontrol show config` does not say.
const defaultSlurmdTimeout = 300 * time.Second

// requeueOrphan is asked by a worker task that lost its coordinator for good
// (unreachable for JoinTimeout). When Slurm declares the job's batch host
// down — the node of task 0, which runs the coordinator and the batch
// script — no coordinator can come back in this allocation, and an elastic
// job (sbatch --no-kill, which easyscale-sbatch adds) then stays RUNNING on
// the other nodes, idle, until its time limit (seen on the lab). The task
// requeues the job (`scontrol requeue`), which resumes from its newest
// checkpoint, as Slurm would have done without --no-kill. Slurm notices a
// dead node only when its pings go unanswered, so a batch host that is
// not DOWN is asked about again every poll, for at most the cluster's
// SlurmdTimeout plus margin; if it is still not DOWN then, the coordinator
// ended some other way (a crash on a healthy node, whose workers so exit 1
// that much later) and nothing is done. It reports whether it requeued the
// job.
func (s *slurmRun) requeueOrphan(ctx context.Context, poll, margin time.Duration) bool {
	deadline := time.Now().Add(s.slurmdTimeout(ctx) + margin)
	for {
		job, err := s.runner.Job(ctx, s.task.JobID)
		if err != nil {
			s.log.Warn("asking Slurm about the job after losing the coordinator", "slurm_job_id", s.task.JobID, "error", err)
			return false
		}
		if job.State != "RUNNING" || job.BatchHost == "" {
			return false // requeued (by another task), ending, or not a batch job: nothing to do
		}
		state := s.nodeState(ctx, job.BatchHost)
		if strings.Contains(state, "DOWN") {
			s.log.Warn("the batch host is down and with it the coordinator: requeuing the job to resume from its checkpoint",
				"slurm_job_id", s.task.JobID, "node", job.BatchHost, "state", state)
			if out, err := s.runner.Output(ctx, "scontrol", "requeue", s.task.JobID); err != nil {
				s.log.Error("requeuing the job", "slurm_job_id", s.task.JobID, "error", err, "output", string(out))
				return false
			}
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.log.Info("the batch host is not down: leaving the job alone", "slurm_job_id", s.task.JobID, "node", job.BatchHost, "state", state)
			return false
		}
		s.log.Info("the coordinator is gone; waiting for Slurm's verdict on the batch host", "slurm_job_id", s.task.JobID,
			"node", job.BatchHost, "state", state)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(poll):
		}
	}
}

// nodeState is the node's state in `scontrol show node` ("" when unknown).
func (s *slurmRun) nodeState(ctx context.Context, name string) string {
	nodes, err := s.runner.ShowNodes(ctx)
	if err != nil {
		return ""
	}
	for _, n := range nodes {
		if n.Name == name {
			return n.State
		}
	}
	return ""
}

var slurmdTimeoutLine = regexp.MustCompile(`(?m)^SlurmdTimeout\s*=\s*(\d+) sec`)

// slurmdTimeout reads SlurmdTimeout from `scontrol show config`: how long
// slurmctld waits for a silent node before it sets it DOWN.
func (s *slurmRun) slurmdTimeout(ctx context.Context) time.Duration {
	out, err := s.runner.Output(ctx, "scontrol", "show", "config")
	if err != nil {
		return defaultSlurmdTimeout
	}
	m := slurmdTimeoutLine.FindSubmatch(out)
	if m == nil {
		return defaultSlurmdTimeout
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil || n <= 0 {
		return defaultSlurmdTimeout
	}
	return time.Duration(n) * time.Second
}
