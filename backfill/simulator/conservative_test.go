package simulator

import "testing"

// TestBackfillDelaysNoJobItTestedBefore: on two nodes of 4 GPUs, X holds 2
// GPUs of the first until 1,000 s and Y the second until 2,000 s. H (8
// GPUs) heads the queue, reserved at 2,000 s; J2 (4 GPUs, 500 s) behind it
// can start on the first node at 1,000 s and end before H's start; J3 (2
// GPUs, 1,500 s) fits now on that node's 2 idle GPUs and would end before
// H's start too. Slurm's backfill plans J2 before it tests J3, so J3 may
// not take GPUs J2 is planned on (conservative backfill, as
// src/plugins/sched/backfill/backfill.c): J2 starts at 1,000 s. EASY
// backfill, which plans the head alone, started J3 at once and J2 only at
// 1,503 s. The same holds under every policy.
func TestBackfillDelaysNoJobItTestedBefore(t *testing.T) {
	jobs := readJobs(t, "X,0,1000,2,,,1,2,2,2,d1\nY,0,2000,4,,,1,4,4,4,d1\n"+
		"H,1,100,8,,,1,8,8,8,d1\nJ2,2,500,4,,,1,4,4,4,d1\nJ3,3,1500,2,,,1,2,2,2,d1\n")
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"rigid", Config{Policy: Rigid}},
		{"daemon's default", DaemonDefaults()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", 8}}, 4
			res, err := Run(jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if j2, h := startOf(t, res, "J2"), startOf(t, res, "H"); j2.Start != 1000 || h.Start != 2000 {
				t.Errorf("J2 started at %d s and H at %d s, want 1,000 s and 2,000 s", j2.Start, h.Start)
			}
			if j3 := startOf(t, res, "J3"); j3.Start < 1500 {
				t.Errorf("J3 started at %d s, on GPUs J2 is planned on from 1,000 s to 1,500 s", j3.Start)
			}
		})
	}
}

// TestLendsEndBeforeEveryPlannedStart: E (elastic, 4 GPUs up to 6) fills
// the first node and is lent 2 idle GPUs of the second, where X holds the
// other 2 until 1,000 s. H (8 GPUs) heads the queue, planned at E's end;
// J2 (4 GPUs, 500 s) behind it is planned on the second node at 1,000 s.
// The daemon reads every planned start from squeue --start, so its planner
// ends the lend by J2's start and J2 preempts nothing; with the head's
// plan alone the lend ran on and J2's start preempted it.
func TestLendsEndBeforeEveryPlannedStart(t *testing.T) {
	jobs := readJobs(t, "E,0,20000,4,,,1,12,4,6,d1\nX,0,1000,2,,,1,2,2,2,d1\nH,1,100,8,,,1,8,8,8,d1\nJ2,2,500,4,,,1,4,4,4,d1\n")
	cfg := DaemonDefaults()
	cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", 8}}, 4
	res, err := Run(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e := startOf(t, res, "E"); e.PeakGPUs != 6 {
		t.Fatalf("E peaked at %d GPUs, want 6: it was never lent the idle GPUs", e.PeakGPUs)
	}
	if j2 := startOf(t, res, "J2"); j2.Start != 1000 || res.Preemptions != 0 {
		t.Errorf("J2 started at %d s with %d extra jobs preempted, want 1,000 s and none", j2.Start, res.Preemptions)
	}
}
