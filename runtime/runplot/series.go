package runplot

import (
	"fmt"
	"math"
	"strings"
)

// Run is what a picture shows of one training run: its job, the per-step
// ledger and the allocation history, as the run's state directory records
// them (ReadRun), or made by hand in tests.
type Run struct {
	// Label names the run in the legend (ReadRun: the state directory's
	// base name).
	Label string
	// JobID is the job's identity (hex SHA-256 of its canonical spec): runs
	// drawn together must share it.
	JobID string
	// JobName is the job file's name, shown in the title.
	JobName string
	// LogicalWorkers is N, the job's number of logical workers (ESTs).
	LogicalWorkers int
	// Steps are the completed steps in increasing Step order, one per step.
	Steps []Step
	// Allocations is the allocation history in recorded order.
	Allocations []Allocation
}

// Step is one completed step of the ledger.
type Step struct {
	// Step is the number of steps completed with this one (1 for the
	// first); it ran under the allocation in force from step Step-1.
	Step int64
	// Loss is the step's mean training loss; NaN is not drawn.
	Loss float64
	// Workers is the number of physical workers that ran the step.
	Workers int
	// Redos is how often the step was executed beyond the first (workers
	// lost mid-step, or recomputed after a resume); Redo marks it.
	Redos int
	Redo  bool
	// Digest is the parameters' "sha256:<hex>" after the step; empty when
	// Unhashed.
	Digest string
	// Unhashed marks a step whose digest the engine did not compute (the
	// torch engine hashes every K steps when hashing is costly): it is not
	// compared.
	Unhashed bool
}

// Allocation is one entry of the allocation history: from step boundary
// Step (steps completed before it) the run had Workers physical workers
// with ESTs placed as Placement ("0-3|4-7"), for Reason ("schedule",
// "lost workers", "membership", ...).
type Allocation struct {
	Step      int64
	Workers   int
	Placement string
	Reason    string
}

// Reallocation is a change of the allocation at a step boundary: from
// From to To physical workers (equal when only the placement changed).
type Reallocation struct {
	Step     int64
	From, To int
	Reason   string
}

// Reallocations returns the changes in r's allocation history: every entry
// after the first whose workers or placement differ from the entry before
// (a resumed run records its allocation again; that is not a change).
func (r Run) Reallocations() []Reallocation {
	var out []Reallocation
	for i := 1; i < len(r.Allocations); i++ {
		prev, a := r.Allocations[i-1], r.Allocations[i]
		if a.Workers == prev.Workers && a.Placement == prev.Placement {
			continue
		}
		out = append(out, Reallocation{Step: a.Step, From: prev.Workers, To: a.Workers, Reason: a.Reason})
	}
	return out
}

// Redone returns the steps of r that were executed more than once.
func (r Run) Redone() []Step {
	var out []Step
	for _, s := range r.Steps {
		if s.Redo || s.Redos > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Agreement is how a run's digests compare with the first run's at the
// steps both recorded, as `easyscale verify` compares them.
type Agreement struct {
	// Common counts the steps both runs recorded and hashed; Last is the
	// highest of them.
	Common int
	Last   int64
	// Unhashed counts the steps both recorded but at least one did not
	// hash: not compared.
	Unhashed int
	// Diverged is the first compared step whose digests differ, or -1.
	Diverged int64
}

// Compare compares b's digests with a's step by step.
func Compare(a, b Run) Agreement {
	byStep := make(map[int64]Step, len(a.Steps))
	for _, s := range a.Steps {
		byStep[s.Step] = s
	}
	ag := Agreement{Diverged: -1}
	for _, s := range b.Steps {
		sa, ok := byStep[s.Step]
		switch {
		case !ok:
			continue
		case sa.Unhashed || s.Unhashed:
			ag.Unhashed++
			continue
		}
		ag.Common++
		ag.Last = max(ag.Last, s.Step)
		if sa.Digest != s.Digest && ag.Diverged < 0 {
			ag.Diverged = s.Step
		}
	}
	return ag
}

// lastHashed returns r's last step with a digest, ok false when none has.
func (r Run) lastHashed() (s Step, ok bool) {
	for i := len(r.Steps) - 1; i >= 0; i-- {
		if !r.Steps[i].Unhashed {
			return r.Steps[i], true
		}
	}
	return Step{}, false
}

// check returns an error naming what keeps runs from being drawn together:
// none given, a run without steps or with steps out of order, runs of
// different jobs.
func check(runs []Run) error {
	if len(runs) == 0 {
		return fmt.Errorf("drawing runs: no run given")
	}
	for _, r := range runs {
		if len(r.Steps) == 0 {
			return fmt.Errorf("drawing run %s: its ledger has no completed step yet", r.Label)
		}
		for i := 1; i < len(r.Steps); i++ {
			if r.Steps[i].Step <= r.Steps[i-1].Step {
				return fmt.Errorf("drawing run %s: step %d follows step %d; want increasing steps", r.Label, r.Steps[i].Step, r.Steps[i-1].Step)
			}
		}
		if r.JobID != runs[0].JobID {
			return fmt.Errorf("drawing runs %s and %s together: they are different jobs (%s %.19s and %s %.19s); a picture overlays runs of one job file",
				runs[0].Label, r.Label, runs[0].JobName, runs[0].JobID, r.JobName, r.JobID)
		}
	}
	return nil
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// plural returns "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, strings.TrimSuffix(thing, "s"))
}
