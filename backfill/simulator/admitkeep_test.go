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
