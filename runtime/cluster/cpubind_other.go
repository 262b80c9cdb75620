//go:build !linux

package cluster

import "errors"

// BindCPUs is Linux only (sched_setaffinity).
func BindCPUs(cpus []int) error {
	return errors.New("binding a worker to CPUs needs Linux's sched_setaffinity")
}

// AllowedCPUs is unknown off Linux (nil): workers are not bound.
func AllowedCPUs() []int { return nil }
