package planner

import (
	"fmt"
	"math"
	"slices"
)

// StartSmallRule selects when a queued elastic job may start on fewer GPUs
// than it asked for ([StartSmall]). The zero value never starts small.
type StartSmallRule int

// The rules.
const (
	// StartSmallOff: a job starts at its request or waits (Slurm's rule).
	StartSmallOff StartSmallRule = iota
	// StartSmallBeforeReservation: the queue head may start now on idle
	// GPUs nobody else takes in this pass (after the backfill pass) when, at
	// that smaller size and without growing, it ends no later than its own
	// reserved start. It then holds nothing at its reservation, like any
	// backfilled job, so no reservation and no job behind it can move; it
	// can only take GPUs that later arrivals might have backfilled into.
	StartSmallBeforeReservation
	// StartSmallEndsEarlier: as StartSmallBeforeReservation, but it is
	// enough that the job ends earlier than it would by waiting (now +
	// run time small < reserved start + run time at its request). The job
	// behind it can then reserve no later, but short jobs that the
	// backfill pass would have run in the gap find fewer GPUs (the rule of the
	// first simulator, dropped for doubling mean JCT on Pollux workload 2).
	StartSmallEndsEarlier
)

// String returns the rule's configuration name.
func (r StartSmallRule) String() string {
	switch r {
	case StartSmallBeforeReservation:
		return "before-reservation"
	case StartSmallEndsEarlier:
		return "ends-earlier"
	}
	return "off"
}

// ParseStartSmallRule parses a rule's name ("off", "before-reservation",
// "ends-earlier"); an unknown name is an error listing the known ones.
func ParseStartSmallRule(s string) (StartSmallRule, error) {
	for _, r := range []StartSmallRule{StartSmallOff, StartSmallBeforeReservation, StartSmallEndsEarlier} {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown start-small rule %q: use off, before-reservation or ends-earlier", s)
}

// StartSmallRequest is one start-small question for a queued job.
type StartSmallRequest struct {
	Rule StartSmallRule
	// Model is the job's throughput model; Work its remaining work in
	// seconds at its reference size (RunTime's work).
	Model Model
	Work  float64
	// Now and ReservedStart (> Now) are in seconds: the job's reserved
	// start is when it would start at its request by waiting.
	Now, ReservedStart int64
	// AtRequest are the GPUs it would get at ReservedStart (by speed);
	// Small are the fewer GPUs it could have now, at least its minimum.
	AtRequest, Small []SpeedCount
	// Horizon, with StartSmallEndsEarlier, is the longest time left
	// (seconds) of any running job: at the smaller size the job must also
	// end within max(Horizon, its run time at its request) from now, so a
	// job started small never becomes the one that ends last and sets the
	// makespan. 0: no bound.
	Horizon float64
	// Delay, with StartSmallEndsEarlier, is how much later the queued
	// jobs critical for the makespan could start if this job starts small
	// ([Cluster.CriticalDelay], seconds summed): the job must save itself
	// more than that (Wait + its run time at its request − its run time
	// small > Delay), so a small start never costs the long jobs behind
	// it more than it gains. 0: nothing is delayed.
	Delay float64
	// Wait is how long the job would wait for its request (seconds), what
	// Delay is weighed against; 0: ReservedStart − Now.
	Wait float64
	// PeerMedian, with StartSmallEndsEarlier, is the median time left
	// (seconds) of the jobs running or waiting beside it ([PeerMedian]):
	// at the smaller size the job must end within that bound
	// ([WithinPeerBound]). 0: no bound.
	PeerMedian float64
}

// StartSmallPeerFactor bounds the run time of a job started ahead of its
// turn by the median time left of the jobs beside it ([WithinPeerBound]).
var StartSmallPeerFactor = 2.0

// WithinPeerBound reports whether a job that would hold GPUs for run
// seconds may start ahead of its turn (started small, or admitted by
// shrinking running jobs), given peerMedian, the median time left
// (seconds) of the jobs running or waiting for resources beside it
// ([PeerMedian]): run must be at most StartSmallPeerFactor × peerMedian.
// Mean JCT favours the shortest remaining time first; a job far longer
// than most, started early, holds its GPUs through the stream of short
// jobs that arrive meanwhile, and they wait for it: on Pollux workloads
// such starts made mean JCT up to 1.7 × rigid's (BENCHMARKS.md E67).
// Without the bound the job would wait for its turn, as under rigid
// Slurm. peerMedian ≤ 0 (no job beside it): no bound.
func WithinPeerBound(run, peerMedian float64) bool {
	return peerMedian <= 0 || run <= StartSmallPeerFactor*peerMedian
}

// PeerMedian is the median of left, the time left (seconds) of each job
// running or waiting for resources: a running job's until its time limit
// ends, a waiting job's its run time at its request (its time limit). 0
// when left is empty. It sorts left.
func PeerMedian(left []float64) float64 {
	if len(left) == 0 {
		return 0
	}
	slices.Sort(left)
	return left[len(left)/2]
}

// StartSmall reports whether the job of q should start now on q.Small
// rather than wait for q.AtRequest, under q.Rule (see [StartSmallRule]),
// and the end of its time limit if it does (now + its run time on Small,
// rounded up to whole seconds). Run times come from [RunTime]; a job never
// counts on growing, so the decision is safe when no GPU is ever idle.
// Sources: EasyScale (arXiv 2208.14228) §4.3 starts jobs below their
// request and grows them; the guard against delaying others is EASY
// backfill's (Lifka 1995) applied to the smaller job.
func StartSmall(q StartSmallRequest) (end int64, ok bool) {
	if q.Rule == StartSmallOff || q.ReservedStart <= q.Now {
		return 0, false
	}
	small := RunTime(q.Model, q.Small, q.Work)
	if math.IsInf(small, 1) {
		return 0, false
	}
	end = q.Now + int64(math.Ceil(small))
	switch q.Rule {
	case StartSmallBeforeReservation:
		return end, end <= q.ReservedStart
	case StartSmallEndsEarlier:
		full := RunTime(q.Model, q.AtRequest, q.Work)
		if q.Horizon > 0 && small >= max(q.Horizon, full) {
			return end, false
		}
		if !WithinPeerBound(small, q.PeerMedian) {
			return end, false
		}
		if q.Delay > 0 {
			wait := q.Wait
			if wait <= 0 {
				wait = float64(q.ReservedStart - q.Now)
			}
			if !(wait+full-small > q.Delay) {
				return end, false
			}
		}
		return end, float64(end) < float64(q.ReservedStart)+full
	}
	return 0, false
}
