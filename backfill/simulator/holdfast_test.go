package simulator

import "testing"

// TestHoldForFastWaitsForTheV100sWhenThatEndsTheJobSooner: on one V100
// node and one T4 node of 4 GPUs each, A (4 GPUs, pinned to the V100s)
// runs for 300 s; B (d2, 4 GPUs at most, 4 logical workers, 10,000 s of
// work at its request on V100s) arrives at 10 s. Slurm starts B at once
// on the free T4s, where it runs 3.1 times longer (31,000 s); with
// Config.HoldForFast it waits for A's V100s and ends about 20,000 s
// sooner. A job whose fast wait would not pay (C, the same but A running
// 30,000 s) starts on the T4s at once either way.
func TestHoldForFastWaitsForTheV100sWhenThatEndsTheJobSooner(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n"
	run := func(csv string, hold bool) map[string]JobRecord {
		cfg := twoTypes(4, 4, 4, 1/3.1)
		cfg.HoldForFast = hold
		cfg.MoveToFaster = false // the hold alone: a move would take B to the V100s once A ends
		recs, _ := runTable(t, head+csv, cfg)
		return recs
	}
	for _, tc := range []struct {
		name, csv, id string
		hold          bool
		wantTypes     string
		wantStartMin  int64
		wantStartMax  int64
	}{
		{"without the option B starts on the T4s at once", "A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,4,1,4,d2\n", "B", false, "t4", 10, 11},
		{"with it B waits for the V100s", "A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,4,1,4,d2\n", "B", true, "v100", 290, 340},
		{"a wait that does not pay is not taken", "A,0,30000,4,v100,,1,4,4,4,d1\nC,10,10000,4,,,1,4,1,4,d2\n", "C", true, "t4", 10, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.csv, tc.hold)[tc.id]
			if r.StartTypes != tc.wantTypes || r.Start < tc.wantStartMin || r.Start > tc.wantStartMax {
				t.Fatalf("%s started at %d s on %q; want %d–%d s on %q", tc.id, r.Start, r.StartTypes, tc.wantStartMin, tc.wantStartMax, tc.wantTypes)
			}
		})
	}
	off, on := run("A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,4,1,4,d2\n", false)["B"], run("A,0,300,4,v100,,1,4,4,4,d1\nB,10,10000,4,,,1,4,1,4,d2\n", true)["B"]
	if on.End >= off.End-15000 {
		t.Fatalf("B ends at %d s held for the V100s and %d s on the T4s: the hold should end it about 20,000 s sooner", on.End, off.End)
	}
}
