package trainer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// openState opens the state database, checks that it belongs to this job
// and restores the newest valid checkpoint into the engine.
func (j *job) openState() error {
	db, err := statedb.OpenWith(j.opts.StateDir, statedb.Options{AllowNetworkFS: j.opts.AllowNetworkFS})
	if err != nil {
		return fmt.Errorf("opening state directory %s: %w", j.opts.StateDir, err)
	}
	j.db = db
	if live, ok := statedb.KeptRunOf(j.opts.StateDir); ok {
		j.log.Warn("the state directory is a run kept by a start-over (--on-other-numerics=start-over): this run resumes "+
			"that old run, not the job's live state; give the job's own state directory to continue the job",
			"state", j.opts.StateDir, "live_state", live)
	}
	spec := j.opts.Spec
	existing, err := db.InitJob(statedb.Job{ID: spec.ID(), Name: spec.Name, Spec: spec.Canonical(), LogicalWorkers: j.n, Created: time.Now(),
		Data: dataFiles(j.eng.Data())})
	if errors.Is(err, statedb.ErrJobMismatch) {
		if old, jerr := db.Job(); jerr == nil {
			if diff := jobspec.Diff(old.Spec, spec.Canonical()); len(diff) > 0 {
				return fmt.Errorf("state directory %s: %w (fields that differ: %s)", j.opts.StateDir, err, strings.Join(diff, ", "))
			}
		}
	}
	var dm *statedb.DataMismatchError
	if errors.As(err, &dm) {
		for _, f := range j.eng.Data() {
			if f.Name == dm.File && f.Path != "" {
				return fmt.Errorf("%w (this run read %s)", err, f.Path)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("state directory %s: %w", j.opts.StateDir, err)
	}
	if !existing {
		return j.recordNumerics()
	}
	ck, skipped, err := db.LatestCheckpoint()
	for _, s := range skipped {
		j.log.Warn("skipping unusable checkpoint", "error", s)
	}
	if err != nil {
		return fmt.Errorf("reading checkpoints in %s: %w", j.opts.StateDir, err)
	}
	var from int64
	if ck != nil {
		from = ck.Step
	}
	if err := j.warnCorruptLedger(from); err != nil {
		return err
	}
	if last, ok, err := db.LastStep(); err == nil && ok {
		j.rehashTo = last
	}
	if ck == nil {
		if err := j.checkLedgerNumerics(); err != nil {
			return err
		}
		j.log.Info("no usable checkpoint; starting from step 0", "state", j.opts.StateDir)
		return nil
	}
	if err := j.eng.Restore(ck); err != nil {
		if !errors.Is(err, ErrOtherNumerics) || !j.opts.StartOverOnOtherNumerics {
			return fmt.Errorf("restoring checkpoint %s: %w", ck.Path, err)
		}
		if err := j.refuseFinished(max(ck.Step, j.rehashTo), err); err != nil {
			return fmt.Errorf("restoring checkpoint %s: %w", ck.Path, err)
		}
		return j.startOver(ck.Step, err)
	}
	// Recorded once a step of this run is in the ledger: the checkpoint's
	// numerics are this run's, but an older one may have none.
	j.numericsPending = true
	j.step, j.resumedFrom = ck.Step, ck.Step
	if rows, err := db.Ledger(ck.Step, ck.Step); err == nil && len(rows) == 1 {
		j.lastLoss = rows[0].Loss // the loss a run that resumes at its end reports
	}
	j.log.Info("resumed", "step", ck.Step, "checkpoint", ck.Path)
	return nil
}

// startOver starts the job over from step 0 because its state up to step
// (its checkpoint's, or with none its ledger's last) was computed with
// other numerics (why): the state so far is kept under the state directory
// (statedb.DB.StartOver) and the engine, which loaded none of it, begins
// from the job's initial state.
func (j *job) startOver(step int64, why error) error {
	superseded, err := j.db.StartOver()
	if err != nil {
		return fmt.Errorf("starting the job over after its state of step %d was refused (%v): %w", step, why, err)
	}
	j.rehashTo, j.step, j.resumedFrom = 0, 0, 0
	j.startedOver = &StartedOver{FromStep: step, Reason: why.Error(), Superseded: superseded}
	j.log.Warn("starting the job over from step 0 (--on-other-numerics=start-over): its state was computed with "+
		"other numerics than this run's; the result will be bit-identical to a fixed run in this environment",
		"step", step, "superseded", superseded, "reason", why.Error())
	return j.recordNumerics()
}

// checkLedgerNumerics is for a run that found no usable checkpoint (a job
// killed before its first, or after a start-over before its next): the
// ledger rows it would recompute and compare must have been computed with
// this run's numerics (NumericsRecorder, against the record kept beside
// them). Other numerics fail the run naming them, or start the job over
// with Options.StartOverOnOtherNumerics; no record (a native job, an older
// state directory) or no rows: nothing to compare.
func (j *job) checkLedgerNumerics() error {
	nr, ok := j.eng.(NumericsRecorder)
	if !ok {
		return nil
	}
	last, rows, err := j.db.LastStep()
	if err != nil {
		return err
	}
	if !rows {
		return j.recordNumerics()
	}
	record, err := j.db.Numerics()
	if err == nil && record != "" {
		err = nr.CheckNumerics(record, last)
	}
	switch {
	case err == nil && record != "":
		return nil
	case err == nil || !errors.Is(err, ErrOtherNumerics):
		// No record (an older state directory, or deleted) or one that
		// does not read: the recomputed rows are still compared with the
		// ledger's, and this run's numerics are recorded once one matched.
		if err != nil {
			j.log.Warn("the ledger's numerics record does not read: not compared; the recomputed steps are still "+
				"compared with the ledger", "state", j.opts.StateDir, "error", err)
		}
		j.numericsPending = true
		return nil
	case !j.opts.StartOverOnOtherNumerics:
		return fmt.Errorf("state directory %s: %w", j.opts.StateDir, err)
	}
	if ferr := j.refuseFinished(last, err); ferr != nil {
		return fmt.Errorf("state directory %s: %w", j.opts.StateDir, ferr)
	}
	return j.startOver(last, err)
}

// refuseFinished is why for a job whose state (a checkpoint or the
// ledger) reaches step at or past its horizon, worded for a finished job,
// which is not started over (FinishedRefusal); nil for a job not
// finished. A finished job's result stands even when its last checkpoint
// was lost (a tester's: such a job was started over and redone).
func (j *job) refuseFinished(step int64, why error) error {
	if step < j.horizon {
		return nil
	}
	var f FinishedRefusal
	if errors.As(why, &f) {
		return f.Finished(step)
	}
	return fmt.Errorf("the job finished at step %d: its result stands, and --on-other-numerics=start-over does not "+
		"redo a finished job (a new --state directory does); its state cannot be resumed here: %w", step, why)
}

// recordPendingNumerics records this run's numerics after the step just
// appended to the ledger, when they were left unrecorded at the start
// (numericsPending) and the step was hashed (a recomputed hashed step was
// compared with the ledger's row).
func (j *job) recordPendingNumerics(hashed bool) error {
	if !j.numericsPending || !hashed {
		return nil
	}
	j.numericsPending = false
	return j.recordNumerics()
}

// recordNumerics keeps this run's numerics beside the ledger it computes
// from now on (NumericsRecorder; statedb.DB.SetNumerics).
func (j *job) recordNumerics() error {
	nr, ok := j.eng.(NumericsRecorder)
	if !ok {
		return nil
	}
	record, err := nr.NumericsRecord()
	if err != nil {
		return fmt.Errorf("recording the numerics of the job's ledger: %w", err)
	}
	return j.db.SetNumerics(record)
}

// warnCorruptLedger warns about each ledger row that does not match its
// checksum, naming its step: a row after from (the step the run resumes
// at) is rewritten when the step is recomputed, an earlier one stays and
// `easyscale verify` and `status` report it.
func (j *job) warnCorruptLedger(from int64) error {
	bad, err := j.db.CheckLedger()
	if err != nil {
		return fmt.Errorf("checking the ledger in %s: %w", j.opts.StateDir, err)
	}
	gaps, err := j.db.MissingLedgerSteps()
	if err != nil {
		return fmt.Errorf("checking the ledger in %s: %w", j.opts.StateDir, err)
	}
	for _, g := range gaps {
		fix := "they are before the checkpoint the run resumes from and stay missing; easyscale verify and status report them"
		if g.From > from {
			fix = "the resumed run recomputes and records them"
		}
		j.log.Warn("ledger rows are missing: deleted outside easyscale", "steps", g.String(), "state", j.opts.StateDir, "consequence", fix)
	}
	for _, step := range bad {
		fix := "it is before the checkpoint the run resumes from and stays unverifiable; easyscale verify and status report it"
		if step > from {
			fix = "the resumed run recomputes the step and rewrites the row, but cannot compare it with the original"
		}
		j.log.Warn("ledger row does not match its checksum: changed outside easyscale", "step", step,
			"state", j.opts.StateDir, "consequence", fix)
	}
	return nil
}

// dataFiles is the job-identity form of a workload's data manifest.
func dataFiles(m data.Manifest) []statedb.DataFile {
	out := make([]statedb.DataFile, len(m))
	for i, f := range m {
		out[i] = statedb.DataFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
	}
	return out
}

// checkpoint saves the engine's snapshot of the current step.
func (j *job) checkpoint() error {
	t0 := time.Now()
	snap, err := j.eng.Snapshot(context.Background(), j.step)
	if err != nil {
		return fmt.Errorf("checkpointing step %d: %w", j.step, err)
	}
	if snap.File != nil {
		err = j.db.SaveCheckpointFile(j.step, snap.File, snap.Contexts)
	} else {
		meta := map[string]string{"job_id": j.opts.Spec.ID(), "step": strconv.FormatInt(j.step, 10), "digest": j.digest}
		for k, v := range snap.Meta {
			meta[k] = v
		}
		err = j.db.SaveCheckpoint(j.step, snap.Tensors, snap.Contexts, meta)
	}
	if err != nil {
		return fmt.Errorf("checkpointing step %d: %w", j.step, err)
	}
	j.log.Debug("checkpoint", "step", j.step, "ms", time.Since(t0).Milliseconds())
	return nil
}
