package simulator

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// TestALongJobWaitsItsTurnWhileShortJobsStream: on 16 GPUs L holds 8 until
// 20,000 s; a stream of short jobs (2 GPUs, 600 s, one every 150 s) needs
// the other 8. J (12 GPUs, 5,000 s at that size, elastic down to 4)
// arrives at 5 s: by waiting it starts at L's end and ends at 25,000 s;
// started small on the 4 idle GPUs it would end at about 15,000 s, but it
// would hold them through the whole stream, and the short jobs would queue
// behind one another. The median time left of the jobs beside it is under
// 600 s, so the peer bound (planner.WithinPeerBound) keeps J waiting
// through the stream (the last short job arrives at 14,950 s; only then
// may it start small, L's 4,400 s left being the median), and the short
// jobs never wait long. With the bound off J starts small at once and the
// short jobs' mean JCT grows several-fold.
func TestALongJobWaitsItsTurnWhileShortJobsStream(t *testing.T) {
	var csv strings.Builder
	csv.WriteString("L,0,20000,8,,,1,8,8,8,d1\nS1,0,600,2,,,1,2,2,2,d1\nS2,0,600,2,,,1,2,2,2,d1\nJ,5,5000,12,,,1,12,4,12,d1\n")
	for i := range 100 {
		fmt.Fprintf(&csv, "S%d,%d,600,2,,,1,2,2,2,d1\n", i+3, 100+150*i)
	}
	jobs := readJobs(t, csv.String())
	run := func() (Result, float64) {
		cfg := DaemonDefaults()
		cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", 16}}, 4
		res, err := Run(jobs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sum, n := 0.0, 0
		for _, r := range res.PerJob {
			if strings.HasPrefix(r.ID, "S") {
				sum += float64(r.End - r.Submit)
				n++
			}
		}
		return res, sum / float64(n)
	}
	res, shortJCT := run()
	if j := startOf(t, res, "J"); j.Start < 14950 || shortJCT > 700 {
		t.Errorf("J started at %d s on %d GPUs, the short jobs' mean JCT %.0f s; want J after the stream (14,950 s) and short jobs near their 600 s",
			j.Start, j.StartGPUs, shortJCT)
	}
	saved := planner.StartSmallPeerFactor
	planner.StartSmallPeerFactor = math.Inf(1)
	t.Cleanup(func() { planner.StartSmallPeerFactor = saved })
	res, unbounded := run()
	t.Logf("short jobs' mean JCT %.0f s with the bound, %.0f s without; J started at %d s without it", shortJCT, unbounded, startOf(t, res, "J").Start)
	if j := startOf(t, res, "J"); j.Start > 600 || unbounded < 2*shortJCT {
		t.Errorf("without the bound J started at %d s and the short jobs' mean JCT is %.0f s (%.0f s with it): the case no longer shows the rule",
			j.Start, unbounded, shortJCT)
	}
}
