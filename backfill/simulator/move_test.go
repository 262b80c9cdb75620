package simulator

import (
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// TestMoveToFasterMovesALongJobOffTheT4sOnceTheV100sAreIdle: on one V100
// node and one T4 node of 4 GPUs each, A (4 GPUs, pinned to the V100s)
// runs for 300 s; B (d2, 4 GPUs at most, 10,000 s of work on V100s)
// arrives at 10 s and starts on the T4s, where it would run 31,000 s.
// With Config.MoveToFaster it moves to the V100s when A ends (one
// rescale, planner.DefaultMoveCost) and ends about 20,000 s sooner. A
// job queued for the V100s keeps them (C), and a job whose move would
// not pay stays (D: 100 s of work left on the T4s' pace).
// moveTableHead is the trace columns of the move tests' tables.
const moveTableHead = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n"

// runOnV100AndT4 runs the jobs of csv (rows under moveTableHead) on one
// V100 node and one T4 node of 4 GPUs each, a T4 at 1 / 3.1 of a V100,
// with the daemon's defaults changed by set; it returns the per-job
// records and the moves made.
func runOnV100AndT4(t *testing.T, csv string, set func(*Config)) (map[string]JobRecord, int) {
	t.Helper()
	cfg := twoTypes(4, 4, 4, 1/3.1)
	set(&cfg)
	recs, res := runTable(t, moveTableHead+csv, cfg)
	return recs, res.Moves
}

func TestMoveToFasterMovesALongJobOffTheT4sOnceTheV100sAreIdle(t *testing.T) {
	run := func(csv string, move bool) (map[string]JobRecord, int) {
		return runOnV100AndT4(t, csv, func(c *Config) { c.MoveToFaster = move })
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

// TestMoveToFasterMovesAJobThatGrewOntoExtraJobs: B (d2, 4 GPUs asked, up
// to 8) starts on a T4 node while A holds the V100s and grows onto the
// other T4 node by extra jobs; when A ends, its extra jobs end and it
// moves at once (BENCHMARKS.md, issue 17):
//   - E54: with a T4 at 1 / 3.1 of a V100 and one V100 node, B's pace on 8
//     T4s is below 4 V100s' by far; it ends at 10,312 s. Before, a job with
//     extra jobs was not moved until its extra jobs had ended at their time
//     limits (11,741 s).
//   - E55: with a T4 at 1 / 1.5 of a V100 and two V100 nodes, 4 V100s run B
//     slower than its 8 T4s, but 8 V100s run it faster by far: the move is
//     weighed at the GPUs it holds, it restarts on 4 V100s, grows onto the
//     other V100 node and ends at 11,746 s. Weighed at its base GPUs
//     alone, it moved only once its extra job had ended (12,802 s; not
//     moved, 17,256 s).
func TestMoveToFasterMovesAJobThatGrewOntoExtraJobs(t *testing.T) {
	const head = moveTableHead
	for _, tc := range []struct {
		name            string
		v100            int
		t4Speed         float64
		csv             string
		endBy, endAbout int64
	}{
		{"E54: its pace counts its extra jobs", 4, 1 / 3.1, "A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,8,1,8,d2\n", 11000, 10312},
		{"E55: it is weighed at the GPUs it holds", 8, 1 / 1.5, "A,0,300,8,v100,,1,8,8,8,d1\nB,10,20000,4,,,1,8,1,8,d2\n", 12200, 11746},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, res := runTable(t, head+tc.csv, twoTypes(tc.v100, 8, 4, tc.t4Speed))
			b := recs["B"]
			if b.StartTypes != "t4" || b.PeakGPUs != 8 {
				t.Fatalf("B started on %q and held at most %d GPUs; want the T4s and 8 (grown by extra jobs)", b.StartTypes, b.PeakGPUs)
			}
			if res.Moves != 1 {
				t.Fatalf("%d moves, want B moved once A's V100s are idle", res.Moves)
			}
			if b.End > tc.endBy {
				t.Fatalf("B ended at %d s; want it moved when A ends (about %d s)", b.End, tc.endAbout)
			}
		})
	}
}

// TestMoveOneTypeAfreshMovesAD1JobThatNamesNoType: as in
// TestMoveToFasterMovesALongJobOffTheT4sOnceTheV100sAreIdle, but B is d1
// and names no GPU type. A d1 job never moves by default (its checkpoint's
// bits are the T4s'); with Config.MoveOneTypeAfresh it moves to the V100s
// when A ends and starts over there, redoing the 290 s it ran (E59). A
// d1 job pinned to its type never moves, and one far along stays: starting
// over would end it later.
func TestMoveOneTypeAfreshMovesAD1JobThatNamesNoType(t *testing.T) {
	run := func(csv string, afresh bool) (map[string]JobRecord, int) {
		return runOnV100AndT4(t, csv, func(c *Config) { c.MoveOneTypeAfresh = afresh })
	}
	const ab = "A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,4,1,4,d1\n"
	off, movesOff := run(ab, false)
	on, movesOn := run(ab, true)
	if movesOff != 0 || movesOn != 1 {
		t.Fatalf("%d moves without the option and %d with it; want 0 and 1", movesOff, movesOn)
	}
	// Moved at 300 s, 150 s to move, then all 10,000 s of its work on the
	// V100s: 10,450 s (10,356 s had it kept the 94 s of V100 work it did).
	if b := on["B"]; b.StartTypes != "t4" || b.Rescales != 1 || b.End < 10440 || b.End > 10470 || off["B"].End < 30000 {
		t.Fatalf("B started on %q, rescaled %d times, ended at %d s (%d s without the option): want a start on the T4s, one move and an end at about 10,450 s (31,000 s without)",
			b.StartTypes, b.Rescales, b.End, off["B"].End)
	}
	for _, tc := range []struct{ name, csv string }{
		{"a d1 job pinned to its type stays", "A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,t4,,1,4,1,4,d1\n"},
		{"a d1 job far along stays: starting over ends it later", "A,0,20000,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,4,1,4,d1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, moves := run(tc.csv, true)
			if moves != 0 || recs["B"].Rescales != 0 {
				t.Fatalf("%d moves, B rescaled %d times; want none", moves, recs["B"].Rescales)
			}
		})
	}
}

// TestTheAllowanceReadsAJobsPaceSinceItsRestart: shrink-to-admit's
// allowance reads a running job's run as the daemon's planner.StartRun
// does: its run at the allocation it started on, or less when the time
// since it (re)started over the fraction of its work done says less: a
// job moved to faster GPUs (requeued: Slurm's StartTime is the restart)
// no longer keeps the long run of its first start on slow ones.
func TestTheAllowanceReadsAJobsPaceSinceItsRestart(t *testing.T) {
	tests := []struct {
		name          string
		now, from     int64
		rem, startRun float64
		want          float64
	}{
		{"40 % done 200 s after its restart: a run of 500 s", 300, 100, 600, 2000, 500},
		{"its start run when that is less", 300, 100, 600, 400, 400},
		{"its start run at the instant it (re)started", 100, 100, 600, 2000, 2000},
		{"its start run before any work is done", 300, 100, 1000, 2000, 2000},
		{"its start run while a rescale's cost leaves more work than it began with", 300, 100, 1030, 2000, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sim{now: tt.now}
			r := &run{j: &trace.Job{Duration: 1000}, rem: tt.rem, startRun: tt.startRun, runFrom: tt.from}
			if got := s.startRunEstimate(r); got != tt.want {
				t.Fatalf("startRunEstimate = %v, want %v", got, tt.want)
			}
		})
	}
}
