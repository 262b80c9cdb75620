package trainer

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FaultSlowStepEnv names the fault-injection variable that makes one step
// slow, for tests of a signal that arrives mid-step: "STEP:DURATION"
// (e.g. "6:30s", STEP counted from 0 like the ledger's step-before) makes
// the first logical worker this process computes at step STEP sleep
// DURATION once its cursor and BatchNorm buffers have advanced, the
// half-done state a mid-step SIGTERM must not save. Before sleeping it
// writes the line "fault injection: step STEP sleeps DURATION" to stderr
// (tests wait for it). It applies once per process (a redone step is not
// slowed again) and changes no result, only the time. Worker processes started by `run --procs` inherit it. Unset or
// empty: no effect.
const FaultSlowStepEnv = "EASYSCALE_FAULT_SLOW_STEP"

// slowStep is the parsed FaultSlowStepEnv.
type slowStep struct {
	step  int64
	delay time.Duration
}

var slowFault struct {
	once  sync.Once
	fault *slowStep
	fired atomic.Bool
}

// CheckFaultEnv returns an error naming FaultSlowStepEnv when it is set but
// not STEP:DURATION, so a command can refuse it before training.
func CheckFaultEnv() error {
	_, err := parseSlowStep(os.Getenv(FaultSlowStepEnv))
	return err
}

func parseSlowStep(v string) (*slowStep, error) {
	if v == "" {
		return nil, nil
	}
	a, b, ok := strings.Cut(v, ":")
	step, err1 := strconv.ParseInt(a, 10, 64)
	d, err2 := time.ParseDuration(b)
	if !ok || err1 != nil || err2 != nil || step < 0 || d < 0 {
		return nil, fmt.Errorf("environment variable %s=%q: want STEP:DURATION, e.g. 6:30s, or unset it", FaultSlowStepEnv, v)
	}
	return &slowStep{step: step, delay: d}, nil
}

// slowIfDue sleeps when FaultSlowStepEnv asks for it at step (once per
// process); a malformed value does nothing (commands refuse it up front
// with CheckFaultEnv).
func slowIfDue(step int64) {
	slowFault.once.Do(func() { slowFault.fault, _ = parseSlowStep(os.Getenv(FaultSlowStepEnv)) })
	f := slowFault.fault
	if f == nil || f.step != step {
		return
	}
	if slowFault.fired.CompareAndSwap(false, true) {
		fmt.Fprintf(os.Stderr, "fault injection: step %d sleeps %v\n", step, f.delay)
		time.Sleep(f.delay)
	}
}
