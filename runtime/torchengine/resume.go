package torchengine

import (
	"encoding/json"
	"fmt"
	"strings"
)

// NumericsMeta is the checkpoint metadata key under which the Python
// process that writes a checkpoint records what it computes with: JSON of
// a [Loaded]'s versions, fingerprint and canary (worker.py NUMERICS_META).
const NumericsMeta = "easyscale.numerics"

// ResumeError refuses to resume from a checkpoint written by processes that
// computed other bits than this run's: its Differences name each setting
// ("torch: checkpoint 1.13.0a0, this run 2.6.0", "fingerprint
// cpu_capability: checkpoint AVX2, this run DEFAULT").
//
// Within one run every process is admitted against the job's first one
// ([Admit]), but a resume starts a new first process: without this check a
// job requeued onto a node with another CPU ISA dispatch
// (ATEN_CPU_CAPABILITY, measured here: the final digest differs), another
// GPU model or another torch release resumed silently and ended with other
// bits than its fixed run.
type ResumeError struct {
	Step        int64
	Differences []string
}

func (e *ResumeError) Error() string {
	return fmt.Sprintf("the checkpoint of step %d was written by workers that compute other bits than this run's (%s): "+
		"resuming would break the job's bit-identity with its fixed run; resume where it ran before (the same torch, "+
		"Python, CPU or GPU model and pinned environment variables), or start the job over with a new --state directory",
		e.Step, strings.Join(e.Differences, "; "))
}

// checkResume compares the numerics a checkpoint of step recorded (meta's
// NumericsMeta; a checkpoint written before it was recorded has none and is
// not compared) with this run's first process's. It returns a
// *ResumeError when they differ, and an error naming the key when the
// record does not read.
func checkResume(meta map[string]string, step int64, this Loaded) error {
	text, ok := meta[NumericsMeta]
	if !ok {
		return nil
	}
	var rec Loaded
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		return fmt.Errorf("the checkpoint of step %d: its numerics record (metadata %s) does not read: %w", step, NumericsMeta, err)
	}
	var diffs []string
	if rec.Torch != this.Torch {
		diffs = append(diffs, fmt.Sprintf("torch: checkpoint %s, this run %s", orUnknown(rec.Torch), orUnknown(this.Torch)))
	}
	if rec.Python != this.Python {
		diffs = append(diffs, fmt.Sprintf("Python: checkpoint %s, this run %s", orUnknown(rec.Python), orUnknown(this.Python)))
	}
	for _, d := range numericsDiffs(rec, this) {
		diffs = append(diffs, d.String("checkpoint", "this run"))
	}
	if diffs != nil {
		return &ResumeError{Step: step, Differences: diffs}
	}
	return nil
}
