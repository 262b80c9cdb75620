package slurmcli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Release is a Slurm release series, e.g. {22, 5} for 22.05.8 (Debian 12) and
// {24, 11} for 24.11.5 (Debian 13). Behaviour that differs between the
// releases this project supports is decided on it (see [Runner.SetNodes]).
type Release struct{ Major, Minor int }

// String formats the release as Slurm names it: "22.05", "24.11".
func (v Release) String() string { return fmt.Sprintf("%d.%02d", v.Major, v.Minor) }

// AtLeast reports whether v is the release major.minor or a later one.
func (v Release) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// ErrNoVersion reports `scontrol --version` output that names no release.
var ErrNoVersion = errors.New("no Slurm version")

// ParseRelease reads what `scontrol --version` (or any client's --version)
// prints: "slurm-wlm 22.05.8" (Debian's packages), "slurm 24.11.5" (upstream
// builds), one line. It returns a *ParseError (source "scontrol --version",
// field "version") wrapping ErrNoVersion or the number that cannot be read.
func ParseRelease(out []byte) (Release, error) {
	fail := func(err error) (Release, error) {
		return Release{}, &ParseError{Source: "scontrol --version", Line: 1, Field: "version", Err: err}
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || (f[0] != "slurm" && f[0] != "slurm-wlm") {
		return fail(fmt.Errorf("%w in %q", ErrNoVersion, out))
	}
	parts := strings.SplitN(f[1], ".", 3)
	if len(parts) < 2 {
		return fail(fmt.Errorf("%w in %q", ErrNoVersion, out))
	}
	var v Release
	var err error
	if v.Major, err = strconv.Atoi(parts[0]); err != nil || v.Major < 0 {
		return fail(fmt.Errorf("major version %q: %w", parts[0], ErrNoVersion))
	}
	if v.Minor, err = strconv.Atoi(parts[1]); err != nil || v.Minor < 0 {
		return fail(fmt.Errorf("minor version %q: %w", parts[1], ErrNoVersion))
	}
	return v, nil
}

// Release runs `scontrol --version` and parses it ([ParseRelease]). It is not
// cached: a shrink is rare, and an upgraded Slurm is seen at once.
func (r Runner) Release(ctx context.Context) (Release, error) {
	out, err := r.Output(ctx, "scontrol", "--version")
	if err != nil {
		return Release{}, fmt.Errorf("asking Slurm for its version: %w", err)
	}
	return ParseRelease(out)
}

// TaskCountKept is the first release whose slurmctld recomputes a job's task
// count on a node-count update: from 23.02 on (SchedMD commit 5446431ef4,
// "Create function to figure out task count", src/slurmctld/job_mgr.c
// _figure_out_num_tasks), `scontrol update JobId=ID NumNodes=N` of a job
// submitted with --ntasks-per-node=K asks for N×K tasks, and a running job's
// task count cannot change: the update fails with "Job is no longer pending
// execution" (ESLURM_JOB_NOT_PENDING) and the job keeps its nodes. Passing
// the job's current NumTasks along leaves the count as it is, and the shrink
// goes through (slurmctld then sets NumTasks to the new node count's). 22.05
// refuses NumTasks on a running job, so it gets NumNodes alone. Measured on
// the current lab (24.11.5): `sbatch -N3 --ntasks-per-node=1`, then
// NumNodes=2 fails and NumNodes=2 NumTasks=3 shrinks it.
var TaskCountKept = Release{23, 2}

// ShrinkArgs returns the `scontrol` arguments that set job id to nodes
// nodes on release v: "update JobId=ID NumNodes=N", plus "NumTasks=T" (the
// job's current task count, tasks) for a running job from [TaskCountKept]
// on. A pending job (running false) gets NumNodes alone on every release:
// its task count may change, and must, to fit the new node count.
func ShrinkArgs(v Release, id string, nodes int, running bool, tasks int) []string {
	args := []string{"update", "JobId=" + id, "NumNodes=" + strconv.Itoa(nodes)}
	if running && tasks > 0 && v.AtLeast(TaskCountKept.Major, TaskCountKept.Minor) {
		args = append(args, "NumTasks="+strconv.Itoa(tasks))
	}
	return args
}

// SetNodes sets job id's node count to nodes: it shrinks a running job to
// the first nodes nodes of its node list (Slurm releases the last ones and
// kills the tasks of running steps there) or lowers a pending job's request.
// On releases from [TaskCountKept] on it first reads the job's state and
// task count (`squeue --jobs=ID --Format=State,NumTasks`: two values no user
// sets) and keeps a running job's task count ([ShrinkArgs]). Errors say what
// was being done and wrap the *CommandError or *ParseError.
func (r Runner) SetNodes(ctx context.Context, id string, nodes int) error {
	v, err := r.Release(ctx)
	if err != nil {
		return fmt.Errorf("setting job %s to %d nodes: %w", id, nodes, err)
	}
	running, tasks := false, 0
	if v.AtLeast(TaskCountKept.Major, TaskCountKept.Minor) {
		if running, tasks, err = r.stateAndTasks(ctx, id); err != nil {
			return fmt.Errorf("setting job %s to %d nodes: %w", id, nodes, err)
		}
	}
	if _, err := r.Output(ctx, "scontrol", ShrinkArgs(v, id, nodes, running, tasks)...); err != nil {
		return fmt.Errorf("setting job %s to %d nodes (Slurm %s): %w", id, nodes, v, err)
	}
	return nil
}

// stateAndTasks reads whether job id runs (RUNNING or SUSPENDED: slurmctld
// shrinks both in place) and its task count.
func (r Runner) stateAndTasks(ctx context.Context, id string) (running bool, tasks int, err error) {
	out, err := r.output(ctx, r.readEnv(), "squeue", "--noheader", "--jobs="+id, "--Format=State:0 ,NumTasks:0")
	if err != nil {
		return false, 0, fmt.Errorf("reading the state and task count of job %s: %w", id, err)
	}
	return ParseStateAndTasks(id, out)
}

// ParseStateAndTasks reads the one line `squeue --noheader --jobs=ID
// --Format="State:0 ,NumTasks:0"` prints ("RUNNING 3"): whether the job runs
// (RUNNING or SUSPENDED) and its task count. Errors are *ParseError (source
// "squeue", the job id, field State or NumTasks); no line is [ErrNoSuchJob].
func ParseStateAndTasks(id string, out []byte) (running bool, tasks int, err error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return false, 0, fmt.Errorf("job %s: %w", id, ErrNoSuchJob)
	}
	f := strings.Fields(lines[0])
	if len(lines) != 1 || len(f) != 2 {
		return false, 0, &ParseError{Source: "squeue", Line: 1, ID: id, Field: "State",
			Err: fmt.Errorf("want one line \"STATE TASKS\", got %q", out)}
	}
	if tasks, err = strconv.Atoi(f[1]); err != nil || tasks < 0 {
		return false, 0, &ParseError{Source: "squeue", Line: 1, ID: id, Field: "NumTasks",
			Err: fmt.Errorf("%q is not a task count", f[1])}
	}
	return f[0] == "RUNNING" || f[0] == "SUSPENDED", tasks, nil
}
