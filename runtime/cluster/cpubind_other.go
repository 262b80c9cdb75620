//go:build !linux

package cluster

import "errors"

// BindCPUs is Linux only (sched_setaffinity).
func BindCPUs(cpus []int) error {
	return errors.New("binding a worker to CPUs needs Linux's sched_setaffinity")
}

// allowedCPUs is unknown off Linux: workers are not bound.
func allowedCPUs() []int { return nil }
