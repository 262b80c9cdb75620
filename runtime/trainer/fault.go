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

// FaultPaceEnv names the fault-injection variable that makes training long
// in time but not in work: "DURATION" (e.g. "50ms") makes every logical
// worker's micro-batch this process computes take at least DURATION, the
// forward and backward pass followed by a sleep for what they left. Tests
// use it where a run must outlast something slow outside it (Slurm setting
// a lost node DOWN, SlurmdTimeout and a ping interval after the loss) on a
// machine of any speed and load, without the CPU that more steps would
// cost. A step then takes at least DURATION times the most micro-batches
// one physical worker computes in turn (one on the fixed allocation, three
// for 8 logical workers on 3 physical). It changes no result, only the
// time; worker processes started by `run --procs` and Slurm's tasks
// inherit it. Unset or empty: no effect.
const FaultPaceEnv = "EASYSCALE_FAULT_PACE"

// maxPace bounds FaultPaceEnv: a minute per micro-batch is far past any
// test's need, and a typo such as "50s" for "50ms" is refused rather than
// leaving a job asleep for hours.
const maxPace = time.Minute

var paceFault struct {
	once sync.Once
	pace time.Duration
}

// CheckFaultEnv returns an error naming FaultSlowStepEnv when it is set but
// not STEP:DURATION, or FaultPaceEnv when it is set but not a duration from
// 0 to a minute, so a command can refuse them before training.
func CheckFaultEnv() error {
	if _, err := parseSlowStep(os.Getenv(FaultSlowStepEnv)); err != nil {
		return err
	}
	_, err := parsePace(os.Getenv(FaultPaceEnv))
	return err
}

func parsePace(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxPace {
		return 0, fmt.Errorf("environment variable %s=%q: want a duration from 0s to %v per micro-batch, e.g. 50ms, or unset it", FaultPaceEnv, v, maxPace)
	}
	return d, nil
}

// paceSince sleeps until FaultPaceEnv's duration has passed since start
// (the micro-batch's start); unset, malformed or already passed: no sleep.
func paceSince(start time.Time) {
	paceFault.once.Do(func() { paceFault.pace, _ = parsePace(os.Getenv(FaultPaceEnv)) })
	if paceFault.pace > 0 {
		time.Sleep(paceFault.pace - time.Since(start))
	}
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
