package planner

import (
	"slices"
	"testing"
)

func TestPriorityKeyOrdersAsSlurmsSchedulers(t *testing.T) {
	type job struct {
		id    string
		known bool
		prio  uint64
	}
	jobs := []job{
		{"7", true, 100}, {"10", true, 200}, {"9", true, 200}, {"3", false, 0}, {"100", true, 100}, {"8", true, 50},
	}
	slices.SortStableFunc(jobs, func(a, b job) int {
		return NewPriorityKey(a.known, a.prio, a.id).Compare(NewPriorityKey(b.known, b.prio, b.id))
	})
	var got []string
	for _, j := range jobs {
		got = append(got, j.id)
	}
	// unread first; then the higher priority; equal priorities by job id as a number
	if want := []string{"3", "9", "10", "7", "100", "8"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
