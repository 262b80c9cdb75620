package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// stateDir is the job's state directory on Slurm: --state, or the
// rendezvous directory's state/.
func (s *slurmRun) stateDir() string {
	if s.state != "" {
		return s.state
	}
	return filepath.Join(s.task.Rendezvous, "state")
}

// claimTakeover makes this worker task, the coordinator's standby that
// lost it, the job's coordinator (runtime/cluster standby.go): it opens
// the state database as its writer, which fails while the coordinator
// lives (it holds the writer lock; then false and nil: rejoin it), and
// saves the standby's copy of the committed state there as the checkpoint
// of its step unless the database has a checkpoint as new. The trainer
// then resumes from it; a requeued run too, should Slurm end this one.
func (s *slurmRun) claimTakeover(cp *cluster.StandbyCopy) (bool, error) {
	dir := s.stateDir()
	db, err := statedb.OpenWith(dir, statedb.Options{AllowNetworkFS: s.allowNFS})
	var locked *statedb.LockedError
	if errors.As(err, &locked) {
		s.log.Info("the coordinator still holds the job's state: not taking over", "error", err)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("taking over: opening the state directory %s: %w", dir, err)
	}
	defer db.Close()
	job, err := db.Job()
	if err != nil {
		return false, fmt.Errorf("taking over: reading the job of %s: %w", dir, err)
	}
	if job.ID != cp.Spec.ID() {
		return false, fmt.Errorf("taking over: the state directory %s holds job %s, the standby's copy is of %s", dir, job.ID, cp.Spec.ID())
	}
	ck, _, err := db.LatestCheckpoint()
	if err != nil {
		return false, fmt.Errorf("taking over: reading the checkpoints of %s: %w", dir, err)
	}
	if ck != nil && ck.Step >= cp.Step {
		s.log.Info("the state directory has a checkpoint as new as the standby's copy", "step", ck.Step, "standby_step", cp.Step)
		return true, nil
	}
	snap := cp.Checkpoint()
	if err := db.SaveCheckpoint(cp.Step, snap.Tensors, snap.Contexts, snap.Meta); err != nil {
		return false, fmt.Errorf("taking over: saving the standby's copy: %w", err)
	}
	return true, nil
}

// takeoverWorker runs this worker task until it ends, or until, as the
// coordinator's standby, it lost the coordinator and claimed its place: it
// then returns the copy it resumes from (and the caller coordinates).
func (s *slurmRun) takeoverWorker(run func() error) (*cluster.StandbyCopy, error) {
	for {
		err := run()
		var te *cluster.TakeoverError
		if !errors.As(err, &te) {
			return nil, err
		}
		lostAt := time.Now()
		s.log.Warn("lost the coordinator as its standby: taking over", "slurm_job_id", s.task.JobID, "step", te.Copy.Step,
			"node", s.task.NodeName, "error", te.Cause)
		ok, err := s.claimTakeover(te.Copy)
		if err != nil {
			s.log.Error("cannot take over; rejoining", "error", err)
			continue
		}
		if ok {
			s.takeoverAt = lostAt
			return te.Copy, nil
		}
	}
}

// recordTakeover notes in the rendezvous directory that this task took
// over at step (slurmjob.RecordTakeover).
func (s *slurmRun) recordTakeover(step int64) {
	run := s.rendezvousRun(context.Background())
	if err := slurmjob.RecordTakeover(s.task.Rendezvous, run, step, s.task.NodeName, s.takeoverAt); err != nil {
		s.log.Warn("recording the takeover", "error", err)
	}
}

// endAfterTakeover records the exit status of a run this task coordinated
// after taking over, as task 0 does, and then ends the job when its batch
// script is gone: the script ran on the lost first node, so nothing
// would end the job, which Slurm keeps RUNNING (sbatch --no-kill) until its
// time limit. Once Slurm sets the batch host DOWN the job is requeued
// (requeueOrphan): the requeued run finds the training finished in the
// state directory and ends COMPLETED within seconds. When the batch host is
// not down (the coordinator's process died, not its node) the batch
// script ends the job when this step's tasks end.
func (s *slurmRun) endAfterTakeover(ctx context.Context, code int) {
	s.recordExit(code)
	if s.requeueOrphan(ctx, 2*time.Second, 30*time.Second) {
		s.log.Info("requeued the job to end it: its batch script ran on the lost node", "slurm_job_id", s.task.JobID)
	}
}
