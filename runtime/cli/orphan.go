package cli

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// defaultSlurmdTimeout is slurm.conf's default SlurmdTimeout (seconds), the
// bound of the wait for Slurm's verdict on a silent batch host when
// `scontrol show config` does not say.
const defaultSlurmdTimeout = 300 * time.Second

// fitTimeout bounds fitRequeued's Slurm commands (under slurm.conf's
// default KillWait, 30 s); it tries fitTries times, fitPause apart.
const (
	fitTimeout = 10 * time.Second
	fitTries   = 5
	fitPause   = 300 * time.Millisecond
)

// requeueOrphan is asked by a worker task that lost its coordinator for good
// (unreachable for JoinTimeout). When Slurm declares the job's batch host
// down — the node of task 0, which runs the coordinator and the batch
// script — no coordinator can come back in this allocation, and an elastic
// job (sbatch --no-kill, which easyscale-sbatch adds) then stays RUNNING on
// the other nodes, idle, until its time limit (seen on the lab). The task
// requeues the job (`scontrol requeue`), which resumes from its newest
// checkpoint, as Slurm would have done without --no-kill, with its task
// and node counts lowered to its remaining nodes (fitRequeued, on the Slurm
// series where that is safe: requeueFitSafeSeries). Slurm notices a
// dead node only when its pings go unanswered, so a batch host that is
// not DOWN is asked about again every poll, for at most the cluster's
// SlurmdTimeout plus margin; if it is still not DOWN then, the coordinator
// ended some other way (a crash on a healthy node, whose workers so exit 1
// that much later) and nothing is done. It reports whether it requeued the
// job.
//
// finished says the training is done (a standby that took over finished
// it): the requeued run only ends the job, on any node, so the job asks
// for the nodes it still had however few; otherwise the requeued run
// resumes training and asks for at least its elastic minimum.
func (s *slurmRun) requeueOrphan(ctx context.Context, poll, margin time.Duration, finished bool) bool {
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
			// Slurm's own handling of the node failure SIGTERMs this step's
			// tasks about now, which cancels ctx (seen in a clean-clone run:
			// "scontrol requeue: context canceled", and the job, requeued by
			// Slurm unfitted, waited for the lost node): the requeue and the
			// fit are this task's last acts and run on a context of their
			// own, bounded by fitTimeout, as fitRequeued's queries do.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fitTimeout)
			defer cancel()
			fit := s.requeueFitSafe(rctx) // before the requeue, whose SIGTERM kills queries
			if out, err := s.runner.Output(rctx, "scontrol", "requeue", s.task.JobID); err != nil {
				s.log.Error("requeuing the job", "slurm_job_id", s.task.JobID, "error", err, "output", string(out))
				return false
			}
			if fit {
				s.fitRequeued(ctx, finished)
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

// requeueFitSafeSeries are the Slurm release series on which a job just
// requeued may be fitted to its nodes (fitRequeued) without harm. On 24.11
// the fit corrupts accounting: a requeued job stays PENDING|COMPLETING
// until its epilog completes, and only then does slurmctld give it its new
// submit time and database index (job_mgr.c
// `_set_requeued_job_pending_completing`: "do this after the epilog
// complete"), while the fit's node count change makes `_update_job` send
// the job's record to slurmdbd at once ("updating accounting"). For a job
// that lost a node and so was resized, slurmdbd refuses that record
// ("Duplicate entry ... for key 'id_job'"), slurmctld logs "DBD_ID_RC is
// -1", and the batch is retried every few seconds, losing other jobs'
// records with it: on the 24.11 lab a later job's requeued run was missing
// from sacct (3 December 2026). The window ends only when every process of
// the job, the fitting task among them, has exited, so no task of the job
// can wait it out.
var requeueFitSafeSeries = []string{"22.05"}

// requeueFitSafe reports whether the Slurm series is in
// requeueFitSafeSeries, logging once why the requeued job will not be
// fitted when it is not (or cannot be read).
func (s *slurmRun) requeueFitSafe(ctx context.Context) bool {
	series, err := s.runner.Series(ctx)
	if err == nil && slices.Contains(requeueFitSafeSeries, series) {
		return true
	}
	s.log.Warn("the requeued job keeps its node count and waits for as many nodes as it had before the loss: fitting it "+
		"to the survivors corrupts accounting on this Slurm", "slurm_job_id", s.task.JobID, "slurm_series", series,
		"safe_series", strings.Join(requeueFitSafeSeries, ","), "error", err)
	return false
}

// fitRequeued makes the just requeued job ask for the nodes it still had
// (at least its elastic minimum, unless finished: see requeueOrphan) and
// the tasks those hold
// (slurmcli.Runner.FitRequeued): Slurm keeps the lost node in the job's
// minimum node count and task count, and the requeued job would otherwise
// stay PENDING until that node returns (a tester's 4-node job lost one and
// read NumNodes=3 NumTasks=4 at --ntasks-per-node=1). A failure is logged:
// the job then waits for the node, as before. A job that is not elastic
// keeps its request.
//
// The requeue makes Slurm send SIGTERM to every process of this step: to
// this task, whose context it cancels, and to a squeue or scontrol started
// just before it arrives (both seen on the lab: the fit never ran, then
// its squeue was "signal: terminated"). Slurm signals once, and SIGKILL
// follows only after KillWait, so the fit runs on a context of its own,
// bounded by fitTimeout, and is tried again fitTries times fitPause apart.
func (s *slurmRun) fitRequeued(ctx context.Context, finished bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fitTimeout)
	defer cancel()
	minNodes := 0
	if req, err := elastic.FromEnv(os.LookupEnv).Request(); err == nil {
		minNodes = req.MinNodes
	}
	if finished {
		minNodes = 1 // the requeued run only ends the job (a tester's --elastic=4 job waited for the lost node)
	}
	var fit slurmcli.Refit
	var err error
	for try := 1; try <= fitTries; try++ {
		if fit, err = s.runner.FitRequeued(ctx, s.task.JobID, minNodes); err == nil || ctx.Err() != nil {
			break
		}
		s.log.Debug("fitting the requeued job to its nodes", "slurm_job_id", s.task.JobID, "try", try, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(fitPause):
		}
	}
	switch {
	case err != nil:
		s.log.Warn("the requeued job may wait for the lost node: its node and task counts could not be lowered", "slurm_job_id", s.task.JobID, "error", err)
	case fit.Nodes > 0:
		s.log.Info("the requeued job asks for fewer nodes than before the loss", "slurm_job_id", s.task.JobID,
			"nodes", fit.Nodes, "still_had", fit.Had, "tasks", fit.Tasks, "training_finished", finished)
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

// slurmdTimeout reads SlurmdTimeout from `scontrol show config`: how long
// slurmctld waits for a silent node before it sets it DOWN.
func (s *slurmRun) slurmdTimeout(ctx context.Context) time.Duration {
	out, err := s.runner.Output(ctx, "scontrol", "show", "config")
	if err != nil {
		return defaultSlurmdTimeout
	}
	d, err := slurmcli.ParseSlurmdTimeout(out)
	if err != nil {
		return defaultSlurmdTimeout
	}
	return d
}
