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
	}
	jobs := []job{
		{"7", true, 1, 100}, {"10", true, 1, 200}, {"9", true, 1, 200}, {"3", false, 1, 0}, {"100", true, 1, 100}, {"8", true, 1, 50},
		{"20", true, 0, 900}, {"21", true, 2, 10}, {"22", true, TierUnknown, 5},
	}
	slices.SortStableFunc(jobs, func(a, b job) int {
		return NewPriorityKey(a.known, a.tier, a.prio, a.id).Compare(NewPriorityKey(b.known, b.tier, b.prio, b.id))
	})
	var got []string
	for _, j := range jobs {
		got = append(got, j.id)
	}
	// the higher tier first (unread: highest), whatever the priority
	// (read or not: a tester's array job, whose priority is not read, in
	// a lower tier); then an unread priority; then the higher priority;
	// equal priorities by job id as a number
	if want := []string{"22", "21", "3", "9", "10", "7", "100", "8", "20"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
