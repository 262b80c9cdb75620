package simulator

import "testing"

// TestAJobThatFitsOnIdleGPUsPreemptsNoLend: on two V100 nodes and one T4
// node of 4 GPUs, A (pinned to the V100s, 4 to 8 GPUs) starts on one V100
// node and is lent the other, as nothing is queued. B (4 GPUs of any type)
// arrives at 100 s. Slurm starts it on the idle T4 node rather than
// preempt A's extra job on the faster V100 node
// (TestANormalJobThatFitsOnIdleNodesPreemptsNothing in internal/slurmlab
// shows it on the lab); only when the T4s are busy too (C) does B take the
// lent V100s.
func TestAJobThatFitsOnIdleGPUsPreemptsNoLend(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n"
	const a, b = "A,0,5000,4,v100,,1,8,4,8,d1\n", "B,100,1000,4,,,1,4,4,4,d2\n"
	for _, tc := range []struct {
		name, csv, bOn string
		preempted      int
	}{
		{"idle T4s hold B", a + b, "t4", 0},
		{"no idle GPU holds B", a + "C,0,5000,4,t4,,1,4,4,4,d1\n" + b, "v100", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, res := runTable(t, head+tc.csv, twoTypes(8, 4, 4, 1/3.1))
			if recs["A"].PeakGPUs != 8 {
				t.Fatalf("A peaked at %d GPUs, want 8: it was never lent the second V100 node", recs["A"].PeakGPUs)
			}
			if b := recs["B"]; b.StartTypes != tc.bOn || b.Start != 100 || res.Preemptions != tc.preempted {
				t.Fatalf("B started at %d s on %q with %d extra jobs preempted; want a start at 100 s on %q, %d preempted",
					b.Start, b.StartTypes, res.Preemptions, tc.bOn, tc.preempted)
			}
		})
	}
}
