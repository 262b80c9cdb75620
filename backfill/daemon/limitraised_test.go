package daemon

import (
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// TestLimitRaisedIsTheRaiseSinceTheFirstShrink: what shrink-to-admit added
// to a job's time limit, from the store's records, which the horizon
// leaves out (planner.NodeAdmitDonor.LimitRaised).
func TestLimitRaisedIsTheRaiseSinceTheFirstShrink(t *testing.T) {
	rec := func(job string, old, new time.Duration, st backfillstore.AdmitState) backfillstore.AdmitShrink {
		return backfillstore.AdmitShrink{Job: job, OldLimit: old, NewLimit: new, State: st}
	}
	h := time.Hour
	records := []backfillstore.AdmitShrink{
		rec("7", 2*h, 3*h, backfillstore.AdmitAbandoned), // never applied
		rec("7", 4*h, 6*h, backfillstore.AdmitDone),      // the first applied: 4 h before
		rec("7", 6*h, 9*h, backfillstore.AdmitDone),
		rec("8", 1*h, 2*h, backfillstore.AdmitIntent), // its limit may be raised already
	}
	for _, tc := range []struct {
		name  string
		job   string
		limit time.Duration
		want  time.Duration
	}{
		{"two shrinks: 9 h now, 4 h before the first", "7", 9 * h, 5 * h},
		{"an intent counts: its limit is raised first", "8", 2 * h, h},
		{"never shrunk", "9", 5 * h, 0},
		{"a limit lowered since (an admin's): no raise", "7", 3 * h, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := limitRaised(records, tc.job, tc.limit); got != tc.want {
				t.Errorf("limitRaised(job %s, limit %v) = %v, want %v", tc.job, tc.limit, got, tc.want)
			}
		})
	}
}
