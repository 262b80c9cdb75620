package simulator

import (
	"testing"
)

// TestABackfilledAdmissionKeepsTheReservationsOfTheJobsAheadOfIt: four
// nodes of 4 GPUs run R0 (4 GPUs, ending at 1,000 s), D (elastic, 4 GPUs,
// min 1, ending at 20,000 s), R2 (4 GPUs, ending at 5,000 s) and L (4
// GPUs, ending at 40,000 s: D does not set the makespan). H (8 GPUs) then
// heads the queue, planned on R0's and R2's nodes at 5,000 s; A (12 GPUs)
// queues behind it, planned on the first three nodes at D's end; B (1
// GPU, 500 s) behind A. Shrinking D for B keeps off the head's reserved
// nodes but not A's: D would end later, and A, ahead of B, with it (before
// the rule: B started at 12 s, D ended at 20,512 s and A started then).
// Slurm's
// backfill starts B only where it delays no job ahead of it (and the
// daemon keeps donors off the reservations of every other pending job),
// so B waits for R0's GPUs and A starts when D ends.
func TestABackfilledAdmissionKeepsTheReservationsOfTheJobsAheadOfIt(t *testing.T) {
	jobs := "R0,0,1000,4,,,1,4,4,4,d1\nD,0,20000,4,,,1,4,1,4,d1\nR2,0,5000,4,,,1,4,4,4,d1\nL,0,40000,4,,,1,4,4,4,d1\n" +
		"H,10,1000,8,,,1,8,8,8,d1\nA,11,1000,12,,,1,12,12,12,d1\nB,12,500,1,,,1,1,1,1,d1\n"
	cfg := DaemonDefaults()
	cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"t4", 16}}, 4
	res, err := Run(readJobs(t, jobs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.AdmitShrinks != 0 {
		t.Errorf("%d admissions, want none: D's node is in A's planned start", res.AdmitShrinks)
	}
	if b := startOf(t, res, "B"); b.Start != 1000 {
		t.Errorf("B started at %d s, want 1,000 (R0's end)", b.Start)
	}
	if a, d := startOf(t, res, "A"), startOf(t, res, "D"); a.Start > d.End || d.End > 20000 {
		t.Errorf("A started at %d s, D ended at %d s; want D at 20,000 s and A then", a.Start, d.End)
	}
}

// TestAnAdmissionKeepsTheReservationsOfTheJobsBehindIt, the case a tester
// saw on the lab: D (elastic, 8 GPUs on two nodes of 4, min 4, 2,000 s)
// and L (4 GPUs, 40,000 s) fill three nodes; M (4 GPUs, 50 s) heads the
// queue and Bob (8 GPUs, queued with it) waits behind it, planned on D's two nodes at D's
// end. Shrinking D to one node admits M at once but raises D's limit past
// Bob's planned start: Bob, whom Slurm ranks below M, would wait for D's
// raised limit, not for M. So D lends nothing; M and then Bob start when D
// ends.
func TestAnAdmissionKeepsTheReservationsOfTheJobsBehindIt(t *testing.T) {
	jobs := "D,0,2000,8,,,1,8,4,8,d1\nL,0,40000,4,,,1,4,4,4,d1\nM,10,50,4,,,1,4,4,4,d1\nBob,10,100,8,,,1,8,8,8,d1\n"
	cfg := DaemonDefaults()
	cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"t4", 12}}, 4
	res, err := Run(readJobs(t, jobs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := startOf(t, res, "D")
	if res.AdmitShrinks != 0 || d.End != 2000 {
		t.Errorf("%d admissions, D ended at %d s; want none and 2,000 s: Bob's planned start names D's nodes", res.AdmitShrinks, d.End)
	}
	if b := startOf(t, res, "Bob"); b.Start > d.End+50 {
		t.Errorf("Bob started at %d s, want by %d s (D's end, then M's 50 s)", b.Start, d.End+50)
	}
}

// TestAnAdmissionTakesNoNodeAJobAheadPlansOnUnlessItEndsInTime: V holds
// both v100 nodes until 5,000 s, so H (8 v100 GPUs) heads the queue,
// reserved there. D (elastic, 4 p100 GPUs, min 2) and L (on a t4 node)
// run long, and R1 holds 2 GPUs of the second t4 node until 1,000 s. A (4
// t4 GPUs, 30,000 s: too long for D to lend to) waits, planned on R1's
// node at 1,000 s; B behind it (4 GPUs of any type) could start at once
// on that node's 2 idle GPUs and 2 of D's. Slurm's backfill starts B there
// only if B ends by A's planned start: a 1,500-s B waits (before the rule
// it started at 12 s and A started at 1,512 s, late), a 500-s B starts at
// once. With D on a t4 node instead, A, ranked ahead, would fit on D's
// freed GPUs and the idle ones, and Slurm would start A there, not B: the
// admission is refused whatever B's length (planner.Cluster.StartsFirst).
func TestAnAdmissionTakesNoNodeAJobAheadPlansOnUnlessItEndsInTime(t *testing.T) {
	for _, tc := range []struct {
		dType, b string
		bStart   func(int64) bool
		want     string
	}{
		{"p100", "1500", func(s int64) bool { return s >= 1000 }, "not before it"},
		{"p100", "500", func(s int64) bool { return s < 1000 }, "before it"},
		{"t4", "500", func(s int64) bool { return s >= 1000 }, "not before it: A would take D's freed GPUs"},
	} {
		jobs := "V,0,5000,8,v100,,1,8,8,8,d1\nD,0,20000,4," + tc.dType + ",,1,4,2,4,d1\nR1,0,1000,2,t4,,1,2,2,2,d1\nL,0,40000,4,t4,,1,4,4,4,d1\n" +
			"H,10,1000,8,v100,,1,8,8,8,d1\nA,11,30000,4,t4,,1,4,4,4,d1\nB,12," + tc.b + ",4,,,1,4,4,4,d2\n"
		cfg := DaemonDefaults()
		groups := []GPUGroup{{"v100", 8}, {"p100", 4}, {"t4", 8}}
		if tc.dType == "t4" {
			groups = []GPUGroup{{"v100", 8}, {"t4", 12}}
		}
		cfg.GPUs, cfg.GPUsPerNode = groups, 4
		res, err := Run(readJobs(t, jobs), cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, b := startOf(t, res, "A"), startOf(t, res, "B")
		if !tc.bStart(b.Start) || a.Start > 1000 {
			t.Errorf("D on %s, B of %s s: B started at %d s, A at %d s; want A by 1,000 s (R1's end) and B %s",
				tc.dType, tc.b, b.Start, a.Start, tc.want)
		}
	}
}

// TestADonorOnAReservedNodeLendsWhenItsRaisedLimitEndsInTime: D (elastic,
// 8 GPUs on two nodes, min 4) has 2,000 s left and L holds the third node
// until 10,000 s, so H (12 GPUs) heads the queue, planned on every node at
// 10,000 s. B (4 GPUs, 300 s) behind it fits only on GPUs D lends: on 4
// GPUs D's limit moves to about 4,000 s, still before H's planned start,
// so D lends and B starts at once (before the rule D lent nothing, its
// nodes being reserved, and B waited for D's end). A 9,000-s D would end
// after H's start at half its size, and lends nothing.
func TestADonorOnAReservedNodeLendsWhenItsRaisedLimitEndsInTime(t *testing.T) {
	for _, tc := range []struct {
		d      string
		lends  bool
		bStart func(int64) bool
	}{
		{"2000", true, func(s int64) bool { return s < 100 }},
		{"9000", false, func(s int64) bool { return s >= 9000 }},
	} {
		jobs := "D,0," + tc.d + ",8,,,1,8,4,8,d1\nL,0,10000,4,,,1,4,4,4,d1\nH,10,1000,12,,,1,12,12,12,d1\nB,11,300,4,,,1,4,4,4,d1\n"
		cfg := DaemonDefaults()
		cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"t4", 12}}, 4
		res, err := Run(readJobs(t, jobs), cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, h := startOf(t, res, "B"), startOf(t, res, "H")
		if (res.AdmitShrinks > 0) != tc.lends || !tc.bStart(b.Start) || h.Start > 10000 {
			t.Errorf("D of %s s: %d admissions, B started at %d s, H at %d s; want D to lend %v, H by 10,000 s",
				tc.d, res.AdmitShrinks, b.Start, h.Start, tc.lends)
		}
	}
}

// TestAnAdmissionKeepsTheStartOfAJobBehindItThatSlurmBackfilled, a
// tester's case on the lab: D (elastic, 8 v100 GPUs on two nodes, min 4)
// runs until 1,800 s, the third v100 node is idle and R4 holds the t4 node
// until 300 s. A (8 v100 GPUs, 900 s) and L (8 GPUs of any type, 60 s),
// ranked below it, queue together: A is planned at D's end, L into the
// hole, on the idle v100 node and the t4 node at 300 s. Admitting A at
// once on the idle node and one of D's would push L back behind A (before
// the rule it started at 910 s), though Slurm had planned it with A
// waiting; so A is not admitted there, and L starts at 300 s.
func TestAnAdmissionKeepsTheStartOfAJobBehindItThatSlurmBackfilled(t *testing.T) {
	jobs := "D,0,1800,8,v100,,1,8,4,8,d1\nR4,0,300,4,t4,,1,4,4,4,d1\n" +
		"A,10,900,8,v100,,1,8,8,8,d1\nL,10,60,8,,,1,8,8,8,d2\n"
	cfg := DaemonDefaults()
	cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", 12}, {"t4", 4}}, 4
	cfg.KeepOffPinned = false // L may use the v100 node A waits for, as on the lab
	res, err := Run(readJobs(t, jobs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l := startOf(t, res, "L"); l.Start > 300 {
		t.Errorf("L started at %d s, want by 300 s (its planned start); %d admissions", l.Start, res.AdmitShrinks)
	}
}
