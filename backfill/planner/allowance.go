package planner

import "time"

// DefaultAdmitAllowance is admit.allowance's default: shrink-to-admit may
// make a running job end past the horizon (the longest time left of the
// other running jobs, the drain bound) as long as, counting the GPUs it
// gives as never returned ([ShrinkLoss]), it still ends within 1.75 × its
// run at the allocation it started on, from its start ([AllowedEnd]).
//
// Why: the horizon alone keeps the job with the most time left whole for
// as long as it is the longest, however many short jobs queue behind its
// GPUs; on the Pollux workloads, where a few 24- to 32-GPU jobs hold half
// the cluster for tens of hours, that left mean JCT above half of rigid's
// in 41 of 48 matrix cells. A bound relative to the horizon itself (the
// horizon × 1.1 or more) compounds, each admission moving the bound the
// next is judged by, and lost to rigid on makespan in more draws; a
// bound anchored at the job's start and counted as never given back does
// not (BENCHMARKS.md, issue 17, E69: 0.5 against 0.1 to 1; E70: 0.75
// once the simulator read each job's work left at the time of each
// decision, over 960 Pollux draws and the 60-cell matrix).
const DefaultAdmitAllowance = 0.75

// AllowedEnd is how long from now (seconds) a running job may end at the
// latest by an allowance of allowance (admit.allowance, ≥ 0): (1 +
// allowance) × startRun − elapsed, where startRun is its run time at the
// allocation it started on (seconds: the daemon estimates it by
// [StartRun], from its time limit and progress report, and the simulator
// as it does, from its exact run when it started and its pace since,
// counting from its restart after a move) and elapsed how long it has run
// since it (re)started (seconds; a negative one counts as 0). 0, no allowance, when allowance or startRun is not above 0 or
// the job is past that end. The bound is on the job's expected end: the
// time limit shrink-to-admit then sets has its margin on top
// (RaisedTimeLimit).
func AllowedEnd(allowance, startRun, elapsed float64) float64 {
	if !(allowance > 0) || !(startRun > 0) {
		return 0
	}
	// A clock behind slurmctld's reads a negative elapsed: it must not
	// widen the allowance (helper 106's).
	return max((1+allowance)*startRun-max(elapsed, 0), 0)
}

// StartRun estimates a running job's run time at the allocation it
// started on, in seconds, for [AllowedEnd] in the daemon: its time limit
// less the raises shrink-to-admit made (limit − limitRaised), or, when its
// runtime reports progress (step of totalSteps, step > 0) after elapsed,
// its whole run at the average pace so far, elapsed × totalSteps / step,
// when that is less. Shrinks only slow a job, so after them the estimate
// is still at least that run; extra jobs that sped it up, or a requeued
// job's steps done before its restart (elapsed counts from its latest
// start), make it less, which only makes it yield less. A time limit set far above the run thus
// no longer loosens the allowance (the simulator knows the run exactly).
// 0, no allowance whatever the pace, when the limit less the raises is not
// above 0 (not known, or raises the store recorded above a limit its owner
// has lowered since): the estimate is never above that limit.
func StartRun(limit, limitRaised, elapsed time.Duration, step, totalSteps int) float64 {
	run := (limit - limitRaised).Seconds()
	if run <= 0 {
		return 0
	}
	if step > 0 && totalSteps >= step && elapsed > 0 {
		run = min(run, elapsed.Seconds()*float64(totalSteps)/float64(step))
	}
	return run
}
