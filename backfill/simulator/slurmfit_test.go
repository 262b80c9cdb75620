package simulator

import "testing"

// TestAJobThatFitsOnIdleGPUsPreemptsNoLend: on V100 nodes and one T4 node
// of 4 GPUs, A (pinned to the V100s, 4 GPUs up to all of them) starts on
// one V100 node and is lent the others, as nothing is queued. B (any
// type) arrives at 100 s. Slurm starts it on the idle T4 node rather than
// preempt A's extra job on a faster V100 node
// (TestANormalJobThatFitsOnIdleNodesPreemptsNothing in internal/slurmlab
// shows it on the lab); only when the T4s are busy too (C) does B take
// lent V100s; and a B of 8 GPUs uses the idle T4s and preempts one extra
// job, not two (what the lab showed a tester for --gpus=8).
func TestAJobThatFitsOnIdleGPUsPreemptsNoLend(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n"
	const a8, a12 = "A,0,5000,4,v100,,1,8,4,8,d1\n", "A,0,5000,4,v100,,1,12,4,12,d1\n"
	const b4, b8 = "B,100,1000,4,,,1,4,4,4,d2\n", "B,100,1000,8,,,1,8,8,8,d2\n"
	for _, tc := range []struct {
		name, csv, bOn string
		v100, aPeak    int
		preempted      int
	}{
		{"idle T4s hold B", a8 + b4, "t4", 8, 8, 0},
		{"no idle GPU holds B", a8 + "C,0,5000,4,t4,,1,4,4,4,d1\n" + b4, "v100", 8, 8, 1},
		{"B needs one lend and the idle T4s", a12 + b8, "t4,v100", 12, 12, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, res := runTable(t, head+tc.csv, twoTypes(tc.v100, 4, 4, 1/3.1))
			if recs["A"].PeakGPUs != tc.aPeak {
				t.Fatalf("A peaked at %d GPUs, want %d: it was not lent every other V100 node", recs["A"].PeakGPUs, tc.aPeak)
			}
			if b := recs["B"]; b.StartTypes != tc.bOn || b.Start != 100 || res.Preemptions != tc.preempted {
				t.Fatalf("B started at %d s on %q with %d extra jobs preempted; want a start at 100 s on %q, %d preempted",
					b.Start, b.StartTypes, res.Preemptions, tc.bOn, tc.preempted)
			}
		})
	}
}
