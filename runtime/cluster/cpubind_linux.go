package cluster

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// boundEnv records, in a re-executed worker's environment, its process
// id and the CPU list BindCPUs bound it to ("PID:LIST"), so it binds and
// re-executes once only, even when the kernel narrows the binding (CPUs
// the machine lacks); exec keeps the process id, which a value set
// beforehand cannot know.
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
	guard := fmt.Sprintf("%d:%s", os.Getpid(), list)
	if os.Getenv(boundEnv) == guard {
		return nil // re-executed below: bound as far as the kernel allows
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
	env := []string{boundEnv + "=" + guard}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, boundEnv+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(exe, os.Args, env)
	return fmt.Errorf("binding to CPUs %s: re-executing %s: %w", list, exe, err)
}

// AllowedCPUs returns the CPUs this process may run on (its affinity:
// under Slurm, the job's), in increasing order; nil when unknown.
func AllowedCPUs() []int {
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
