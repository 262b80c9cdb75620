package planner

import (
	"math"
	"slices"
	"strings"
)

// A lend is one extra job lent to an elastic job. Lends fail when the
// job's rendezvous files point at a dead or hung coordinator, when its
// token is broken, or when a joiner is refused on the lent node; each
// failed lend is a Slurm job submitted and ended for nothing, so failed
// lends are retried with exponential backoff, per job and per node, and a
// job whose lends keep failing is not grown again until its status
// changes (issue 20 item 2). The daemon classifies each ended lend with
// [LendEnd.Outcome] (a refused submission with [SubmitFailure.Outcome],
// one cancelled pending with [PendingLend.Outcome]), keeps each job's
// [LendHistory] with
// [LendHistory.Record], and asks [RetryPolicy.MayLend] before every plan;
// [Plan] leaves out what the verdict forbids ([RunningJob.NoGrow] and
// [RunningJob.NoGrowNodes]).

// FailureSlackSeconds is how long before the end of its time limit a lend
// must have ended to count as failed: a lend that ran to within this of
// its limit was killed by the limit (Slurm counts the limit from the
// job's start, a little after the daemon reckons it; the slack also
// covers clock skew between the daemon's host and slurmctld's).
const FailureSlackSeconds = 60

// LendOutcome is what one ended lend says about lending to its job.
type LendOutcome int

// Lend outcomes.
const (
	// LendNeutral: it says nothing (the daemon ended it, Slurm preempted
	// it, or its job ended too).
	LendNeutral LendOutcome = iota
	// LendSucceeded: it ran to its time limit.
	LendSucceeded
	// LendFailed: it ended on its own well before its time limit while its
	// job still ran, or Slurm refused its submission ([SubmitFailure]), or
	// it stayed pending under a limit of its job's user, account or QOS
	// ([PendingLend]). It counts against the job and the node.
	LendFailed
	// LendNodeFailed: it stayed pending on its node past the daemon's
	// pending_timeout for a reason of the node ([PendingLend]: the GPUs
	// the snapshot saw idle were not free after all). It counts against
	// the node only: the job backs off that node, not everywhere, and is
	// never stopped by it.
	LendNodeFailed
)

// String returns "neutral", "succeeded", "failed" or "node-failed".
func (o LendOutcome) String() string {
	switch o {
	case LendSucceeded:
		return "succeeded"
	case LendFailed:
		return "failed"
	case LendNodeFailed:
		return "node-failed"
	}
	return "neutral"
}

// LendEnd is one ended lend as the daemon saw it.
type LendEnd struct {
	// State is the final Slurm state squeue showed (FAILED, COMPLETED,
	// PREEMPTED, ...), "" when squeue no longer listed the job: squeue
	// forgets ended jobs after MinJobAge and sacct is not always there, so
	// the outcome rests on times, not on the state.
	State string
	// Seen is when the daemon saw it ended; End is when its time limit
	// ends (seconds).
	Seen, End int64
	// Shrunk: the daemon signalled or cancelled it.
	Shrunk bool
	// ParentRunning: its elastic job still ran when it was seen ended.
	ParentRunning bool
}

// Outcome classifies the lend: neutral when the daemon shrank it, when its
// job no longer runs (its workers leave with the job), or when Slurm
// preempted it (its node went to a job of a higher-priority partition,
// which says nothing of the elastic job); failed when it was seen ended at
// least [FailureSlackSeconds] before its time limit; succeeded otherwise
// (it ran to its limit). A lend seen ended late, after an outage of the
// daemon, may be taken for one that ran to its limit: lateness only ever
// errs toward success.
func (e LendEnd) Outcome() LendOutcome {
	switch {
	case e.Shrunk || !e.ParentRunning || strings.HasPrefix(e.State, "PREEMPTED"):
		return LendNeutral
	case e.Seen <= e.End-FailureSlackSeconds:
		return LendFailed
	}
	return LendSucceeded
}

// LendHistory is one elastic job's failed lends: those since its last
// lend that succeeded, job-wide (Failures, Last) and per node (Nodes).
// The zero value is a job with no failed lend.
type LendHistory struct {
	// Failures counts the job's consecutive failed lends on any node;
	// Last is when the newest was seen (seconds).
	Failures int   `json:",omitempty"`
	Last     int64 `json:",omitempty"`
	// Status is the job's status when the newest failure was seen (an
	// opaque key the caller derives from what could make its lends work
	// again; see [RetryPolicy.MayLend]).
	Status string `json:",omitempty"`
	// Nodes are the job's consecutive failed lends per node, by node name.
	Nodes []NodeFailures `json:",omitempty"`
}

// NodeFailures counts one job's consecutive failed lends on one node.
type NodeFailures struct {
	Node     string
	Failures int
	Last     int64
}

// Empty reports whether h holds no failure.
func (h LendHistory) Empty() bool { return h.Failures == 0 && len(h.Nodes) == 0 }

// Record returns the history after a lend of the job on node ended with
// outcome o, seen at time at while the job's status was status: a failure
// adds one to the job's count and to the node's and sets Last and Status;
// a node's failure ([LendNodeFailed]) adds one to the node's count only
// and sets its Last; a success clears the job's count and the node's (the
// job's lends work; other nodes keep theirs); a neutral end changes
// nothing. h is not modified.
func (h LendHistory) Record(node string, o LendOutcome, at int64, status string) LendHistory {
	out := h
	out.Nodes = slices.Clone(h.Nodes)
	i := slices.IndexFunc(out.Nodes, func(n NodeFailures) bool { return n.Node == node })
	switch o {
	case LendFailed, LendNodeFailed:
		if o == LendFailed {
			out.Failures++
			out.Last, out.Status = at, status
		}
		if i < 0 {
			out.Nodes = append(out.Nodes, NodeFailures{Node: node})
			i = len(out.Nodes) - 1
		}
		out.Nodes[i].Failures++
		out.Nodes[i].Last = at
		slices.SortFunc(out.Nodes, func(a, b NodeFailures) int { return strings.Compare(a.Node, b.Node) })
	case LendSucceeded:
		out.Failures, out.Last = 0, 0
		if i >= 0 {
			out.Nodes = slices.Delete(out.Nodes, i, i+1)
		}
	}
	if len(out.Nodes) == 0 {
		out.Nodes = nil
	}
	return out
}

// RetryPolicy bounds how often failed lends are retried (the daemon's
// [retry] table). The zero policy never waits and never stops (the
// simulator's lends do not fail).
type RetryPolicy struct {
	// BaseSeconds is the wait after one failure; each further consecutive
	// failure doubles it, up to MaxSeconds.
	BaseSeconds, MaxSeconds int64
	// StopAfter is the number of consecutive failed lends after which the
	// job is not grown at all until its status changes (0: never).
	StopAfter int
}

// Backoff returns the wait after failures consecutive failures:
// 0 for none, else min(BaseSeconds · 2^(failures−1), MaxSeconds)
// (MaxSeconds ≤ 0: no cap, short of overflow).
func (p RetryPolicy) Backoff(failures int) int64 {
	if failures < 1 || p.BaseSeconds <= 0 {
		return 0
	}
	w := p.BaseSeconds
	for i := 1; i < failures && (p.MaxSeconds <= 0 || w < p.MaxSeconds) && w < math.MaxInt64/2; i++ {
		w *= 2
	}
	if p.MaxSeconds > 0 {
		w = min(w, p.MaxSeconds)
	}
	return w
}

// LendVerdict says where a job may be lent GPUs now ([RetryPolicy.MayLend]).
type LendVerdict struct {
	// Stopped: its last StopAfter or more lends failed and its status has
	// not changed since the newest failure; it is not grown at all.
	Stopped bool
	// Until: while now is before it, the job waits out the backoff of its
	// job-wide failures and is not grown (0: no wait).
	Until int64
	// Nodes are the nodes it waits out a node's backoff on, sorted.
	Nodes []string
}

// Held reports whether the job may not be grown at all at now.
func (v LendVerdict) Held(now int64) bool { return v.Stopped || now < v.Until }

// MayLend is the retry rule: given a job's history h, its status now and
// the time now (seconds), where may it be lent GPUs?
//
//   - After k ≥ 1 consecutive failed lends, the job is grown nowhere
//     before Last + Backoff(k), and after k_n ≥ 1 consecutive failed lends
//     on node n, it is not grown onto n before that node's Last +
//     Backoff(k_n). One broken node thus backs off alone once a lend
//     elsewhere succeeds, while a job whose every lend fails (a dead
//     coordinator) backs off everywhere.
//   - After StopAfter consecutive failed lends (StopAfter > 0) the job is
//     stopped: not grown at all until its status differs from the one
//     recorded with the newest failure.
//
// A status change lifts the stop but not the backoff: the status is the
// user's to change (a comment, a file in the job's directory), and if it
// cleared the count, rewriting a file every cycle would bring back a
// failed Slurm job every cycle. Only a lend that succeeds clears the
// count. So whatever a user does, a job whose lends keep failing gets
// one round of lends (one plan's grows) per MaxSeconds at most once its
// backoff has reached the cap, and none while its status stands still.
func (p RetryPolicy) MayLend(h LendHistory, status string, now int64) LendVerdict {
	var v LendVerdict
	if h.Failures > 0 {
		v.Stopped = p.StopAfter > 0 && h.Failures >= p.StopAfter && status == h.Status
		if until := h.Last + p.Backoff(h.Failures); now < until {
			v.Until = until
		}
	}
	for _, n := range h.Nodes {
		if n.Failures > 0 && now < n.Last+p.Backoff(n.Failures) {
			v.Nodes = append(v.Nodes, n.Node)
		}
	}
	slices.Sort(v.Nodes)
	return v
}
