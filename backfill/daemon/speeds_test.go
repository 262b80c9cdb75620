package daemon

import (
	"reflect"
	"testing"
	"time"
)

// TestAJobsCommentSpeedsReachThePlanner checks that the optional speeds=
// field of an elastic job's comment becomes the planner's per-job speeds,
// and that a comment without it leaves the site's table in charge.
func TestAJobsCommentSpeedsReachThePlanner(t *testing.T) {
	tests := []struct {
		name    string
		comment string
		want    map[string]float64
	}{
		{"speeds= gives the job's own speeds", "es-req min=1 max=2 lw=4 d1 speeds=t4:0.4,v100:1", map[string]float64{"t4": 0.4, "v100": 1}},
		{"no speeds= leaves them to the [speeds] table", "es-req min=1 max=2 lw=4 d1", nil},
		// A tester's live finding: speeds=v100:100 won 5 of 6 lent V100s
		// from an equal job of another user. The table here (toml below)
		// says v100 = 2, t4 = 1: the declaration comes down by 1/50.
		{"a speeds= above the site's table comes down to it, its ratio kept", "es-req min=1 max=2 lw=4 d1 speeds=v100:100,t4:0.01",
			map[string]float64{"v100": 2, "t4": 0.0002}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "[speeds]\nv100 = 2.0\nt4 = 1.0\n")
			td.fake.running("10", tc.comment, "n1", 1, time.Hour, rendezvous(t, "10"))
			rep := td.cycle(t)
			for _, j := range rep.Snapshot.Running {
				if j.ID == "10" {
					if !reflect.DeepEqual(j.Speeds, tc.want) {
						t.Fatalf("planner speeds %v, want %v", j.Speeds, tc.want)
					}
					return
				}
			}
			t.Fatalf("job 10 not in the planner snapshot %+v", rep.Snapshot.Running)
		})
	}
}
