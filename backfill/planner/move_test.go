package planner

import (
	"fmt"
	"testing"
)

func TestMoveToFaster(t *testing.T) {
	m := DefaultModel(4, 4)
	t4 := []SpeedCount{{Speed: 1, N: 4}}
	v100 := []SpeedCount{{Speed: 3.1, N: 4}}
	for _, c := range []struct {
		name string
		q    MoveRequest
		want bool
	}{
		{"a long job on T4s moves to idle V100s", MoveRequest{m, 15000, t4, v100, DefaultMoveCost, 0, 0}, true},
		{"a job about to end stays: the move costs more than it saves", MoveRequest{m, 150, t4, v100, DefaultMoveCost, 0, 0}, false},
		{"no faster GPUs: no move", MoveRequest{m, 15000, v100, t4, DefaultMoveCost, 0, 0}, false},
		{"the same GPUs: no move", MoveRequest{m, 15000, t4, t4, 0, 0, 0}, false},
		{"no work left", MoveRequest{m, 0, t4, v100, 0, 0, 0}, false},
		{"no GPUs to move to", MoveRequest{m, 15000, t4, nil, 0, 0, 0}, false},
		{"a cost that is not a number", MoveRequest{m, 15000, t4, v100, nan(), 0, 0}, false},
		{"a job among the longest moves", MoveRequest{m, 15000, t4, v100, DefaultMoveCost, 150000, 0}, true},
		{"a job far shorter than the longest stays", MoveRequest{m, 15000, t4, v100, DefaultMoveCost, 150001, 0}, false},
		{"within the margin: 8 % faster is not enough", MoveRequest{m, 10000, t4, []SpeedCount{{Speed: 1.08, N: 4}}, 0, 0, 0}, false},
		{"a P100 to V100 move (3.1 / 2.4) passes it", MoveRequest{m, 10000, []SpeedCount{{Speed: 2.4, N: 4}}, []SpeedCount{{Speed: 3.1, N: 4}}, 150, 0, 0}, true},
		{"a move that saves more than the margin", MoveRequest{m, 10000, t4, []SpeedCount{{Speed: 1.15, N: 4}}, 0, 0, 0}, true},
		// A d1 job moved to another type starts over (Redo: its work done).
		{"a d1 job early in its run moves and starts over", MoveRequest{m, 15000, t4, v100, DefaultMoveCost, 0, 5000}, true},
		{"a d1 job far along stays: starting over costs more", MoveRequest{m, 3000, t4, v100, DefaultMoveCost, 0, 27000}, false},
		{"a negative redo is refused", MoveRequest{m, 15000, t4, v100, DefaultMoveCost, 0, -1}, false},
		{"a redo that is not a number is refused", MoveRequest{m, 15000, t4, v100, DefaultMoveCost, 0, nan()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := MoveToFaster(c.q); got != c.want {
				t.Fatalf("MoveToFaster = %v, want %v (left %.0f s, after %.0f s)", got, c.want,
					RunTime(c.q.Model, c.q.Now, c.q.Work), c.q.Cost+RunTime(c.q.Model, c.q.To, c.q.Work+c.q.Redo))
			}
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

// A 4-GPU job with 15,000 s of work left on four T4s (speed 1) ends
// about 10,000 s sooner on four V100s (speed 3.1), even after a 150 s move.
func ExampleMoveToFaster() {
	q := MoveRequest{Model: DefaultModel(4, 4), Work: 15000, Now: []SpeedCount{{Speed: 1, N: 4}},
		To: []SpeedCount{{Speed: 3.1, N: 4}}, Cost: DefaultMoveCost}
	fmt.Printf("%.0f s left, %.0f s after a move: %v\n", RunTime(q.Model, q.Now, q.Work),
		q.Cost+RunTime(q.Model, q.To, q.Work), MoveToFaster(q))
	// Output: 15000 s left, 4989 s after a move: true
}
