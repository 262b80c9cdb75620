//go:build !linux

package trainer

import "time"

var clockStart = time.Now()

// processCPU falls back to the wall clock where the process CPU clock is not
// wired up; the min-cpu-ns/step metric then equals min-ns/step.
func processCPU() time.Duration { return time.Since(clockStart) }
