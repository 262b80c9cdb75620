package daemon

import (
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
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
		{Job: "11", User: "erin", UID: "1005", OldLimit: h, NewLimit: 2 * h, State: backfillstore.AdmitDone},
	}
	for _, tc := range []struct {
		name  string
		job   string
		user  string
		uid   string
		limit time.Duration
		want  time.Duration
	}{
		{"two shrinks: 2 h and 3 h added", "7", "alice", "1001", 9 * h, 5 * h},
		{"an intent counts: its limit is raised first", "8", "bob", "1002", 2 * h, h},
		{"never shrunk", "10", "dave", "1004", 5 * h, 0},
		{"a limit lowered by an admin after the raises: at most the limit", "7", "alice", "1001", 3 * h, 3 * h},
		{"a limit lowered between raises: the later raise still counts", "9", "carol", "1003", 8 * h, 8 * h},
		{"a reused job id: another user's records do not count", "7", "mallory", "1666", 9 * h, 0},
		{"a record with a uid: the owner printed as a stand-in counts", "11", "nobody", "1005", 4 * h, h},
		{"a record with a uid: another user of the recorded name does not count", "11", "erin", "1666", 4 * h, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := limitRaised(records, slurmcli.Job{ID: tc.job, User: tc.user, UID: tc.uid}, tc.limit); got != tc.want {
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
		{Job: "7", User: "alice", UID: "1001", OrigNodes: 8, State: backfillstore.AdmitAbandoned},
		{Job: "7", User: "alice", UID: "1001", OrigNodes: 4, State: backfillstore.AdmitDone},
		{Job: "7", User: "alice", UID: "1001", OrigNodes: 4, State: backfillstore.AdmitDone},
	}
	for _, tc := range []struct {
		name, user, uid string
		want            int
	}{
		{"the owner's first record not abandoned", "alice", "1001", 4},
		{"the owner printed as a stand-in: its uid says it is the owner", "nobody", "1001", 4},
		{"a reused job id: another user's job has its own count", "mallory", "1666", 2},
		{"a reused job id of a user printed as a stand-in: its own count", "nobody", "65534", 2},
	} {
		if got := origNodes(records, slurmcli.Job{ID: "7", User: tc.user, UID: tc.uid}, 2); got != tc.want {
			t.Errorf("%s: origNodes(job 7 of %s, now 2) = %d, want %d", tc.name, tc.user, got, tc.want)
		}
	}
}
