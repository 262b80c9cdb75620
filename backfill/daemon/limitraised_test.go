package daemon

import (
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// TestLimitRaisedIsWhatShrinkToAdmitAdded: what shrink-to-admit added to a
// job's time limit, from the store's records, which the horizon leaves out
// (planner.NodeAdmitDonor.LimitRaised): the raises summed, never more than
// the limit, only the job's owner's records.
func TestLimitRaisedIsWhatShrinkToAdmitAdded(t *testing.T) {
	rec := func(job, user string, old, new time.Duration, st backfillstore.AdmitState) backfillstore.AdmitShrink {
		return backfillstore.AdmitShrink{Job: job, User: user, OldLimit: old, NewLimit: new, State: st}
	}
	h := time.Hour
	records := []backfillstore.AdmitShrink{
		rec("7", "alice", 2*h, 3*h, backfillstore.AdmitAbandoned), // never applied
		rec("7", "alice", 4*h, 6*h, backfillstore.AdmitDone),
		rec("7", "alice", 6*h, 9*h, backfillstore.AdmitDone),
		rec("8", "bob", 1*h, 2*h, backfillstore.AdmitIntent), // its limit may be raised already
		// an admin lowered job 9's limit from 15 h to 5 h between its shrinks
		rec("9", "carol", 10*h, 15*h, backfillstore.AdmitDone),
		rec("9", "carol", 5*h, 8*h, backfillstore.AdmitDone),
	}
	for _, tc := range []struct {
		name  string
		job   string
		user  string
		limit time.Duration
		want  time.Duration
	}{
		{"two shrinks: 2 h and 3 h added", "7", "alice", 9 * h, 5 * h},
		{"an intent counts: its limit is raised first", "8", "bob", 2 * h, h},
		{"never shrunk", "10", "dave", 5 * h, 0},
		{"a limit lowered by an admin after the raises: at most the limit", "7", "alice", 3 * h, 3 * h},
		{"a limit lowered between raises: the later raise still counts", "9", "carol", 8 * h, 8 * h},
		{"a reused job id: another user's records do not count", "7", "mallory", 9 * h, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := limitRaised(records, tc.job, tc.user, tc.limit); got != tc.want {
				t.Errorf("limitRaised(job %s of %s, limit %v) = %v, want %v", tc.job, tc.user, tc.limit, got, tc.want)
			}
		})
	}
}

// TestOrigNodesReadsOnlyTheOwnersRecords: the node count a job started
// with (admit.max_loss's base) comes from its first shrink's record, and
// a record of another user under the same id (ids wrap) does not count.
func TestOrigNodesReadsOnlyTheOwnersRecords(t *testing.T) {
	records := []backfillstore.AdmitShrink{
		{Job: "7", User: "alice", OrigNodes: 8, State: backfillstore.AdmitAbandoned},
		{Job: "7", User: "alice", OrigNodes: 4, State: backfillstore.AdmitDone},
		{Job: "7", User: "alice", OrigNodes: 4, State: backfillstore.AdmitDone},
	}
	for _, tc := range []struct {
		name, user string
		want       int
	}{
		{"the owner's first record not abandoned", "alice", 4},
		{"a reused job id: another user's job has its own count", "mallory", 2},
	} {
		if got := origNodes(records, "7", tc.user, 2); got != tc.want {
			t.Errorf("%s: origNodes(job 7 of %s, now 2) = %d, want %d", tc.name, tc.user, got, tc.want)
		}
	}
}
