package planner

import (
	"cmp"
	"fmt"
	"math"
)

// QueueOrder orders two jobs waiting for resources as shrink-to-admit and
// start-small consider them, like cmp.Compare: the earlier planned start
// first (Unix seconds; 0, none planned, after every planned one), then the
// lower job id, numeric ids by value ("9" before "10"). The first job in
// this order is the queue head: the job Slurm's backfill plans to start
// first. Sorting many jobs, compare their QueueKeys instead.
func QueueOrder(aStart int64, aID string, bStart int64, bID string) int {
	return NewQueueKey(aStart, aID).Compare(NewQueueKey(bStart, bID))
}

// QueueKey is a job's place in QueueOrder, computed once so that sorting
// n jobs formats each id once rather than at every comparison.
type QueueKey struct {
	start int64  // planned start, math.MaxInt64 for none
	id    string // the id padded so that numeric ids compare by value
}

// NewQueueKey returns the QueueKey of a job planned to start at start
// (Unix seconds; 0: none planned) with job id id.
func NewQueueKey(start int64, id string) QueueKey {
	if start == 0 {
		start = math.MaxInt64
	}
	return QueueKey{start: start, id: fmt.Sprintf("%020s", id)}
}

// Compare orders a and b as QueueOrder does, like cmp.Compare.
func (a QueueKey) Compare(b QueueKey) int {
	return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.id, b.id))
}

// PriorityKey is a pending job's place in Slurm's priority order, the
// order its schedulers consider jobs in (sort_job_queue2 in
// src/slurmctld/job_scheduler.c: the higher partition PriorityTier first,
// then the higher job priority, squeue's %Q; equal priorities, the lower
// job id first). Shrink-to-admit tries queued jobs in it, and counts the
// planned starts of the jobs ahead in it as those Slurm's backfill keeps
// ([TakesReserved]).
type PriorityKey struct {
	resv bool
	// resvFirst: resv ranks ahead across tiers too (InReservation)
	resvFirst bool
	known     bool
	tier      uint64
	prio      uint64
	id        QueueKey
}

// NewPriorityKey returns the PriorityKey of job id with priority prio in a
// partition of PriorityTier tier (a job in several partitions: the highest
// of their tiers, where Slurm considers it first; [TierUnknown] when one
// was not read, which ranks it ahead of every job whose tier was); known
// is false when its priority was not read: such a job counts as ahead of
// every job of its tier whose priority was.
func NewPriorityKey(known bool, tier, prio uint64, id string) PriorityKey {
	return PriorityKey{known: known, tier: tier, prio: prio, id: NewQueueKey(0, id)}
}

// InReservation returns k for a job that runs in an advance reservation
// (--reservation): Slurm ranks it ahead of every job without one, whatever
// their priorities, and such jobs among themselves as the others
// (sort_job_queue2 in src/slurmctld/job_scheduler.c, 22.05 and 24.11
// alike, compares resv_id before tier and priority). acrossTiers says
// whether that holds across partition tiers too: it does not under
// preempt/partition_prio (the configuration docs/deploy.md requires),
// whose preemption check, made first, ranks a job of a higher tier whose
// partition shares nodes ahead (a tester saw a lower tier's job in a
// reservation backfilled after every job of the higher tier on the 22.05
// lab, and, with preempt/none, start first on a node freed for a job of
// the higher tier). Jobs of partitions that share no node take no node
// from each other, so the tier then comes first here.
func (k PriorityKey) InReservation(acrossTiers bool) PriorityKey {
	k.resv, k.resvFirst = true, acrossTiers
	return k
}

// TierUnknown is the PriorityTier of a job whose partition's tier was not
// read ([NewPriorityKey]): above every tier Slurm has (16 bits), so such a
// job counts as ranked ahead, which may cost an admission but frees no
// node for a job Slurm would start first.
const TierUnknown = math.MaxUint64

// Compare orders a and b, like cmp.Compare: the job ahead first (the
// higher tier, then one in a reservation, or one in a reservation first
// when InReservation said so across tiers, then an unread priority, then
// the higher priority, then the lower job id).
func (a PriorityKey) Compare(b PriorityKey) int {
	switch {
	case a.resv != b.resv && (a.tier == b.tier || a.resvFirst || b.resvFirst):
		if a.resv {
			return -1
		}
		return 1
	case a.tier != b.tier:
		return -cmp.Compare(a.tier, b.tier)
	case a.known != b.known && !a.known:
		return -1
	case a.known != b.known:
		return 1
	case a.prio != b.prio:
		return -cmp.Compare(a.prio, b.prio)
	}
	return a.id.Compare(b.id)
}
