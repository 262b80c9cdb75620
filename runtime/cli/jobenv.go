package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
)

// runOnJobEnvironment starts this worker again (execve, same arguments) on
// its job's environment when the rendezvous directory dir holds one
// (slurmjob.EnvironmentFile) and the worker does not run on it yet: an
// extra job of easyscale-backfilld starts with little more than PATH and
// Slurm's variables, and its worker, like the job's own tasks, must see
// the job's HOME, variables and data paths (slurmjob.MergeEnvironment
// keeps the variables of its own job, step and GPUs). It returns nil
// without doing anything when there is no file or it already ran on it,
// and an error when the file cannot be read or the exec fails.
func runOnJobEnvironment(dir string) error {
	if os.Getenv(slurmjob.EnvironmentAppliedVar) != "" {
		return nil
	}
	job, err := slurmjob.JobEnvironment(dir)
	if err != nil || job == nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("running on the job's environment: finding this binary to re-execute: %w", err)
	}
	env := append(slurmjob.MergeEnvironment(os.Environ(), job), slurmjob.EnvironmentAppliedVar+"=1")
	err = syscall.Exec(exe, os.Args, env)
	return fmt.Errorf("running on the job's environment: re-executing %s: %w", exe, err)
}
