package slurmcli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TaskCountRefusal is what scontrol prints on stderr when slurmctld refuses
// an update of a running job because it would change the job's task count
// (ESLURM_JOB_NOT_PENDING): "Job is no longer pending execution for job ID".
//
// From Slurm 23.02 on (SchedMD commit 5446431ef4, "Create function to figure
// out task count", src/slurmctld/job_mgr.c _figure_out_num_tasks) slurmctld
// recomputes a job's task count on every `scontrol update` of a job
// submitted with --ntasks-per-node=K (both example scripts are) whose
// minimum and maximum node counts are equal: the count becomes nodes×K, and a
// running job's task count must not change. So on 24.11 (measured on the
// current lab, 24.11.5):
//
//   - `scontrol update JobId=ID NumNodes=N` of a running job fails with this
//     message and the job keeps its nodes (the count would become N×K);
//   - after a shrink, which lowers the task count to the CPUs left but not
//     the recorded node counts, every later update of that job, its comment
//     or time limit too, fails the same way (the count would go back up).
//
// Passing the job's current task count along (NumTasks=T) leaves it as it
// is, and the update goes through. 22.05 recomputes nothing and refuses
// NumTasks on a running job, so there the first try succeeds. [Runner.UpdateJob]
// decides on this behaviour, not on a version number.
const TaskCountRefusal = "Job is no longer pending execution"

// UpdateJob runs `scontrol update JobId=ID FIELD=VALUE...` (e.g.
// "NumNodes=2", "Comment=...", "TimeLimit=44"). When slurmctld refuses it
// with [TaskCountRefusal] and the job runs, it reads the job's task count
// (`squeue --jobs=ID --Format=State,NumTasks`: two values no user sets) and
// runs the update once more with NumTasks=T added: the refusal of Slurm
// 23.02 and later for a job submitted with --ntasks-per-node. Errors say
// what was being done and wrap the last *CommandError or *ParseError.
func (r Runner) UpdateJob(ctx context.Context, id string, fields ...string) error {
	args := append([]string{"update", "JobId=" + id}, fields...)
	_, err := r.Output(ctx, "scontrol", args...)
	var ce *CommandError
	if err == nil || !errors.As(err, &ce) || !strings.Contains(ce.Stderr, TaskCountRefusal) {
		return wrapUpdate(id, fields, err)
	}
	running, tasks, rerr := r.stateAndTasks(ctx, id)
	if rerr != nil || !running {
		return wrapUpdate(id, fields, err) // pending or gone: the refusal stands as it was
	}
	_, err = r.Output(ctx, "scontrol", append(args, "NumTasks="+strconv.Itoa(tasks))...)
	return wrapUpdate(id, append(fields, "NumTasks="+strconv.Itoa(tasks)), err)
}

func wrapUpdate(id string, fields []string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("updating job %s (%s): %w", id, strings.Join(fields, " "), err)
}

// SetNodes sets job id's node count: `scontrol update JobId=ID NumNodes=N`
// through [Runner.UpdateJob]. A running job is shrunk to the first nodes
// nodes of its node list (Slurm releases the last ones, never the batch
// host, and kills the tasks of running steps there); a pending job's request
// is lowered (its task count follows on 24.11).
func (r Runner) SetNodes(ctx context.Context, id string, nodes int) error {
	return r.UpdateJob(ctx, id, "NumNodes="+strconv.Itoa(nodes))
}

// stateAndTasks reads whether job id runs and its task count.
func (r Runner) stateAndTasks(ctx context.Context, id string) (running bool, tasks int, err error) {
	out, err := r.output(ctx, r.readEnv(), "squeue", "--noheader", "--jobs="+id, "--Format="+StateAndTasksFormat)
	if err != nil {
		return false, 0, fmt.Errorf("reading the state and task count of job %s: %w", id, err)
	}
	return ParseStateAndTasks(id, out)
}

// StateAndTasksFormat is the squeue --Format [ParseStateAndTasks] reads: the
// job's state and task count, a space between them ("RUNNING 3").
const StateAndTasksFormat = "State:0 ,NumTasks:0"

// ParseStateAndTasks reads the one line `squeue --noheader --jobs=ID
// --Format=`[StateAndTasksFormat] prints: whether the job runs (RUNNING or
// SUSPENDED, which slurmctld updates in place) and its task count. Errors
// are *ParseError (source "squeue", the job id, field State or NumTasks);
// no line is [ErrNoSuchJob].
func ParseStateAndTasks(id string, out []byte) (running bool, tasks int, err error) {
	f, err := squeueLine(id, out, "STATE", "TASKS")
	if err != nil {
		return false, 0, err
	}
	if tasks, err = strconv.Atoi(f[1]); err != nil || tasks < 1 {
		return false, 0, &ParseError{Source: "squeue", Line: 1, ID: id, Field: "NumTasks",
			Err: fmt.Errorf("%q is not a task count", f[1])}
	}
	return f[0] == "RUNNING" || f[0] == "SUSPENDED", tasks, nil
}

// squeueLine splits the one line `squeue --noheader --jobs=ID` prints for
// a --Format of len(names) values, a space between them (names say what
// each is, for the error). Errors: no line is [ErrNoSuchJob]; another
// line count or value count a *ParseError for field State (the first).
func squeueLine(id string, out []byte, names ...string) ([]string, error) {
	text := strings.TrimSpace(string(out))
	if text == "" {
		return nil, fmt.Errorf("job %s: %w", id, ErrNoSuchJob)
	}
	f := strings.Fields(text)
	if strings.Contains(text, "\n") || len(f) != len(names) {
		return nil, &ParseError{Source: "squeue", Line: 1, ID: id, Field: "State",
			Err: fmt.Errorf("want one line \"%s\", got %q", strings.Join(names, " "), out)}
	}
	return f, nil
}

// SetExcludedNodes sets pending job id's excluded nodes (its --exclude):
// `scontrol update JobId=ID ExcNodeList=a,b` through [Runner.UpdateJob];
// no nodes clears them ("ExcNodeList=", measured on the 22.05 lab: the job
// then shows ExcNodeList=(null)). Slurm then starts the job on none of
// them. Names must be node names (the caller's from sinfo): they are
// passed as one argument, never through a shell.
func (r Runner) SetExcludedNodes(ctx context.Context, id string, nodes []string) error {
	return r.UpdateJob(ctx, id, "ExcNodeList="+strings.Join(nodes, ","))
}

// Requeue requeues running batch job id: `scontrol requeue ID`. Slurm
// signals its tasks (SIGTERM, then SIGKILL after KillWait), puts the job
// back in the queue with its priority and Restarts raised by one, and
// makes it eligible again after cred_expire (120 s by default, 10 s on the
// lab; shared/slurm-lab/NOTES.md); SLURM_RESTART_COUNT tells the rerun.
// A job submitted with --no-requeue, or not running, is refused (a
// *CommandError, wrapped with the job id).
func (r Runner) Requeue(ctx context.Context, id string) error {
	if _, err := r.Output(ctx, "scontrol", "requeue", id); err != nil {
		return fmt.Errorf("requeueing job %s: %w", id, err)
	}
	return nil
}
