package cluster

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// boundEnv records, in a re-executed worker's environment, the CPU list
// BindCPUs bound it to, so it binds and re-executes once only.
const boundEnv = "EASYSCALE_CPUS_BOUND"

// BindCPUs binds this process, all its threads, to cpus (Linux
// sched_setaffinity(2)): it sets the calling thread's affinity and
// re-executes the binary with the same arguments, so that every thread of
// the new image inherits it (threads the Go runtime started before keep
// their own). In the re-executed process it returns nil at once, as it
// does when the process already runs on exactly cpus; otherwise it returns
// only on failure: a CPU number of 1024 or more, CPUs this process may not
// use (outside its cgroup's cpuset), the binary not found again.
func BindCPUs(cpus []int) error {
	list := FormatCPUList(cpus)
	if os.Getenv(boundEnv) == list {
		return nil
	}
	var want unix.CPUSet
	for _, c := range cpus {
		if c >= 1024 {
			return fmt.Errorf("binding to CPUs %s: CPU %d is beyond the 1024 this binding supports", list, c)
		}
		want.Set(c)
	}
	var have unix.CPUSet
	if err := unix.SchedGetaffinity(0, &have); err == nil && have == want {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("binding to CPUs %s: finding this binary to re-execute: %w", list, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.SchedSetaffinity(0, &want); err != nil {
		return fmt.Errorf("binding to CPUs %s: %w (are they among the CPUs this job may use?)", list, err)
	}
	err = syscall.Exec(exe, os.Args, append(os.Environ(), boundEnv+"="+list))
	return fmt.Errorf("binding to CPUs %s: re-executing %s: %w", list, exe, err)
}

// allowedCPUs returns the CPUs this process may run on (its affinity:
// under Slurm, the job's), in increasing order; nil when unknown.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
