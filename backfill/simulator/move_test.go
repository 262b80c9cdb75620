package simulator

import "testing"

// TestMoveToFasterMovesALongJobOffTheT4sOnceTheV100sAreIdle: on one V100
// node and one T4 node of 4 GPUs each, A (4 GPUs, pinned to the V100s)
// runs for 300 s; B (d2, 4 GPUs at most, 10,000 s of work on V100s)
// arrives at 10 s and starts on the T4s, where it would run 31,000 s.
// With Config.MoveToFaster it moves to the V100s when A ends (one
// rescale, planner.DefaultMoveCost) and ends about 20,000 s sooner. A
// job queued for the V100s keeps them (C), and a job whose move would
// not pay stays (D: 100 s of work left on the T4s' pace).
func TestMoveToFasterMovesALongJobOffTheT4sOnceTheV100sAreIdle(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n"
	run := func(csv string, move bool) (map[string]JobRecord, int) {
		cfg := twoTypes(4, 4, 4, 1/3.1)
		cfg.MoveToFaster = move
		recs, res := runTable(t, head+csv, cfg)
		return recs, res.Moves
	}
	const ab = "A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,4,1,4,d2\n"
	off, movesOff := run(ab, false)
	on, movesOn := run(ab, true)
	if movesOff != 0 || movesOn != 1 {
		t.Fatalf("%d moves without the option and %d with it; want 0 and 1", movesOff, movesOn)
	}
	if b := on["B"]; b.StartTypes != "t4" || b.Rescales != 1 || b.End >= off["B"].End-15000 {
		t.Fatalf("B started on %q, rescaled %d times, ended at %d s (%d s without moving): want a start on the T4s, one move and an end about 20,000 s sooner",
			b.StartTypes, b.Rescales, b.End, off["B"].End)
	}
	for _, tc := range []struct{ name, csv, id string }{
		{"a job queued for the V100s keeps them", ab + "C,200,40000,4,v100,,1,4,4,4,d1\n", "B"},
		{"a move that does not pay is not made", "A,0,300,4,v100,,1,4,4,4,d1\nD,10,130,4,,,1,4,1,4,d2\n", "D"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, moves := run(tc.csv, true)
			if moves != 0 || recs[tc.id].Rescales != 0 {
				t.Fatalf("%d moves, %s rescaled %d times; want none", moves, tc.id, recs[tc.id].Rescales)
			}
		})
	}
}
