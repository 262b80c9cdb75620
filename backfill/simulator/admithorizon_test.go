package simulator

import (
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// TestTheAdmitHorizon: A (8 GPUs, min 1, 10,000 s) holds the cluster's two
// nodes of 4; B (4 GPUs, rigid, 1,800 s) arrives at 10 s and waits until A
// ends.
//   - Under admit.horizon "returned" (the default) A gives B a node: it
//     loses about 900 s while B runs (the work it misses, then it grows
//     back), less than B's wait, and A then ends within the horizon (B's own
//     end by waiting, 11,800 s).
//   - Counted as never getting the node back ("kept"), A would run its last
//     10,000 s on 4 GPUs, about 8,700 s longer, past that horizon: B waits
//     for A.
//   - "contested" counts it as kept only while another queued job may use
//     A's GPUs: with B alone, as returned.
//
// With C (as B) queued at 5 s, before B arrives at 5 s too, A lends C
// nothing under any horizon: B's planned start names A's nodes, and A's
// raised limit would delay it (othersOff; before, "returned" lent C a node
// at once, which the daemon, keeping every pending job's reservation, never
// did); under "contested" the node A lends C would also go to B when C
// ends, not back to A, the longest job there.
func TestTheAdmitHorizon(t *testing.T) {
	alone := "A,0,10000,8,,,1,8,1,8,d1\nB,10,1800,4,,,1,4,4,4,d1\n"
	contested := "A,0,10000,8,,,1,8,1,8,d1\nC,5,1800,4,,,1,4,4,4,d1\nB,5,1800,4,,,1,4,4,4,d1\n"
	for _, tc := range []struct {
		name, jobs, horizon, job string
		wantStart                int64
		wantAdmits               int
	}{
		{"returned: A lends B a node at once", alone, planner.HorizonReturned, "B", 10, 1},
		{"kept: B waits for A", alone, planner.HorizonKept, "B", 10000, 0},
		{"contested by B alone: A lends B a node at once", alone, planner.HorizonContested, "B", 10, 1},
		{"returned, with B behind C: C waits for A (B's planned start names A's nodes)", contested, planner.HorizonReturned, "C", 10000, 0},
		{"contested, with B behind C: C waits for A", contested, planner.HorizonContested, "C", 10000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DaemonDefaults()
			cfg.GPUs, cfg.GPUsPerNode, cfg.AdmitHorizon = []GPUGroup{{"v100", 8}}, 4, tc.horizon
			res, err := Run(readJobs(t, tc.jobs), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if q := startOf(t, res, tc.job); q.Start != tc.wantStart || res.AdmitShrinks != tc.wantAdmits {
				t.Errorf("%s started at %d s after %d admissions; want %d s and %d", tc.job, q.Start, res.AdmitShrinks, tc.wantStart, tc.wantAdmits)
			}
			if a := startOf(t, res, "A"); tc.jobs == alone && tc.wantAdmits > 0 && a.End > 11800 {
				t.Errorf("A, the donor, ended at %d s: past the queued job's end by waiting (11,800 s), the horizon", a.End)
			}
		})
	}
}
