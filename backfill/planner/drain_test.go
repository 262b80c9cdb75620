package planner

import (
	"fmt"
	"math"
	"testing"
)

func TestDrainBoundLeavesOutTheQueuedJobsOwnWork(t *testing.T) {
	type add struct {
		user string
		work float64
	}
	tests := []struct {
		name     string
		adds     []add
		user     string
		capacity float64
		want     float64
	}{
		{"nothing added", nil, "alice", 10, 0},
		{"other users' work over the capacity", []add{{"bob", 600}, {"carol", 400}}, "alice", 10, 100},
		{"the user's own work is left out", []add{{"alice", 5000}, {"bob", 1000}}, "alice", 10, 100},
		{"an unknown owner's work counts for everyone", []add{{"", 1000}, {"alice", 1000}}, "alice", 10, 100},
		{"an unknown queued job counts all work", []add{{"alice", 500}, {"bob", 500}}, "", 10, 100},
		{"at most ten years", []add{{"bob", 1e12}}, "alice", 1e-9, MaxDrainBound},
		{"no capacity: no bound", []add{{"bob", 1000}}, "alice", 0, 0},
		{"NaN capacity: no bound", []add{{"bob", 1000}}, "alice", math.NaN(), 0},
		{"non-positive, NaN and absurd work counts as none", []add{{"bob", -5}, {"bob", math.NaN()}, {"bob", math.Inf(1)}, {"bob", 1e30}, {"bob", 100}}, "alice", 10, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Drain{Capacity: tc.capacity}
			for _, a := range tc.adds {
				d.Add(a.user, a.work)
			}
			if got := d.Bound(tc.user); got != tc.want {
				t.Fatalf("Bound(%q, %v) = %v, want %v", tc.user, tc.capacity, got, tc.want)
			}
			var none *Drain
			if got := none.Bound(tc.user); got != 0 {
				t.Fatalf("a nil Drain bounds %v, want 0", got)
			}
			d.Reset()
			if got := d.Bound(""); got != 0 {
				t.Fatalf("after Reset, Bound = %v, want 0", got)
			}
		})
	}
}

// A cluster of 16 V100 (speed 3.1) and 16 T4 (speed 1) has a capacity of
// 65.6 reference GPUs. Alice queues a job; Bob's running job has 8 V100
// for 1,000 s left and Carol's queued job asks for 16 T4 for 2,000 s: the
// cluster cannot run their work in less than 866 s, so a shrink that ends
// a donor within 866 s from now does not set the makespan.
func ExampleDrain() {
	d := Drain{Capacity: 16*3.1 + 16*1.0}
	d.Add("bob", 8*1000*3.1)
	d.Add("carol", 16*2000*1.0)
	d.Add("alice", 4*3000*3.1) // her own queued work does not loosen her bound
	fmt.Printf("%.0f s\n", d.Bound("alice"))
	// Output: 866 s
}
