package slurmcli

import (
	"context"
	"fmt"
	"strconv"
)

// TaskLayout is a job's state and the node and task counts it asks for, as
// squeue prints them with [TaskLayoutFormat].
type TaskLayout struct {
	State string // PENDING, RUNNING, ...
	// Nodes is the allocated node count of a running job, the minimum
	// requested of a pending one.
	Nodes int
	Tasks int // NumTasks
	// TasksPerNode is --ntasks-per-node; 0 when the job did not set it
	// (squeue prints 0, or NO_VAL16 65534 where a version does).
	TasksPerNode int
}

// TaskLayoutFormat is the squeue --Format [ParseTaskLayout] reads: four
// values no user sets, a space between them ("PENDING 3 4 1").
const TaskLayoutFormat = "State:0 ,NumNodes:0 ,NumTasks:0 ,NTPerNode:0"

// noVal16 is Slurm's NO_VAL16, which an unset 16-bit count prints as.
const noVal16 = 65534

// ParseTaskLayout reads the one line `squeue --noheader --jobs=ID
// --Format=`[TaskLayoutFormat] prints. Errors are *ParseError (source
// "squeue", the job id, the field at fault); no line is [ErrNoSuchJob].
func ParseTaskLayout(id string, out []byte) (TaskLayout, error) {
	f, err := squeueLine(id, out, "STATE", "NODES", "TASKS", "TASKS_PER_NODE")
	if err != nil {
		return TaskLayout{}, err
	}
	l := TaskLayout{State: f[0]}
	for i, c := range []struct {
		field string
		dst   *int
		min   int
	}{{"NumNodes", &l.Nodes, 1}, {"NumTasks", &l.Tasks, 1}, {"NTPerNode", &l.TasksPerNode, 0}} {
		n, err := strconv.Atoi(f[i+1])
		if err != nil || n < c.min {
			return TaskLayout{}, &ParseError{Source: "squeue", Line: 1, ID: id, Field: c.field,
				Err: fmt.Errorf("%q is not a count", f[i+1])}
		}
		*c.dst = n
	}
	if l.TasksPerNode >= noVal16 {
		l.TasksPerNode = 0
	}
	return l, nil
}

// TaskLayout reads job id's [TaskLayout] (`squeue --jobs=ID
// --Format=`[TaskLayoutFormat]).
func (r Runner) TaskLayout(ctx context.Context, id string) (TaskLayout, error) {
	out, err := r.output(ctx, r.readEnv(), "squeue", "--noheader", "--jobs="+id, "--Format="+TaskLayoutFormat)
	if err != nil {
		return TaskLayout{}, fmt.Errorf("reading the task layout of job %s: %w", id, err)
	}
	return ParseTaskLayout(id, out)
}

// Refit is what [Runner.FitRequeued] set: the requeued job's node count
// and task count (Tasks 0 when the task count was left as it was); Had is
// the nodes it still held.
type Refit struct{ Nodes, Tasks, Had int }

// FitRequeued makes a job just requeued after losing a node ask for the
// nodes it still had, at least minNodes, with the tasks those hold at its
// --ntasks-per-node, so that it can start again at once on the survivors
// instead of waiting for the lost node. It is meant for right after
// `scontrol requeue`: the job is then COMPLETING while its old run's
// processes end (Slurm's state is pending with the completing flag) and
// squeue's node count is the nodes it still holds; then PENDING. minNodes
// 0 (a job that is not elastic) changes nothing; 1 asks for the nodes it
// still had, however few (a requeue that only ends a finished training).
// It returns what it set, the zero Refit when it set nothing.
//
// Measured on the 22.05 lab (docs/first-node-loss.md): a job that lost its
// batch host under --no-kill runs on, on n[2-4], and Slurm shows NumNodes=3
// but keeps its minimum node count (4) and NumTasks (4 at
// --ntasks-per-node=1); once requeued it stays PENDING
// (Nodes_required_for_job_are_DOWN…) until the lost node returns. Slurm
// refuses NumNodes and NumTasks changes of a running job's tasks but
// accepts them, from the job's own user, on a pending one and on one just
// requeued and still COMPLETING; `NumNodes=3` then logs "setting min_nodes
// from 4 to 3" and the job starts on n[2-4]. Errors say what was being
// done.
func (r Runner) FitRequeued(ctx context.Context, id string, minNodes int) (Refit, error) {
	if minNodes <= 0 {
		return Refit{}, nil
	}
	l, err := r.TaskLayout(ctx, id)
	if err != nil {
		return Refit{}, err
	}
	if l.State != "PENDING" && l.State != "COMPLETING" {
		return Refit{}, nil // started again already, or ended: nothing to fit
	}
	fit := Refit{Nodes: max(l.Nodes, minNodes), Had: l.Nodes}
	fields := []string{"NumNodes=" + strconv.Itoa(fit.Nodes)}
	if l.TasksPerNode > 0 && l.Tasks > fit.Nodes*l.TasksPerNode {
		fit.Tasks = fit.Nodes * l.TasksPerNode
		fields = append(fields, "NumTasks="+strconv.Itoa(fit.Tasks))
	}
	if err := r.UpdateJob(ctx, id, fields...); err != nil {
		return Refit{}, fmt.Errorf("fitting requeued job %s (%d tasks, %d per node) to %d nodes: %w",
			id, l.Tasks, l.TasksPerNode, fit.Nodes, err)
	}
	return fit, nil
}
