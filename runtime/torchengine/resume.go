package torchengine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// NumericsMeta is the checkpoint metadata key under which the Python
// process that writes a checkpoint records what it computes with: JSON of
// a [Loaded]'s versions, fingerprint and canary (worker.py NUMERICS_META).
const NumericsMeta = "easyscale.numerics"

// ResumeError refuses to resume from a checkpoint written by processes that
// computed other bits than this run's: its Differences name each setting
// ("torch: checkpoint 1.13.0a0, this run 2.6.0", "cpu_isa: checkpoint
// ... avx512f ..., this run ... avx2").
//
// Within one run every process is admitted against the job's first one
// ([Admit]), but a resume starts a new first process: without this check a
// job requeued onto a node with another CPU ISA dispatch
// (ATEN_CPU_CAPABILITY, measured here: the final digest differs), another
// CPU or GPU model or another torch release resumed silently and ended
// with other bits than its fixed run.
type ResumeError struct {
	Step        int64
	Differences []string
	// Ledger: no usable checkpoint; the ledger's rows up to Step were
	// computed with these numerics (the state directory's record,
	// Engine.CheckNumerics), and this run would recompute them.
	Ledger bool
	// FinishedAt > 0: the job finished at that step, and the error offers
	// no start-over (trainer.FinishedRefusal): its result stands.
	FinishedAt int64
}

// Finished returns a copy of e for a job finished at step
// (trainer.FinishedRefusal).
func (e *ResumeError) Finished(step int64) error {
	c := *e
	c.FinishedAt = step
	return &c
}

// Is makes a ResumeError match trainer.ErrOtherNumerics, which the trainer
// acts on (a failed run, or a start-over with
// trainer.Options.StartOverOnOtherNumerics).
func (e *ResumeError) Is(target error) bool { return target == trainer.ErrOtherNumerics }

func (e *ResumeError) Error() string {
	what := fmt.Sprintf("the checkpoint of step %d was written", e.Step)
	if e.Ledger {
		what = fmt.Sprintf("no checkpoint is usable, and the ledger's steps up to %d were computed", e.Step)
	}
	if e.FinishedAt > 0 {
		return fmt.Sprintf("the job finished at step %d: its result stands, and a finished job is not started over "+
			"(--on-other-numerics=start-over redoes only an unfinished one); %s by workers that compute other bits than "+
			"this run's (%s), so it cannot be resumed here: read its result where it ran, or run it again with a new --state directory",
			e.FinishedAt, what, strings.Join(e.Differences, "; "))
	}
	return fmt.Sprintf("%s by workers that compute other bits than this run's (%s): "+
		"resuming would break the job's bit-identity with its fixed run; resume where it ran before (the same torch, "+
		"Python, CPU or GPU model and pinned environment variables), or start the job over: with --on-other-numerics=start-over "+
		"(the state so far is kept under the state directory's superseded/) or with a new --state directory",
		what, strings.Join(e.Differences, "; "))
}

// canaryOnly is what a differing canary with no differing setting means.
const canaryOnly = " (no recorded setting differs: another CPU or GPU model, or another BLAS or oneDNN build)"

// resumeCheck is what checkResume compared: Recorded is false for a
// checkpoint without a record (written before records were kept, or an
// empty one), which is not compared at all; Unrecorded lists the settings
// this run records that the record lacks (sorted; "canary digest" when it
// has none), which are not compared. The caller warns about both: a
// setting not compared may differ.
type resumeCheck struct {
	Recorded   bool
	Unrecorded []string
}

// checkResume compares the numerics a checkpoint of step recorded (meta's
// NumericsMeta) with this run's first process's: versions, the fingerprint
// settings both record (a release that records more settings still
// resumes a checkpoint of one that recorded fewer: resumeCheck.Unrecorded)
// and the canary. It returns a *ResumeError when they differ, and an error
// naming the key when the record does not read.
func checkResume(meta map[string]string, step int64, this Loaded) (resumeCheck, error) {
	text, ok := meta[NumericsMeta]
	if !ok {
		return resumeCheck{}, nil
	}
	var rec *Loaded
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		return resumeCheck{}, fmt.Errorf("the checkpoint of step %d: its numerics record (metadata %s) does not read: %w", step, NumericsMeta, err)
	}
	if rec == nil || (rec.Versions == Versions{} && len(rec.Fingerprint) == 0 && rec.Canary == "") {
		return resumeCheck{}, nil
	}
	check := resumeCheck{Recorded: true}
	for k := range this.Fingerprint {
		if _, ok := rec.Fingerprint[k]; !ok {
			check.Unrecorded = append(check.Unrecorded, k)
		}
	}
	slices.Sort(check.Unrecorded)
	if rec.Canary == "" && this.Canary != "" {
		check.Unrecorded = append(check.Unrecorded, "canary digest")
		rec.Canary = this.Canary // not compared
	}
	var diffs []string
	if rec.Torch != this.Torch {
		diffs = append(diffs, fmt.Sprintf("torch: checkpoint %s, this run %s", orUnknown(rec.Torch), orUnknown(this.Torch)))
	}
	if rec.Python != this.Python {
		diffs = append(diffs, fmt.Sprintf("Python: checkpoint %s, this run %s", orUnknown(rec.Python), orUnknown(this.Python)))
	}
	settings := 0
	for _, d := range numericsDiffs(*rec, this, true) {
		switch d.Setting {
		case "torch": // the fingerprint repeats the version compared above
			continue
		case "canary digest":
			if settings == 0 && len(diffs) == 0 {
				d.Setting += canaryOnly
			}
		default:
			settings++
		}
		diffs = append(diffs, d.String("checkpoint", "this run"))
	}
	if diffs != nil {
		return check, &ResumeError{Step: step, Differences: diffs}
	}
	return check, nil
}

// NumericsRecord is this run's numerics as the state directory keeps them
// beside the ledger (trainer.NumericsRecorder): JSON of the first
// process's versions, fingerprint and canary, the form of NumericsMeta.
func (e *Engine) NumericsRecord() (string, error) {
	ref := e.local.ref
	if ref == nil {
		return "", errors.New("no Python process has loaded the job yet")
	}
	b, err := json.Marshal(struct {
		Versions
		Fingerprint map[string]any `json:"fingerprint"`
		Canary      string         `json:"canary"`
	}{ref.Versions, ref.Fingerprint, ref.Canary})
	return string(b), err
}

// CheckNumerics compares the numerics record the state directory kept for
// its ledger (NumericsRecord of the run that computed its rows up to
// lastStep) with this run's, as a checkpoint's are (checkResume): a
// *ResumeError (matching trainer.ErrOtherNumerics) when they differ, an
// error naming the record when it does not read.
func (e *Engine) CheckNumerics(record string, lastStep int64) error {
	if e.local.ref == nil {
		return errors.New("no Python process has loaded the job yet")
	}
	_, err := checkResume(map[string]string{NumericsMeta: record}, lastStep, *e.local.ref)
	var re *ResumeError
	if errors.As(err, &re) {
		re.Ledger = true
		return err
	}
	if err != nil {
		return fmt.Errorf("the state directory's %s does not read: %w", statedb.NumericsFile, errors.Unwrap(err))
	}
	return nil
}

// RecordDifferences compares two numerics records as state directories
// keep them beside their ledgers (NumericsRecord, statedb.NumericsFile)
// and lists the settings that differ, each worded with the labels la and
// lb ("torch: A 1.13.0, B 2.6.0"; settings only one records are not
// compared); none when they match or either record is empty. `easyscale
// verify` prints them: two runs computed with other numerics are not
// expected to agree. Errors: a record that does not read.
func RecordDifferences(a, b, la, lb string) ([]string, error) {
	if a == "" || b == "" {
		return nil, nil
	}
	var ra, rb Loaded
	if err := json.Unmarshal([]byte(a), &ra); err != nil {
		return nil, fmt.Errorf("numerics record of %s: %w", la, err)
	}
	if err := json.Unmarshal([]byte(b), &rb); err != nil {
		return nil, fmt.Errorf("numerics record of %s: %w", lb, err)
	}
	var diffs []string
	if ra.Torch != rb.Torch {
		diffs = append(diffs, fmt.Sprintf("torch: %s %s, %s %s", la, orUnknown(ra.Torch), lb, orUnknown(rb.Torch)))
	}
	if ra.Python != rb.Python {
		diffs = append(diffs, fmt.Sprintf("Python: %s %s, %s %s", la, orUnknown(ra.Python), lb, orUnknown(rb.Python)))
	}
	for _, d := range numericsDiffs(ra, rb, true) {
		if d.Setting != "torch" { // the version compared above
			diffs = append(diffs, d.String(la, lb))
		}
	}
	return diffs, nil
}

var _ trainer.NumericsRecorder = (*Engine)(nil)
