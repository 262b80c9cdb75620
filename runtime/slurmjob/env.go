package slurmjob

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// Task is one task of a Slurm job step, as its environment describes it
// (https://slurm.schedmd.com/srun.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES).
type Task struct {
	JobID     string // SLURM_JOB_ID
	ProcID    int    // SLURM_PROCID: global rank of the task in the step
	NTasks    int    // SLURM_NTASKS (SLURM_NPROCS): tasks in the step
	NodeName  string // SLURMD_NODENAME: the node this task runs on
	NodeList  string // SLURM_JOB_NODELIST
	SubmitDir string // SLURM_SUBMIT_DIR
	// NumNodes is the nodes of the step (SLURM_STEP_NUM_NODES, else
	// SLURM_JOB_NUM_NODES or SLURM_NNODES); 0 when none is set.
	NumNodes int
	// RestartCount is SLURM_RESTART_COUNT: how often the job was requeued
	// (0 on its first run).
	RestartCount int
	// Start is SLURM_JOB_START_TIME, when this run of the job started
	// (Unix seconds); 0 where the environment lacks it (not every Slurm
	// version sets it).
	Start int64
	// Rendezvous is $EASYSCALE_RENDEZVOUS_DIR, else SubmitDir/.easyscale/JobID.
	Rendezvous string
}

// FromEnv returns the task described by lookup (os.LookupEnv), and false
// when the process is not a task of a Slurm step (no SLURM_JOB_ID or
// SLURM_PROCID). A malformed variable is an error naming it.
func FromEnv(lookup func(string) (string, bool)) (*Task, bool, error) {
	job, ok1 := lookup("SLURM_JOB_ID")
	procStr, ok2 := lookup("SLURM_PROCID")
	if !ok1 || !ok2 || job == "" {
		return nil, false, nil
	}
	t := &Task{JobID: job}
	var err error
	if t.ProcID, err = atoiVar("SLURM_PROCID", procStr); err != nil {
		return nil, true, err
	}
	n, ok := lookup("SLURM_NTASKS")
	if !ok {
		n, ok = lookup("SLURM_NPROCS")
	}
	if !ok {
		n = "1"
	}
	if t.NTasks, err = atoiVar("SLURM_NTASKS", n); err != nil {
		return nil, true, err
	}
	if t.NTasks < 1 || t.ProcID >= t.NTasks {
		return nil, true, fmt.Errorf("SLURM_PROCID %d outside SLURM_NTASKS %d", t.ProcID, t.NTasks)
	}
	t.NodeName, _ = lookup("SLURMD_NODENAME")
	t.NodeList, _ = lookup("SLURM_JOB_NODELIST")
	t.SubmitDir, _ = lookup("SLURM_SUBMIT_DIR")
	if rc, ok := lookup("SLURM_RESTART_COUNT"); ok && rc != "" {
		if t.RestartCount, err = atoiVar("SLURM_RESTART_COUNT", rc); err != nil {
			return nil, true, err
		}
	}
	for _, name := range []string{"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"} {
		if v, ok := lookup(name); ok && v != "" {
			if t.NumNodes, err = atoiVar(name, v); err != nil {
				return nil, true, err
			}
			break
		}
	}
	if v, ok := lookup("SLURM_JOB_START_TIME"); ok && v != "" {
		start, err := atoiVar("SLURM_JOB_START_TIME", v)
		if err != nil {
			return nil, true, err
		}
		t.Start = int64(start)
	}
	if dir, ok := lookup("EASYSCALE_RENDEZVOUS_DIR"); ok && dir != "" {
		t.Rendezvous = dir
	} else {
		if t.SubmitDir == "" {
			return nil, true, fmt.Errorf("SLURM_SUBMIT_DIR is empty; set EASYSCALE_RENDEZVOUS_DIR to a directory every node sees")
		}
		t.Rendezvous = filepath.Join(t.SubmitDir, ".easyscale", t.JobID)
	}
	return t, true, nil
}

func atoiVar(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("environment variable %s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

// IsCoordinator reports whether this task hosts the coordinator (rank 0,
// which Slurm places on the first node of the allocation).
func (t *Task) IsCoordinator() bool { return t.ProcID == 0 }

// Run is the run of the job this task belongs to, as its rendezvous files
// name it; Start is 0 when the environment does not say (see [Run]).
func (t *Task) Run() Run { return Run{JobID: t.JobID, Restart: t.RestartCount, Start: t.Start} }

// MinTasks is how many tasks of the step an elastic job of at least
// minNodes nodes needs: minNodes times the tasks per node (NTasks over
// NumNodes, at least 1), within 1 and NTasks. A job that is not elastic
// (minNodes 0), or whose node count the environment does not give, needs
// all NTasks.
func (t *Task) MinTasks(minNodes int) int {
	if minNodes <= 0 || t.NumNodes <= 0 {
		return t.NTasks
	}
	perNode := max(1, t.NTasks/t.NumNodes)
	return min(max(1, minNodes*perNode), t.NTasks)
}
