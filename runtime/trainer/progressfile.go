package trainer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"
)

// ProgressFile is the file in the state directory where a running job
// keeps its position, for `easyscale status` (steps and ETA).
const ProgressFile = "progress.json"

// Progress is the content of ProgressFile.
type Progress struct {
	Step    int64 `json:"step"`
	Stop    int64 `json:"stop"`
	Horizon int64 `json:"horizon"`
	Workers int   `json:"workers"`
	// StepSeconds is the mean wall time of recent steps.
	StepSeconds float64   `json:"step_seconds"`
	Updated     time.Time `json:"updated"`
	Done        bool      `json:"done"`
	// DigestEvery is the ledger digest's interval K (0 while it is being
	// measured) and DigestCostPct hashing's measured cost in percent of a
	// step (absent when not measured).
	DigestEvery   int      `json:"digest_every_steps"`
	DigestCostPct *float64 `json:"digest_cost_pct,omitempty"`
}

// ReadProgress reads dir's ProgressFile.
func ReadProgress(dir string) (Progress, error) {
	var p Progress
	b, err := os.ReadFile(filepath.Join(dir, ProgressFile))
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

// writeProgress rewrites ProgressFile at most once a second (always when
// done), through a temporary file and a rename. Failures are logged only:
// the file is informational.
func (j *job) writeProgress(stepTime time.Duration, done bool) {
	if j.opts.StateDir == "" {
		return
	}
	const alpha = 0.2
	if j.stepSeconds == 0 {
		j.stepSeconds = stepTime.Seconds()
	} else if stepTime > 0 {
		j.stepSeconds = alpha*stepTime.Seconds() + (1-alpha)*j.stepSeconds
	}
	if !done && time.Since(j.progressAt) < time.Second {
		return
	}
	j.progressAt = time.Now()
	p := Progress{Step: j.step, Stop: j.stop, Horizon: j.horizon, StepSeconds: j.stepSeconds, Updated: j.progressAt, Done: done}
	if j.eng != nil {
		p.Workers = j.eng.Workers()
	}
	if j.digests != nil {
		p.DigestEvery = j.digests.Every()
		if _, ratio, ok := j.digests.Cost(); ok {
			pct := 100 * ratio
			p.DigestCostPct = &pct
		}
	}
	b, _ := json.Marshal(p)
	path := filepath.Join(j.opts.StateDir, ProgressFile)
	// through an exclusive temporary file renamed over path: a link
	// planted under a temporary name is never followed
	if err := renameio.WriteFile(path, b, 0o600); err != nil {
		j.log.Debug("writing progress", "error", err)
	}
}
