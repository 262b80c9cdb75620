//go:build linux

package trainer

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns the CPU time the process has used (all threads, user
// and system; CLOCK_PROCESS_CPUTIME_ID, the clock of Python's
// time.process_time), so a step's cost is measured without the time the
// process spent descheduled on a loaded machine.
func processCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
