package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/statedb"
)

var slurmJobID = regexp.MustCompile(`^[0-9]+$`)

// statusCmd prints the picture of one job from its state directory: the
// job, its allocation history, the tail of the ledger, checkpoints and an
// ETA. The job is named by --state DIR, or by its Slurm job id (its state
// is then <WorkDir>/.easyscale/<id>/state, WorkDir from squeue). It
// exits 1 when the state cannot be read or a ledger row does not match its
// checksum (each such step is named).
func statusCmd(args []string, env Env) int {
	fs := newFlagSet("status", "status [--state DIR | DIR | JOBID] [--tail N]", env)
	state := fs.String("state", "", "state directory of the job")
	tail := fs.Int("tail", 10, "ledger rows to show")
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if *tail < 1 {
		fmt.Fprintf(env.Stderr, "easyscale status: --tail %d must be at least 1\n", *tail)
		return 2
	}
	if *state == "" && fs.NArg() == 1 {
		arg := fs.Arg(0)
		if fi, err := os.Stat(arg); err == nil && fi.IsDir() || !slurmJobID.MatchString(arg) {
			*state = arg
		} else {
			dir, err := slurmStateDir(arg, env)
			if err != nil {
				fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
				return 1
			}
			*state = dir
		}
	}
	if *state == "" {
		fmt.Fprintln(env.Stderr, "easyscale status: give a state directory or a Slurm job id: easyscale status --state DIR | JOBID")
		return 2
	}
	return printStatus(*state, *tail, env)
}

// slurmStateDir finds the state directory of Slurm job id and prints what
// Slurm knows of the job: name, user, state, nodes and comment. Everything
// comes from squeue by id with random separators ([slurmcli.Runner.Job]),
// not from `scontrol show job`, whose unquoted Key=Value text a job name can
// imitate ("x UserId=root(0) WorkDir=/elsewhere"). The name and comment,
// which the job's owner chose, are printed quoted with control characters
// escaped, so that they cannot pass for a line of the output either.
func slurmStateDir(id string, env Env) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	job, err := env.Slurm.Job(ctx, id)
	if err != nil {
		return "", fmt.Errorf("asking Slurm about job %s: %w", id, err)
	}
	nodes := job.NodeList
	if nodes == "" {
		nodes = "no nodes"
	}
	fmt.Fprintf(env.Stdout, "slurm job %s %q of user %s: %s on %s, comment %q\n", job.ID, job.Name, job.User, job.State, nodes, job.Comment)
	if job.WorkDir == "" {
		return "", fmt.Errorf("job %s has no WorkDir; pass --state", id)
	}
	return filepath.Join(job.WorkDir, ".easyscale", id, "state"), nil
}

func printStatus(state string, tail int, env Env) int {
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: opening %s: %v\n", state, err)
		return 1
	}
	defer db.Close()
	job, err := db.Job()
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "job %s (%s), %d logical workers, state %s\n", job.Name, job.ID, job.LogicalWorkers, state)
	if live, ok := statedb.KeptRunOf(state); ok {
		fmt.Fprintf(env.Stdout, "a run kept by a start-over of the job whose state directory is %s (--on-other-numerics=start-over)\n", live)
	}
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
	for _, line := range supersededLines(state) {
		fmt.Fprintln(env.Stdout, "\n"+line)
	}
	if copies, err := db.InterruptedStartOvers(); err != nil {
		fmt.Fprintf(env.Stdout, "\nWARNING: %v\n", err)
	} else {
		for _, c := range copies {
			fmt.Fprintf(env.Stdout, "\nstarted over (its state was computed with other numerics), interrupted before the copy of the run "+
				"before was named: it is kept in %s, which the next run renames %s\n", // as the state directory was given
				filepath.Join(state, statedb.SupersededDir, filepath.Base(c.Path)), filepath.Join(state, statedb.SupersededDir, filepath.Base(c.Final)))
		}
	}
	last, ok, err := db.LastStep()
	if err != nil || !ok {
		fmt.Fprintln(env.Stdout, "\nno step completed yet")
		return 0
	}
	rows, err := db.Ledger(max(0, last-int64(tail)+1), last)
	var corrupt *statedb.CorruptLedgerError
	if err != nil && !errors.As(err, &corrupt) {
		fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
		return 1
	}
	fmt.Fprintln(tw, "\nstep\tloss\tworkers\tstep_s\tredos\tdigest")
	printLedger(tw, rows, corrupt)
	tw.Flush()
	code := 0
	if bad, err := db.CheckLedger(); err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
		code = 1
	} else if len(bad) > 0 {
		fmt.Fprintf(env.Stdout, "\nWARNING: %v\n", &statedb.CorruptLedgerError{Dir: db.Dir(), Steps: bad})
		code = 1
	}
	if gaps, err := db.MissingLedgerSteps(); err != nil {
		fmt.Fprintf(env.Stderr, "easyscale status: %v\n", err)
		code = 1
	} else if len(gaps) > 0 {
		fmt.Fprintf(env.Stdout, "\nWARNING: the ledger lacks steps %s: rows deleted outside easyscale\n", rangesText(gaps))
		code = 1
	}
	ck, skipped, err := db.LatestCheckpoint()
	for _, s := range skipped {
		fmt.Fprintf(env.Stdout, "\nWARNING: unusable checkpoint: %v", s)
	}
	switch {
	case err != nil:
		fmt.Fprintf(env.Stdout, "\nWARNING: reading checkpoints: %v\n", err)
	case ck != nil:
		fmt.Fprintf(env.Stdout, "\nnewest valid checkpoint: step %d (%s)\n", ck.Step, filepath.Base(ck.Path))
	default:
		fmt.Fprintln(env.Stdout, "\nno usable checkpoint: a rerun starts from step 0")
	}
	writer := statedb.Writer(state)
	if p, err := trainer.ReadProgress(state); err == nil {
		switch {
		case p.Done && p.Step == last:
			fmt.Fprintf(env.Stdout, "finished: step %d of %d (horizon %d)\n", p.Step, p.Stop, p.Horizon)
		case writer != nil:
			// progress.json is written at most once a second and not
			// during a long step: the lock, not its age, says running.
			step := max(p.Step, last)
			eta := time.Duration(float64(p.Stop-step) * p.StepSeconds * float64(time.Second)).Round(time.Second)
			fmt.Fprintf(env.Stdout, "running (process %d on %s): step %d of %d on %d workers, %.3f s/step, ETA %s (progress as of %s)\n",
				writer.PID, writer.Host, step, p.Stop, p.Workers, p.StepSeconds, eta, p.Updated.Format(time.RFC3339))
		case p.Step < last || time.Since(p.Updated) > time.Minute:
			fmt.Fprintf(env.Stdout, "not running: the ledger ends at step %d (last progress report %s); rerun the command to resume\n",
				last, p.Updated.Format(time.RFC3339))
		default:
			eta := time.Duration(float64(p.Stop-p.Step) * p.StepSeconds * float64(time.Second)).Round(time.Second)
			fmt.Fprintf(env.Stdout, "progress: step %d of %d on %d workers, %.3f s/step, ETA %s (as of %s)\n",
				p.Step, p.Stop, p.Workers, p.StepSeconds, eta, p.Updated.Format(time.RFC3339))
		}
		fmt.Fprintln(env.Stdout, digestLine(p))
	}
	return code
}

// supersededLines lists the runs the job started over from (statedb's
// superseded directories, oldest first), each with where its ledger
// ended; none when the job never started over.
func supersededLines(state string) []string {
	dirs, err := statedb.Superseded(state)
	if err != nil {
		return []string{"WARNING: " + err.Error()}
	}
	var lines []string
	for _, dir := range dirs {
		ended := "its ledger does not read"
		if db, err := statedb.OpenReadOnly(dir); err == nil {
			if last, ok, err := db.LastStep(); err == nil && ok {
				ended = fmt.Sprintf("its ledger ended at step %d", last)
			} else if err == nil {
				ended = "its ledger was empty"
			}
			db.Close()
		}
		lines = append(lines, fmt.Sprintf("started over (its state was computed with other numerics): the run before is kept in %s, %s", dir, ended))
	}
	return lines
}

// digestLine says how often the ledger's digest is taken (progress.json's
// digest_every_steps and measured cost): the torch engine hashes every K
// steps when hashing costs more than 1 % of a step.
func digestLine(p trainer.Progress) string {
	cost := ""
	if p.DigestCostPct != nil {
		cost = fmt.Sprintf(" (hashing measured at %.2f %% of a step)", *p.DigestCostPct)
	}
	switch {
	case p.DigestEvery == 0:
		return "ledger digest: every step while hashing's cost is measured" + cost
	case p.DigestEvery == 1:
		return "ledger digest: every step" + cost
	}
	return fmt.Sprintf("ledger digest: every %d steps, and the final and checkpoint steps%s; the others are recorded unhashed", p.DigestEvery, cost)
}

// printLedger writes the ledger rows and, in step order among them, a
// CORRUPT line for each step whose row does not match its checksum.
func printLedger(w io.Writer, rows []statedb.LedgerEntry, corrupt *statedb.CorruptLedgerError) {
	var bad []int64
	if corrupt != nil {
		bad = corrupt.Steps
	}
	for len(rows) > 0 || len(bad) > 0 {
		if len(bad) > 0 && (len(rows) == 0 || bad[0] < rows[0].Step) {
			fmt.Fprintf(w, "%d\tCORRUPT: the row does not match its checksum\t\t\t\t\n", bad[0])
			bad = bad[1:]
			continue
		}
		e := rows[0]
		rows = rows[1:]
		d := e.Digest[:min(len(e.Digest), 23)]
		if e.Unhashed {
			d = "unhashed"
		}
		fmt.Fprintf(w, "%d\t%.4f\t%d\t%.3f\t%d\t%s\n", e.Step, e.Loss, e.Workers, e.WallSeconds, e.Redos, d)
	}
}
