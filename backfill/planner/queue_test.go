package planner

import (
	"slices"
	"testing"
)

func TestPriorityKeyOrdersAsSlurmsSchedulers(t *testing.T) {
	type job struct {
		id    string
		known bool
		tier  uint64
		prio  uint64
		resv  bool // in an advance reservation
	}
	jobs := []job{
		{"7", true, 1, 100, false}, {"10", true, 1, 200, false}, {"9", true, 1, 200, false}, {"3", false, 1, 0, false}, {"100", true, 1, 100, false}, {"8", true, 1, 50, false},
		{"20", true, 0, 900, false}, {"21", true, 2, 10, false}, {"22", true, TierUnknown, 5, false},
		{"30", true, 0, 1, true}, {"31", true, 0, 2, true}, {"32", false, 0, 0, true},
	}
	key := func(j job) PriorityKey {
		k := NewPriorityKey(j.known, j.tier, j.prio, j.id)
		if j.resv {
			k = k.InReservation(false)
		}
		return k
	}
	slices.SortStableFunc(jobs, func(a, b job) int { return key(a).Compare(key(b)) })
	var got []string
	for _, j := range jobs {
		got = append(got, j.id)
	}
	// the higher tier first (unread: highest), whatever the priority
	// (read or not: a tester's array job, whose priority is not read, in
	// a lower tier); then an unread priority; then the higher priority;
	// equal priorities by job id as a number; within a tier, jobs in a
	// reservation first, among themselves as the others (Slurm's
	// sort_job_queue2 under preempt/partition_prio)
	if want := []string{"22", "21", "3", "9", "10", "7", "100", "8", "32", "31", "30", "20"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// Without preempt/partition_prio Slurm ranks a job in a reservation ahead
// of jobs of higher tiers too (a tester saw it start first on a node freed
// for a job of the higher tier).
func TestAReservationRanksAcrossTiersWithoutPartitionPreemption(t *testing.T) {
	low := NewPriorityKey(true, 1, 5, "7").InReservation(true)
	high := NewPriorityKey(true, 10, 900, "8")
	if low.Compare(high) >= 0 || high.Compare(low) <= 0 {
		t.Errorf("across tiers: the low-tier job in a reservation is not ranked first")
	}
	tiered := NewPriorityKey(true, 1, 5, "7").InReservation(false)
	if tiered.Compare(high) <= 0 || high.Compare(tiered) >= 0 {
		t.Errorf("under partition preemption: the higher tier is not ranked first")
	}
}
