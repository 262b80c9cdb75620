package planner

import (
	"slices"
	"testing"
)

func TestStartSmall(t *testing.T) {
	// L = R = 2: on 2 reference GPUs the step is 1 + 0.1 = 1.1 (throughput
	// 2), on 1 GPU 2 (throughput 1.1), so 100 s of work takes 100 s at the
	// request and 100·2/1.1 = 181.8 s on one GPU.
	m := DefaultModel(2, 2)
	two, one := []SpeedCount{{Speed: 1, N: 2}}, []SpeedCount{{Speed: 1, N: 1}}
	tests := []struct {
		name     string
		rule     StartSmallRule
		work     float64
		reserved int64
		horizon  float64
		peers    float64 // PeerMedian
		want     bool
		wantEnd  int64
	}{
		{"off never starts small", StartSmallOff, 100, 1000, 0, 0, false, 0},
		{"before-reservation: ends small (at 192 s) before the reservation at 1000 s", StartSmallBeforeReservation, 100, 1000, 0, 0, true, 192},
		{"before-reservation: would hold GPUs past its reservation", StartSmallBeforeReservation, 100, 150, 0, 0, false, 192},
		{"ends-earlier: ends at 192 s, waiting ends at 250 s", StartSmallEndsEarlier, 100, 150, 0, 0, true, 192},
		{"ends-earlier: 1000 s of work ends at 1829 s small, at 1800 s by waiting", StartSmallEndsEarlier, 1000, 800, 0, 0, false, 1829},
		{"no reservation in the future: nothing to gain", StartSmallEndsEarlier, 100, 10, 0, 0, false, 0},
		{"ends-earlier: within the longest running job's 200 s left", StartSmallEndsEarlier, 100, 150, 200, 0, true, 192},
		{"ends-earlier: not past the longest running job's 150 s left (it would end last)", StartSmallEndsEarlier, 100, 150, 150, 0, false, 192},
		{"ends-earlier: the horizon never bounds below the run at its request", StartSmallEndsEarlier, 100, 150, 50, 0, false, 192},
		{"ends-earlier: its 182 s small within twice the others' median time left, 91 s", StartSmallEndsEarlier, 100, 150, 0, 91, true, 192},
		{"ends-earlier: not over twice the others' median time left, 90 s", StartSmallEndsEarlier, 100, 150, 0, 90, false, 192},
		{"before-reservation is never bounded by the others' time left", StartSmallBeforeReservation, 100, 1000, 0, 90, true, 192},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			end, ok := StartSmall(StartSmallRequest{Rule: tc.rule, Model: m, Work: tc.work, Now: 10, ReservedStart: tc.reserved,
				AtRequest: two, Small: one, Horizon: tc.horizon, PeerMedian: tc.peers})
			if ok != tc.want || (ok && end != tc.wantEnd) {
				t.Errorf("StartSmall = %d, %v; want %d, %v", end, ok, tc.wantEnd, tc.want)
			}
		})
	}
}

func TestPeerMedianAndBound(t *testing.T) {
	for _, tc := range []struct {
		left []float64
		want float64
	}{{nil, 0}, {[]float64{30}, 30}, {[]float64{500, 10, 40}, 40}, {[]float64{10, 20, 30, 40}, 30}} {
		if got := PeerMedian(slices.Clone(tc.left)); got != tc.want {
			t.Errorf("PeerMedian(%v) = %v, want %v", tc.left, got, tc.want)
		}
	}
	if !WithinPeerBound(1e9, 0) || !WithinPeerBound(200, 100) || WithinPeerBound(200.5, 100) {
		t.Errorf("WithinPeerBound: no median bounds nothing, and a run of twice the median is the most allowed")
	}
}

func TestParseStartSmallRule(t *testing.T) {
	for _, r := range []StartSmallRule{StartSmallOff, StartSmallBeforeReservation, StartSmallEndsEarlier} {
		if got, err := ParseStartSmallRule(r.String()); err != nil || got != r {
			t.Errorf("ParseStartSmallRule(%q) = %v, %v", r.String(), got, err)
		}
	}
	if _, err := ParseStartSmallRule("always"); err == nil {
		t.Error("ParseStartSmallRule accepted an unknown rule")
	}
}

func TestPeersMedianForLeavesOutTheDecidingUsersPendingJobs(t *testing.T) {
	jobs := []PeerJob{
		{User: "bob", Left: 100}, {User: "carol", Left: 300}, {User: "alice", Left: 500}, // running
		{User: "dave", Left: 200, Pending: true},
		{User: "alice", Left: 36000, Pending: true}, {User: "alice", Left: 36000, Pending: true}, {User: "alice", Left: 36000, Pending: true},
	}
	p := NewPeers(slices.Clone(jobs))
	tests := []struct {
		name, user string
		want       float64
	}{
		// 100 200 300 500 36000 36000 36000: the upper median of 7 is the 4th
		{"a user not among them: every job counts", "erin", 500},
		{"alice's long pending jobs do not loosen her own bound (100 200 300 500); her running job counts", "alice", 300},
		{"dave's own pending job does not count in his median (100 300 500 36000 ×3)", "dave", 36000},
		{"an unknown owner leaves nothing out", "", 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.MedianFor(tc.user); got != tc.want {
				t.Errorf("MedianFor(%q) = %v, want %v", tc.user, got, tc.want)
			}
			if got := p.MedianFor(tc.user); got != tc.want {
				t.Errorf("MedianFor(%q) asked again = %v, want %v", tc.user, got, tc.want)
			}
		})
	}
	// the same as PeerMedian when nothing is left out
	left := []float64{}
	for _, j := range jobs {
		left = append(left, j.Left)
	}
	if got, want := NewPeers(slices.Clone(jobs)).MedianFor(""), PeerMedian(left); got != want {
		t.Errorf("MedianFor(\"\") = %v, PeerMedian = %v", got, want)
	}
	if got := NewPeers([]PeerJob{{User: "alice", Left: 600, Pending: true}}).MedianFor("alice"); got != 0 {
		t.Errorf("only the deciding user's pending job: MedianFor = %v, want 0 (no bound)", got)
	}
	var none *Peers
	if got := none.MedianFor("alice"); got != 0 {
		t.Errorf("nil Peers: MedianFor = %v, want 0", got)
	}
}
