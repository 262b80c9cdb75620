package simulator

import "testing"

// TestTheAdmitHorizonCountsTheDonorsNodesAsReturned: A (8 GPUs, min 1,
// 10,000 s) holds the cluster's two nodes of 4; B (4 GPUs, rigid, 1,800 s)
// arrives at 10 s and waits until A ends. Under admit.horizon "returned"
// (the default) A gives B a node: it loses about 900 s while B runs (the
// work it misses, then it grows back), less than B's wait, and A then ends
// within the horizon (B's own end by waiting, 11,800 s). Counted as never
// getting the node back ("kept"), A would run its last 10,000 s on 4 GPUs,
// about 8,700 s longer, past that horizon: B waits for A.
func TestTheAdmitHorizonCountsTheDonorsNodesAsReturned(t *testing.T) {
	jobs := readJobs(t, "A,0,10000,8,,,1,8,1,8,d1\nB,10,1800,4,,,1,4,4,4,d1\n")
	for _, tc := range []struct {
		name       string
		kept       bool
		wantStart  int64
		wantAdmits int
	}{{"returned: A lends B a node at once", false, 10, 1}, {"kept: B waits for A", true, 10000, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DaemonDefaults()
			cfg.GPUs, cfg.GPUsPerNode, cfg.AdmitHorizonKept = []GPUGroup{{"v100", 8}}, 4, tc.kept
			res, err := Run(jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if b := startOf(t, res, "B"); b.Start != tc.wantStart || res.AdmitShrinks != tc.wantAdmits {
				t.Errorf("B started at %d s after %d admissions; want %d s and %d", b.Start, res.AdmitShrinks, tc.wantStart, tc.wantAdmits)
			}
			if a := startOf(t, res, "A"); tc.wantAdmits > 0 && a.End > 11800 {
				t.Errorf("A, the donor, ended at %d s: past B's end by waiting (11,800 s), the horizon", a.End)
			}
		})
	}
}
