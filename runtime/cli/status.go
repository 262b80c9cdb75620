package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// statusCmd prints the picture of one state directory: the job, its
// allocation history, the tail of the ledger and an ETA.
func statusCmd(args []string, env Env) int {
	fs := newFlagSet("status", "status --state DIR [--tail N]", env)
	state := fs.String("state", "", "state directory of the job")
	tail := fs.Int("tail", 10, "ledger rows to show")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *state == "" && fs.NArg() == 1 {
		*state = fs.Arg(0)
	}
	if *state == "" {
		fmt.Fprintln(env.Stderr, "easyscale status: give the state directory: easyscale status --state DIR")
		return 2
	}
	db, err := statedb.OpenReadOnly(*state)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: opening %s: %v\n", *state, err)
		return 1
	}
	defer db.Close()
	job, err := db.Job()
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "job %s (%s), %d logical workers\n", job.Name, job.ID, job.LogicalWorkers)
	allocs, err := db.Allocations()
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nfrom step\tworkers\tplacement\treason\ttime")
	for _, a := range allocs {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", a.Step, a.Workers, a.Placement, a.Reason, a.Time.Format(time.RFC3339))
	}
	tw.Flush()
	last, ok, err := db.LastStep()
	if err != nil || !ok {
		fmt.Fprintln(env.Stdout, "\nno step completed yet")
		return 0
	}
	rows, err := db.Ledger(max(0, last-int64(*tail)+1), last)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
		return 1
	}
	fmt.Fprintln(tw, "\nstep\tloss\tworkers\tstep_s\tdigest")
	var wall float64
	for _, e := range rows {
		wall += e.WallSeconds
		fmt.Fprintf(tw, "%d\t%.4f\t%d\t%.3f\t%s\n", e.Step, e.Loss, e.Workers, e.WallSeconds, e.Digest[:min(len(e.Digest), 23)])
	}
	tw.Flush()
	if len(rows) > 0 {
		fmt.Fprintf(env.Stdout, "\nlast step %d, mean step time %.3f s over the last %d\n", last, wall/float64(len(rows)), len(rows))
	}
	return 0
}
