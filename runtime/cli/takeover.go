package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/data"
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

// claim is what a standby that lost the coordinator does (claimTakeover).
type claim int

const (
	// claimRejoin: the coordinator lives (it holds the state database's
	// writer lock), or the state cannot be taken: rejoin it as a worker.
	claimRejoin claim = iota
	// claimTaken: the standby's copy is saved (or the directory has one
	// as new); this task coordinates from it.
	claimTaken
	// claimFinished: the training reached its stop step (the run's
	// trained record, or the state directory's checkpoint of that step)
	// and the coordinator released its state, so the goodbye that would
	// have told the standby so was lost (standbyFinished decides).
	claimFinished
)

// claimTakeover makes this worker task, the coordinator's standby that
// lost it, the job's coordinator (runtime/cluster standby.go): it opens
// the state database as its writer, which fails while the coordinator
// lives (it holds the writer lock; then claimRejoin), and saves the
// standby's copy of the committed state there as the checkpoint of its
// step unless the database has a checkpoint as new (claimTaken). The
// trainer then resumes from it; a requeued run too, should Slurm end this
// one. A run whose trained record is written (slurmjob.RecordTrained), or
// whose database's newest checkpoint is of its stop step, is a training
// that ended (claimFinished): the coordinator writes both, then says
// goodbye and releases the lock, so a standby gets the lock on a finished
// job when the goodbye is lost (docs/first-node-loss.md).
//
// A directory that holds no job is this node's copy of a node-local state
// directory (the coordinator's is out of reach): no lock fences the
// standby there, so it takes over only when the coordinator's listener no
// longer answers (coordinatorAnswers), creates the job from its copy,
// imports its copy of the ledger (importStandbyLedger) and saves the copy; a
// coordinator that lived on stops once it sees the takeover record
// (watchSuperseded).
func (s *slurmRun) claimTakeover(cp *cluster.StandbyCopy) (claim, error) {
	dir := s.stateDir()
	db, err := s.openToTakeOver(dir)
	var locked *statedb.LockedError
	if errors.As(err, &locked) {
		s.log.Info("the coordinator still holds the job's state: not taking over", "error", err)
		return claimRejoin, nil
	}
	if err != nil {
		return claimRejoin, fmt.Errorf("taking over: opening the state directory %s: %w", dir, err)
	}
	defer db.Close()
	if slurmjob.Trained(s.task.Rendezvous, s.rendezvousRun(context.Background())) {
		return claimFinished, nil
	}
	job, err := db.Job()
	if errors.Is(err, statedb.ErrNoJob) {
		// This node's copy of a node-local state directory: the
		// coordinator's died with its node, or the coordinator lives on
		// and its lock is out of sight. It must be gone, not only gone
		// from this connection.
		if addr, alive := s.coordinatorAnswers(); alive {
			s.log.Info("the state directory holds no job on this node and the coordinator still answers: not taking over",
				"state", dir, "coordinator", addr)
			return claimRejoin, nil
		}
		spec := cp.Spec
		if _, err := db.InitJob(statedb.Job{ID: spec.ID(), Name: spec.Name, Spec: spec.Canonical(), LogicalWorkers: spec.LogicalWorkers,
			Data: stateDataFiles(cp.Data)}); err != nil {
			return claimRejoin, fmt.Errorf("taking over: creating the job in the state directory %s: %w", dir, err)
		}
		s.log.Warn("the state directory holds no job on this node (it is node-local): created it from the standby's copy and its copy of the ledger",
			"state", dir, "step", cp.Step, "ledger_rows", cp.Ledger.Count(cp.Step))
		job.ID = spec.ID()
	} else if err != nil {
		return claimRejoin, fmt.Errorf("taking over: reading the job of %s: %w", dir, err)
	}
	if job.ID != cp.Spec.ID() {
		return claimRejoin, fmt.Errorf("taking over: the state directory %s holds job %s, the standby's copy is of %s", dir, job.ID, cp.Spec.ID())
	}
	s.importStandbyLedger(db, cp)
	ck, _, err := db.LatestCheckpoint()
	if err != nil {
		return claimRejoin, fmt.Errorf("taking over: reading the checkpoints of %s: %w", dir, err)
	}
	if ck != nil && s.stop > 0 && ck.Step >= s.stop {
		return claimFinished, nil
	}
	if ck != nil && ck.Step >= cp.Step {
		s.log.Info("the state directory has a checkpoint as new as the standby's copy", "step", ck.Step, "standby_step", cp.Step)
		return claimTaken, nil
	}
	if cp.File != nil { // an engine's copy: its process's checkpoint file (torch)
		err = db.SaveCheckpointFile(cp.Step, cp.File, cp.Contexts)
	} else {
		snap := cp.Checkpoint()
		err = db.SaveCheckpoint(cp.Step, snap.Tensors, snap.Contexts, snap.Meta)
	}
	if err != nil {
		return claimRejoin, fmt.Errorf("taking over: saving the standby's copy: %w", err)
	}
	return claimTaken, nil
}

// importStandbyLedger adds to db the rows of the standby's copy of the
// coordinator's ledger (cp.Ledger, steps 1..cp.Step) that db lacks: a
// node-local state directory created at the takeover, or one this node
// kept from an earlier run, would otherwise hold the job's ledger from the
// takeover on only. Only the missing rows are written (after the
// directory's last row, or in its gaps); a shared directory, the
// coordinator's own, lacks none. A failed import is logged and does not
// stop the takeover (the ledger then has a gap, which the trainer
// reports).
func (s *slurmRun) importStandbyLedger(db *statedb.DB, cp *cluster.StandbyCopy) {
	if cp.Ledger.Count(cp.Step) == 0 {
		return
	}
	last, has, err := db.LastStep()
	if err != nil {
		s.log.Warn("taking over: reading the ledger's last step", "error", err)
		return
	}
	gaps, err := db.MissingLedgerSteps()
	if err != nil {
		s.log.Warn("taking over: reading the ledger's gaps", "error", err)
		return
	}
	rows := slices.DeleteFunc(cp.Ledger.Through(cp.Step), func(e statedb.LedgerEntry) bool {
		return has && e.Step <= last && !slices.ContainsFunc(gaps, func(g statedb.StepRange) bool { return g.From <= e.Step && e.Step <= g.To })
	})
	if len(rows) == 0 {
		return
	}
	added, err := db.ImportLedger(rows)
	if err != nil {
		s.log.Warn("taking over: importing the standby's copy of the ledger", "step", cp.Step, "rows", len(rows), "error", err)
		return
	}
	s.log.Info("taking over: imported the standby's copy of the ledger", "step", cp.Step, "rows", added)
}

// defaultLockGrace is how long a standby that lost the coordinator waits
// for the state database's writer lock while the coordinator's address
// does not answer. A dying process closes its files one by one: its
// connection to the standby can close before its lock is released (lab,
// 2026-12-02, load 33 on 2 cores: the standby found the lock still held by
// the SIGKILLed coordinator's process 6 ms after losing it, rejoined a
// dead coordinator and nothing trained until the requeue).
const defaultLockGrace = 5 * time.Second

// openToTakeOver opens the state directory dir as its writer for a
// standby's takeover. While the writer lock is held and the coordinator
// does not answer at its address (coordinatorAnswers), it tries again
// every 50 ms for s.lockGrace; it returns the *statedb.LockedError at once
// when the coordinator answers (it lives: the standby rejoins it), and
// after the grace otherwise.
func (s *slurmRun) openToTakeOver(dir string) (*statedb.DB, error) {
	grace := s.lockGrace
	if grace == 0 {
		grace = defaultLockGrace
	}
	deadline := time.Now().Add(grace)
	for {
		db, err := statedb.OpenWith(dir, statedb.Options{AllowNetworkFS: s.allowNFS})
		var locked *statedb.LockedError
		if !errors.As(err, &locked) || time.Now().After(deadline) {
			return db, err
		}
		if _, alive := s.coordinatorAnswers(); alive {
			return db, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// defaultEndGrace is how long a standby that found the training finished
// waits for the coordinator's exit status (standbyFinished). The
// coordinator records it right after releasing the state: after its local
// worker left (at most 5 s) and the summary is written.
const defaultEndGrace = 15 * time.Second

// standbyFinished decides for a standby that found the training finished
// (claimFinished) whether the job ended normally: it waits up to
// s.endGrace for the coordinator's exit status in the rendezvous
// directory, and reports true (this task exits 0 at once, as a worker of
// an ended job) when it comes. Without it the coordinator died between the
// end of the training and its record, with the batch script perhaps: the
// caller then records a takeover and the exit status 0 and ends the job
// (endAfterTakeover), training nothing.
func (s *slurmRun) standbyFinished(ctx context.Context) bool {
	grace := s.endGrace
	if grace == 0 {
		grace = defaultEndGrace
	}
	dir, run := s.task.Rendezvous, s.rendezvousRun(ctx)
	deadline := time.Now().Add(grace)
	for {
		if code, ok := slurmjob.Ended(dir, run); ok {
			s.log.Info("the training had ended and the coordinator recorded its exit status: not taking over",
				"slurm_job_id", s.task.JobID, "exit_status", code)
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.log.Warn("the training had ended but the coordinator recorded no exit status: taking over to end the job",
				"slurm_job_id", s.task.JobID, "waited", grace.String())
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// takeoverWorker runs this worker task until it ends, or until, as the
// coordinator's standby, it lost the coordinator and claimed its place: it
// then returns the copy it resumes from (and the caller coordinates). A
// standby that lost the coordinator of a training that had ended
// normally returns cluster.ErrJobEnded.
func (s *slurmRun) takeoverWorker(ctx context.Context, run func() error) (*cluster.StandbyCopy, error) {
	for {
		err := run()
		var te *cluster.TakeoverError
		if !errors.As(err, &te) {
			return nil, err
		}
		lostAt := time.Now()
		s.log.Warn("lost the coordinator as its standby: taking over", "slurm_job_id", s.task.JobID, "step", te.Copy.Step,
			"node", s.task.NodeName, "error", te.Cause)
		c, err := s.claimTakeover(te.Copy)
		if err != nil {
			te.Copy.Release()
			s.log.Error("cannot take over; rejoining", "error", err)
			continue
		}
		if c != claimTaken {
			te.Copy.Release()
		}
		if c == claimFinished {
			if !s.standbyFinished(ctx) {
				// The coordinator died between the end of its training
				// and its record, perhaps with the batch script: this
				// task ends the job in its place, training nothing (a
				// node-local state directory here may be empty).
				s.takeoverAt = lostAt
				s.recordTakeover(s.stop)
				s.endAfterTakeover(ctx, 0)
			}
			return nil, cluster.ErrJobEnded
		}
		if c == claimTaken {
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
	if s.requeueOrphan(ctx, 2*time.Second, 30*time.Second, code == 0) {
		s.log.Info("requeued the job to end it: its batch script ran on the lost node", "slurm_job_id", s.task.JobID)
	}
}

// stateDataFiles is the job-identity form of the data manifest, as the
// trainer stores it.
func stateDataFiles(m data.Manifest) []statedb.DataFile {
	out := make([]statedb.DataFile, len(m))
	for i, f := range m {
		out[i] = statedb.DataFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
	}
	return out
}

// coordinatorAnswers dials the coordinator's address as the rendezvous
// directory names it and waits for the first byte of its handshake (the
// coordinator sends its challenge on every connection it accepts): a
// coordinator whose process lives answers (its listener is open until its
// run ends); a dead process's port refuses, a dead node's times out (2 s).
// A TCP connect alone is no answer: the kernel completes it on a listening
// socket whatever the process does, and a SIGKILLed coordinator's socket
// still accepted while its files were being closed (lab, 2026-12-02: the
// standby found the writer lock held, saw the address "answer", rejoined
// the dead coordinator and failed its handshake with a reset).
func (s *slurmRun) coordinatorAnswers() (string, bool) {
	addr, ok := slurmjob.CoordinatorAddr(s.task.Rendezvous, s.rendezvousRun(context.Background()))
	if !ok {
		return "", false
	}
	return addr, answers(addr, 2*time.Second)
}

// answers reports whether a process listening at addr sends a byte on a
// new connection within timeout (the connect included).
func answers(addr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	defer c.Close()
	if err := c.SetReadDeadline(deadline); err != nil {
		return false
	}
	var b [1]byte
	n, _ := c.Read(b[:])
	return n == 1
}

// recordTrained notes in the rendezvous directory that this run's
// training reached its stop step, before the coordinator says goodbye
// (slurmjob.RecordTrained; claimTakeover reads it).
func (s *slurmRun) recordTrained(ctx context.Context, step int64) {
	if err := slurmjob.RecordTrained(s.task.Rendezvous, s.rendezvousRun(ctx), step); err != nil {
		s.log.Warn("recording the end of the training", "error", err)
	}
}

// watchSuperseded checks every period, until the returned stop is called,
// whether another task took over this run's coordination: the run's
// takeover record names another takeover than this task's own (none for
// task 0). That happens only where the state directory is node-local (no
// shared writer lock fences the standby) and the standby lost this
// coordinator while it lived. This task then stops coordinating: it sets
// superseded and cancels its run (supersede), which records no exit
// status; the taking-over task's training is the job's.
func (s *slurmRun) watchSuperseded(ctx context.Context, period time.Duration) (stop func()) {
	dir, run := s.task.Rendezvous, s.rendezvousRun(ctx)
	own, _ := slurmjob.TakenOver(dir, run)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if rec, ok := slurmjob.TakenOver(dir, run); ok && rec != own {
				s.log.Error("another task took over this run's coordination: stopping", "slurm_job_id", s.task.JobID, "takeover", rec)
				s.superseded.Store(true)
				if s.supersede != nil {
					s.supersede()
				}
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// trainedByTakeover reports whether the job's previous run (this one is a
// requeue) was coordinated after a takeover and ended with exit status 0:
// its training is done, and the requeue only ends the job, whose batch
// script died with the lost first node (endAfterTakeover). This run's
// task 0 then trains nothing, whatever its node's state directory holds (a
// node-local one may be empty, or an old copy). why is the takeover
// record.
func (s *slurmRun) trainedByTakeover() (why string, done bool) {
	if s.task.RestartCount < 1 {
		return "", false
	}
	prev := slurmjob.Run{JobID: s.task.JobID, Restart: s.task.RestartCount - 1}
	rec, ok := slurmjob.TakenOver(s.task.Rendezvous, prev)
	if !ok {
		return "", false
	}
	if code, ended := slurmjob.Ended(s.task.Rendezvous, prev); !ended || code != 0 {
		return "", false
	}
	s.log.Info("the training ended in the previous run after a takeover: nothing to do", "slurm_job_id", s.task.JobID,
		"restart", s.task.RestartCount, "takeover", rec)
	return rec, true
}
