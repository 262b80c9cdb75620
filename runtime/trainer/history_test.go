package trainer

import (
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/schedule"
)

// TestTheHistoryHasOneSpanPerWorldSizeTheStepsRanOn feeds the allocations
// a run notes (schedule changes, joins, losses, in order) and checks the
// schedule the summary reports: one FROM:W span per stretch of steps that
// ran on W physical workers.
func TestTheHistoryHasOneSpanPerWorldSizeTheStepsRanOn(t *testing.T) {
	for _, c := range []struct {
		name  string
		noted []schedule.Allocation
		want  string
	}{
		{"a joiner admitted and then lost later makes two changes",
			[]schedule.Allocation{{FromStep: 0, Workers: 1}, {FromStep: 3, Workers: 2}, {FromStep: 5, Workers: 1}}, "0:1,3:2,5:1"},
		{"a joiner admitted and lost before its first step leaves no span",
			[]schedule.Allocation{{FromStep: 0, Workers: 1}, {FromStep: 3, Workers: 2}, {FromStep: 3, Workers: 1}}, "0:1"},
		{"joiners admitted before the first step replace the start",
			[]schedule.Allocation{{FromStep: 0, Workers: 1}, {FromStep: 0, Workers: 3}}, "0:3"},
		{"an unchanged allocation adds nothing",
			[]schedule.Allocation{{FromStep: 0, Workers: 2}, {FromStep: 4, Workers: 2}}, "0:2"},
		{"two changes at one step keep the last",
			[]schedule.Allocation{{FromStep: 0, Workers: 2}, {FromStep: 4, Workers: 3}, {FromStep: 4, Workers: 4}}, "0:2,4:4"},
		{"other speeds are a change",
			[]schedule.Allocation{{FromStep: 0, Workers: 2, Speeds: []float64{1, 1}}, {FromStep: 4, Workers: 2, Speeds: []float64{2, 1}}}, "0:2@1/1,4:2@2/1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := &job{}
			for _, a := range c.noted {
				j.noteAllocation(a)
			}
			if got := j.history.String(); got != c.want {
				t.Fatalf("history %q, want %q", got, c.want)
			}
		})
	}
}
