package planner

import (
	"fmt"
	"reflect"
	"testing"
)

// PlanNudges nudges jobs whose begin time slurmctld says has passed, once
// each, a bounded number a round, and never a job whose begin time squeue
// still prints.
func TestPlanNudgesOnlyJobsWhoseBeginTimeHasPassed(t *testing.T) {
	const now = 1000
	many := func(n int) []BeginHeld {
		var js []BeginHeld
		for i := range n {
			js = append(js, BeginHeld{ID: fmt.Sprint(10 + i)})
		}
		return js
	}
	tests := []struct {
		name   string
		jobs   []BeginHeld
		nudged []string
		want   NudgePlan
	}{
		{name: "nothing held: nothing to do"},
		{name: "a begin time squeue no longer prints has passed: nudged", jobs: []BeginHeld{{ID: "7"}},
			want: NudgePlan{Nudge: []string{"7"}}},
		{name: "a begin time squeue still prints is not nudged, even when the daemon's clock has passed it (slurmctld's says not yet)",
			jobs: []BeginHeld{{ID: "7", Begin: now}, {ID: "8", Begin: now - 1}}, want: NudgePlan{WakeAt: now - 1}},
		{name: "a begin time ahead is never nudged (it would start early), only woken for",
			jobs: []BeginHeld{{ID: "7", Begin: now + 12}, {ID: "8", Begin: now + 5}},
			want: NudgePlan{WakeAt: now + 5}},
		{name: "a job nudged before is not nudged again while it stays held", jobs: []BeginHeld{{ID: "7"}, {ID: "8"}},
			nudged: []string{"7"}, want: NudgePlan{Nudge: []string{"8"}}},
		{name: "a job listed twice is nudged once", jobs: []BeginHeld{{ID: "7"}, {ID: "7"}},
			want: NudgePlan{Nudge: []string{"7"}}},
		{name: "at most MaxNudgesPerCycle a round, in the order given; the rest at the next", jobs: many(MaxNudgesPerCycle + 3),
			want: NudgePlan{Nudge: []string{"10", "11", "12", "13"}}},
		{name: "passed and ahead together", jobs: []BeginHeld{{ID: "7", Begin: now + 50}, {ID: "8"}},
			want: NudgePlan{Nudge: []string{"8"}, WakeAt: now + 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			was := map[string]bool{}
			for _, id := range tt.nudged {
				was[id] = true
			}
			got := PlanNudges(tt.jobs, func(id string) bool { return was[id] })
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("PlanNudges = %+v, want %+v", got, tt.want)
			}
		})
	}
	if MaxNudgesPerCycle != 4 {
		t.Fatalf("the table above assumes MaxNudgesPerCycle 4, got %d", MaxNudgesPerCycle)
	}
}
