package runplot

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// ReadRun reads the run recorded in the state directory dir (a `easyscale
// run --state` directory, of either engine) read-only, so it works while
// the run goes on: the job, every ledger row and the allocation history.
// The label is dir's base name. It refuses, naming dir: a directory
// without a state database (statedb.ErrNoState), one that is not a
// readable SQLite database, ledger rows that do not match their checksums
// (statedb.ErrCorruptRow, the steps named), steps missing from the ledger
// (rows deleted outside easyscale), and a ledger without a completed step.
func ReadRun(dir string) (Run, error) {
	db, err := statedb.OpenReadOnly(dir)
	if err != nil {
		return Run{}, fmt.Errorf("reading the run in %s: %w", dir, err)
	}
	defer db.Close()
	job, err := db.Job()
	if err != nil {
		return Run{}, fmt.Errorf("reading the run in %s: %w", dir, err)
	}
	rows, err := db.Ledger(0, 1<<62)
	if err != nil {
		return Run{}, fmt.Errorf("reading the ledger of %s: %w", dir, err)
	}
	gaps, err := db.MissingLedgerSteps()
	if err != nil {
		return Run{}, fmt.Errorf("reading the ledger of %s: %w", dir, err)
	}
	if len(gaps) > 0 {
		return Run{}, fmt.Errorf("the ledger of %s lacks steps %s (rows deleted outside easyscale): its curves would be wrong", dir, ranges(gaps))
	}
	if len(rows) == 0 {
		return Run{}, fmt.Errorf("reading the run in %s: %w", dir, errNoSteps)
	}
	allocs, err := db.Allocations()
	if err != nil {
		return Run{}, fmt.Errorf("reading the run in %s: %w", dir, err)
	}
	r := Run{Label: filepath.Base(filepath.Clean(dir)), JobID: job.ID, JobName: job.Name, LogicalWorkers: job.LogicalWorkers}
	for _, e := range rows {
		r.Steps = append(r.Steps, Step{Step: e.Step, Loss: e.Loss, Workers: e.Workers, Redos: e.Redos, Redo: e.Redo, Digest: e.Digest, Unhashed: e.Unhashed})
	}
	for _, a := range allocs {
		r.Allocations = append(r.Allocations, Allocation{Step: a.Step, Workers: a.Workers, Placement: a.Placement, Reason: a.Reason})
	}
	return r, nil
}

// errNoSteps: the run has not completed a step, so there is nothing to draw.
var errNoSteps = errors.New("the ledger has no completed step yet: nothing to draw")

// ranges lists step ranges as "7-9, 12".
func ranges(rs []statedb.StepRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}
