package planner

import (
	"fmt"
	"math"
	"time"
)

// RemainingAtCurrentSize is how long a running job still needs at its
// current size: its time left timeLeft (the end of its time limit − now),
// or, when its runtime reports progress (the comment's `es step=S/T`, with
// 0 < S ≤ T, passed as step and totalSteps; 0, 0 for none) and it has run
// for elapsed > 0, the elapsed time scaled by the steps left,
// elapsed · (T − S) / S, whichever is smaller: a job past its limit is
// ended by Slurm anyway, so a report never makes it longer than its
// limit. Never negative.
func RemainingAtCurrentSize(timeLeft, elapsed time.Duration, step, totalSteps int) time.Duration {
	left := timeLeft
	if step > 0 && totalSteps >= step && elapsed > 0 {
		est := time.Duration(float64(elapsed) * float64(totalSteps-step) / float64(step))
		left = min(left, est)
	}
	return max(left, 0)
}

// TimeLimitRule says how [RaisedTimeLimit] pads and rounds a raised time
// limit.
type TimeLimitRule struct {
	// Margin is the least time added (the daemon's safety_margin), ≥ 0.
	Margin time.Duration
	// MarginFraction of the remaining run time at the smaller size is
	// added instead when that is more (the daemon's time_limit_margin), ≥ 0.
	MarginFraction float64
	// Unit is what limits are rounded up to (Slurm's whole minutes:
	// time.Minute); 0 or less: no rounding.
	Unit time.Duration
}

// RaisedTimeLimit is the one rule by which start-small and shrink-to-admit
// raise the time limit of a job they resize from from to to units (nodes;
// both ≥ 1). remaining is the job's remaining run time at from
// ([RemainingAtCurrentSize] for a running job, its whole time limit for
// one that has not started), elapsed how long it has run (0 before its
// start; Slurm counts a limit from the job's start). At to it needs
//
//	atSmall = ⌈remaining · from / to⌉
//
// because a data-parallel job's throughput grows at most linearly with its
// nodes (the proportional rule: under Pollux's iteration-time model, Qiao
// et al., OSDI'21, §3.1, which [Model] follows, scaling is sub-linear, and
// that only shortens the run at the smaller size), and the new limit is
//
//	elapsed + atSmall + max(rule.Margin, rule.MarginFraction · atSmall)
//
// rounded up to whole rule.Unit, never below old. atSmall is returned for
// the decision log. A job that scales linearly and runs to the end of its
// old limit therefore still ends inside the new one, with the margin to
// spare for the resize itself and the steps it redoes.
func RaisedTimeLimit(old, elapsed, remaining time.Duration, from, to int, rule TimeLimitRule) (limit, atSmall time.Duration) {
	atSmall = remaining
	if from >= 1 && to >= 1 {
		atSmall = time.Duration(math.Ceil(float64(remaining) * float64(from) / float64(to)))
	}
	margin := max(rule.Margin, time.Duration(math.Ceil(rule.MarginFraction*float64(atSmall))))
	need := elapsed + atSmall + margin
	if u := rule.Unit; u > 0 && need > 0 {
		need = (need + u - 1) / u * u
	}
	return max(old, need), atSmall
}

// LimitCap is the longest time limit Slurm lets a job have: the smallest
// MaxTime of the partitions it is in (sinfo %l; the daemon reads no QOS
// MaxWall). start-small and shrink-to-admit raise a limit as root, past
// any such check, so they never raise one past the cap: a job whose
// raised limit ([RaisedTimeLimit]) would exceed it is not resized at all,
// rather than given a shorter limit than its work needs.
type LimitCap struct {
	// Max is the cap; 0: none (UNLIMITED).
	Max time.Duration `json:",omitempty"`
	// Partition is the partition whose MaxTime Max is, for the reason.
	Partition string `json:",omitempty"`
	// Unknown: the MaxTime of a partition of the job could not be read
	// (Partition names it); every raise is refused.
	Unknown bool `json:",omitempty"`
}

// Refuses says why limit is not allowed under c, "" when it is.
func (c LimitCap) Refuses(limit time.Duration) string {
	switch {
	case c.Unknown:
		return "the MaxTime of its partition " + c.Partition + " is unknown"
	case c.Max > 0 && limit > c.Max:
		return fmt.Sprintf("the time limit it would need, %v, exceeds the MaxTime %v of its partition %s", limit, c.Max, c.Partition)
	}
	return ""
}
