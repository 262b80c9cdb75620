package slurmcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Runner runs Slurm client commands. Env is the complete environment of the commands
// (nil: the current process's); it must name the cluster, e.g. SLURM_CONF=/path. The
// zero Runner runs the commands found on PATH with the current environment.
type Runner struct {
	Env []string
	// Exec runs one command and returns its stdout; nil means os/exec. Tests replace it.
	Exec func(ctx context.Context, env []string, name string, args ...string) ([]byte, error)
}

// CommandError is returned when a Slurm command fails: the command line, its exit
// error and what it printed on stderr (trimmed).
type CommandError struct {
	Command string
	Stderr  string
	Err     error
}

// Error formats the failure as "COMMAND: ERR: STDERR".
func (e *CommandError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("%s: %v", e.Command, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", e.Command, e.Err, e.Stderr)
}

// Unwrap returns the exit error.
func (e *CommandError) Unwrap() error { return e.Err }

// Output runs name with args and returns its stdout, or a *CommandError.
func (r Runner) Output(ctx context.Context, name string, args ...string) ([]byte, error) {
	return r.output(ctx, r.Env, name, args...)
}

// OutputEnv is [Runner.Output] in env instead of r.Env (nil: the current
// process's environment).
func (r Runner) OutputEnv(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	return r.output(ctx, env, name, args...)
}

// Environ is the environment r's commands run in: r.Env, or the current
// process's when r.Env is nil.
func (r Runner) Environ() []string { return r.env() }

// output runs name with args in env (nil: the current process's environment).
func (r Runner) output(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	if r.Exec != nil {
		return r.Exec(ctx, env, name, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, &CommandError{Command: name + " " + strings.Join(args, " "), Stderr: strings.TrimSpace(stderr.String()), Err: err}
	}
	return out, nil
}

// ListJobs runs squeue with [SqueueArgs] plus extra (e.g. "--jobs=12",
// "--states=all") and fresh [NewSeparators] in SQUEUE_FORMAT2, in the
// environment of [readEnv] (no SQUEUE_FORMAT, which would override it, no
// caller's filters, the standard time format), and parses its output. Records that cannot be read are returned in skipped, the others in
// jobs (see [ParseSqueue]); err is a failed command or output not in the
// requested format.
func (r Runner) ListJobs(ctx context.Context, extra ...string) (jobs []Job, skipped []*ParseError, err error) {
	s, err := NewSeparators()
	if err != nil {
		return nil, nil, err
	}
	env := append(r.readEnv(), SqueueFormatEnv(s))
	out, err := r.output(ctx, env, "squeue", append(SqueueArgs(), extra...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing jobs: %w", err)
	}
	jobs, skipped, err = ParseSqueue(out, s)
	if err != nil {
		return nil, nil, fmt.Errorf("listing jobs: %w", err)
	}
	return jobs, skipped, nil
}

// Squeue is [Runner.ListJobs] for callers that need every record: a record
// that cannot be read is an error (the first *ParseError).
func (r Runner) Squeue(ctx context.Context, extra ...string) ([]Job, error) {
	jobs, skipped, err := r.ListJobs(ctx, extra...)
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		return nil, fmt.Errorf("listing jobs: %w", skipped[0])
	}
	return jobs, nil
}

// env is the environment the commands get.
func (r Runner) env() []string {
	if r.Env == nil {
		return os.Environ()
	}
	return r.Env
}

// readEnv is the environment of the squeue and sinfo calls whose output is
// parsed: r's without any SQUEUE_* or SINFO_* variable (SQUEUE_FORMAT would
// replace the format; SQUEUE_USERS, SQUEUE_PARTITION, SQUEUE_NAMES,
// SINFO_PARTITION, ... would hide jobs or nodes, so a running job read by id
// looked gone) and with SLURM_TIME_FORMAT=standard (another format, e.g.
// "relative", prints times [TimeLayout] cannot read, so planned starts were
// silently lost).
func (r Runner) readEnv() []string {
	out := make([]string, 0, len(r.env())+2)
	for _, e := range r.env() {
		k, _, _ := strings.Cut(e, "=")
		if !strings.HasPrefix(k, "SQUEUE_") && !strings.HasPrefix(k, "SINFO_") && k != "SLURM_TIME_FORMAT" {
			out = append(out, e)
		}
	}
	return append(out, "SLURM_TIME_FORMAT=standard")
}

// SqueueStart lists pending jobs with their expected start (StartTime) and the nodes
// the backfill scheduler plans for them (SchedNodes): what `squeue --start` shows.
// `squeue --start` itself is not run: in 22.05 it replaces --Format with its own
// fixed-width format that truncates job names (measured on the lab cluster); the same
// two fields of pending jobs carry the backfill plan.
func (r Runner) SqueueStart(ctx context.Context, extra ...string) ([]Job, error) {
	return r.Squeue(ctx, append([]string{"--states=PENDING", "--sort=S"}, extra...)...)
}

// ErrNoSuchJob is returned by [Runner.Job] for a job squeue does not know (any more).
var ErrNoSuchJob = errors.New("no such job")

// Job re-reads one job by id: `squeue --jobs=ID --states=all` with fresh
// random separators ([Runner.ListJobs]), so no name, comment or work dir
// of any job can forge one of its fields (user, state, work dir, ...). It
// returns ErrNoSuchJob when squeue does not know the id (any more), and the
// *ParseError when the job's own record cannot be read; unreadable records
// of other ids (an array's tasks) are ignored.
func (r Runner) Job(ctx context.Context, id string) (Job, error) {
	jobs, skipped, err := r.ListJobs(ctx, "--jobs="+id, "--states=all")
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && strings.Contains(ce.Stderr, "Invalid job id") {
			return Job{}, fmt.Errorf("job %s: %w", id, ErrNoSuchJob)
		}
		return Job{}, err
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, nil
		}
	}
	for _, pe := range skipped {
		if pe.ID == id {
			return Job{}, fmt.Errorf("reading job %s: %w", id, pe)
		}
	}
	return Job{}, fmt.Errorf("job %s: %w", id, ErrNoSuchJob)
}

// Sinfo runs sinfo with [SinfoArgs] (fresh [NewSeparators]) plus extra, in
// the environment of [readEnv], and parses its output.
func (r Runner) Sinfo(ctx context.Context, extra ...string) ([]Node, error) {
	s, err := NewSeparators()
	if err != nil {
		return nil, err
	}
	out, err := r.output(ctx, r.readEnv(), "sinfo", append(SinfoArgs(s), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return ParseSinfo(out, s)
}

// ShowNodes runs `scontrol show node -o` and returns every node's detail.
func (r Runner) ShowNodes(ctx context.Context) ([]NodeDetail, error) {
	out, err := r.Output(ctx, "scontrol", "show", "node", "-o")
	if err != nil {
		return nil, fmt.Errorf("showing nodes: %w", err)
	}
	recs, err := ParseScontrol(out, KindNode)
	if err != nil {
		return nil, err
	}
	nodes := make([]NodeDetail, 0, len(recs))
	for _, rec := range recs {
		d, err := NodeDetailOf(rec)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, d)
	}
	return nodes, nil
}

// Sbatch submits a batch script file with `sbatch --parsable ARGS... SCRIPT` and
// returns the job id (the part of the --parsable output before any ";cluster").
func (r Runner) Sbatch(ctx context.Context, script string, args ...string) (string, error) {
	out, err := r.Output(ctx, "sbatch", append(append([]string{"--parsable"}, args...), script)...)
	if err != nil {
		return "", fmt.Errorf("submitting %s: %w", script, err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if id == "" || !isDigits(id) {
		return "", fmt.Errorf("submitting %s: sbatch printed %q, not a job id", script, truncate(string(out)))
	}
	return id, nil
}
