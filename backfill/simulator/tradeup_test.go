package simulator

import "testing"

// TestTradeUpMovesAJobsExtraJobsOffTheT4sOnceV100sAreIdle: on two V100
// nodes and one T4 node of 4 GPUs each (a T4 at 0.6 of a V100, where 8
// logical workers run faster on 4 V100s and 4 T4s than on the V100s
// alone), A (4 V100s, pinned) runs for
// 600 s; B (d2, 8 logical workers, 4 GPUs asked, up to 8, 20,000 s of
// work at 4 GPUs) starts on the other V100 node and grows onto the T4s by
// extra jobs. When A ends, Config.TradeUp ends B's T4 extra jobs and
// lends it A's V100s in the same instant (planner: tradeup.go), and B
// ends far sooner than when it keeps the T4s to its end.
func TestTradeUpMovesAJobsExtraJobsOffTheT4sOnceV100sAreIdle(t *testing.T) {
	const csv = "A,0,600,4,v100,,1,4,4,4,d1\nB,10,20000,4,,,1,8,1,8,d2\n"
	run := func(trade bool) JobRecord {
		cfg := twoTypes(8, 4, 4, 0.6)
		cfg.TradeUp = trade
		recs, _ := runTable(t, moveTableHead+csv, cfg)
		return recs["B"]
	}
	off, on := run(false), run(true)
	if off.PeakGPUs != 8 || off.StartTypes != "v100" {
		t.Fatalf("without trading up B started on %q and held at most %d GPUs; want a start on V100s and growth to 8", off.StartTypes, off.PeakGPUs)
	}
	if on.End >= off.End-1000 {
		t.Fatalf("B ends at %d s trading up, %d s without; want at least 1,000 s sooner", on.End, off.End)
	}
	t.Logf("B ends at %d s trading up (%d rescales), %d s without (%d)", on.End, on.Rescales, off.End, off.Rescales)
}
