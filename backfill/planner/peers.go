package planner

import (
	"cmp"
	"slices"
)

// PeerJob is one job competing for the GPUs, as [Peers] counts it.
type PeerJob struct {
	// User is the job's owner (the daemon's owner key, a trace's user
	// column); "" when not known.
	User string
	// Left is its time left, seconds: a running job's until its time
	// limit ends, a pending job's run time at its request (its time
	// limit).
	Left float64
	// Pending is set for a job waiting for resources or its turn.
	Pending bool
}

// Peers are the jobs running or waiting beside a job that would start
// ahead of its turn, from which its peer median is taken
// ([WithinPeerBound]). Build it once per decision round ([NewPeers]) and
// ask it per deciding job ([Peers.MedianFor]).
type Peers struct {
	jobs []PeerJob          // by Left
	memo map[string]float64 // MedianFor's answers by user
}

// NewPeers returns the Peers of jobs; it sorts jobs and keeps them.
func NewPeers(jobs []PeerJob) *Peers {
	slices.SortFunc(jobs, func(a, b PeerJob) int { return cmp.Compare(a.Left, b.Left) })
	return &Peers{jobs: jobs, memo: map[string]float64{}}
}

// MedianFor is the peer median of a job of user: [PeerMedian] (the upper
// median) of the jobs' times left, leaving out the pending jobs of user,
// the deciding job itself among them. What a user queues therefore cannot
// loosen the bound her own job is held to (a tester queued long jobs to
// loosen it and could have cancelled them once her job was admitted:
// helper 100, BENCHMARKS.md E68), and no job counts in its own median;
// every running job counts, as its GPUs are really held. user "" (not
// known: a trace without a user column) leaves nothing out, the deciding
// job included; the daemon always knows the owner. 0 when no job counts
// (no bound).
func (p *Peers) MedianFor(user string) float64 {
	if p == nil {
		return 0
	}
	if m, ok := p.memo[user]; ok {
		return m
	}
	skip := func(j PeerJob) bool { return user != "" && j.Pending && j.User == user }
	n := 0
	for _, j := range p.jobs {
		if !skip(j) {
			n++
		}
	}
	m, k := 0.0, n/2
	for _, j := range p.jobs {
		if skip(j) {
			continue
		}
		if k == 0 {
			m = j.Left
			break
		}
		k--
	}
	p.memo[user] = m // 0 when no job counts
	return m
}
