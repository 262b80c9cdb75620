package simulator

import "testing"

// TestTheAdmitAllowance: A (8 GPUs of a cluster of three nodes of 4, min 1,
// 24 logical workers, 10,000 s; on 6 GPUs a third slower) has the most
// time left, so the horizon is its own end; X (4
// GPUs, rigid, 2,000 s) holds the third node. B (2 GPUs, rigid, 1,000 s)
// arrives at 10 s and would start when X ends. Lending B two GPUs costs A
// little (returned when B ends), but any delay ends A past the horizon:
// without an allowance B waits for X. With admit.allowance 0.5 A may end
// as late as 15,000 s counted as never getting the two GPUs back (about
// 13,400 s), so B starts at once.
//
// Started at 1,000 s instead (every job 1,000 s later), with allowance
// 0.25: A, counted as keeping 6 GPUs, would end past its allowed 1,000 +
// 1.25 × 10,000 s (between 0.25 and 0.3 it passes): B waits for X again.
// The allowance counts from A's start with its run at its start; counted
// from time 0 with its limit's end (11,000 s), B would start at once.
func TestTheAdmitAllowance(t *testing.T) {
	jobs := "A,0,10000,8,,,1,24,1,8,d2\nX,0,2000,4,,,1,4,4,4,d2\nB,10,1000,2,,,1,2,2,2,d2\n"
	later := "A,1000,10000,8,,,1,24,1,8,d2\nX,1000,2000,4,,,1,4,4,4,d2\nB,1010,1000,2,,,1,2,2,2,d2\n"
	for _, tc := range []struct {
		name, jobs string
		allowance  float64
		wantStart  int64
		wantAdmits int
	}{
		{"no allowance: B waits for X", jobs, 0, 2000, 0},
		{"allowance 0.5: A lends B two GPUs at once", jobs, 0.5, 10, 1},
		{"started at 1,000 s, allowance 0.25: B waits for X", later, 0.25, 3000, 0},
		{"started at 1,000 s, allowance 0.5: A lends B two GPUs at once", later, 0.5, 1010, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DaemonDefaults()
			cfg.GPUs, cfg.GPUsPerNode, cfg.AdmitAllowance = []GPUGroup{{"v100", 12}}, 4, tc.allowance
			res, err := Run(readJobs(t, tc.jobs), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if b := startOf(t, res, "B"); b.Start != tc.wantStart || res.AdmitShrinks != tc.wantAdmits {
				t.Errorf("B started at %d s after %d admissions; want %d s and %d", b.Start, res.AdmitShrinks, tc.wantStart, tc.wantAdmits)
			}
			if a := startOf(t, res, "A"); float64(a.End-a.Start) > (1+max(tc.allowance, 0))*10000+100 {
				t.Errorf("A ran %d s, past its allowed (1 + %v) × 10,000 s", a.End-a.Start, tc.allowance)
			}
		})
	}
}

// TestDecisionsReadTheWorkLeftNow: as TestTheAdmitAllowance, but B arrives
// at 6,000 s, when A has 4,000 s left: counted as never getting two GPUs
// back A then ends about 11,400 s, within its allowed 15,000 s, so B starts
// at once. A job's remaining work is booked only when its rate changes, so
// read as booked at A's start (10,000 s left) A would end past 15,000 s and
// B would wait for X: every decision reads each running job's work left
// now, as the daemon reads a job's time left now.
func TestDecisionsReadTheWorkLeftNow(t *testing.T) {
	jobs := "A,0,10000,8,,,1,24,1,8,d2\nX,0,8000,4,,,1,4,4,4,d2\nB,6000,1000,2,,,1,2,2,2,d2\n"
	cfg := DaemonDefaults()
	cfg.GPUs, cfg.GPUsPerNode, cfg.AdmitAllowance = []GPUGroup{{"v100", 12}}, 4, 0.5
	res, err := Run(readJobs(t, jobs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b := startOf(t, res, "B"); b.Start != 6000 || res.AdmitShrinks != 1 {
		t.Errorf("B started at %d s after %d admissions; want 6,000 s and 1", b.Start, res.AdmitShrinks)
	}
}
