package planner

import (
	"reflect"
	"testing"
)

// TestSubmitFailureOutcome: which failed sbatch runs count as failed lends
// (issue 20 item 2). Answers about the request count; failures to reach
// slurmctld, or of slurmctld to take any request, never do.
func TestSubmitFailureOutcome(t *testing.T) {
	tests := []struct {
		name string
		f    SubmitFailure
		want LendOutcome
	}{
		{"a partition Slurm does not know is refused every time",
			SubmitFailure{true, "sbatch: error: Batch job submission failed: Invalid partition name specified"}, LendFailed},
		{"so is a node that cannot hold the request",
			SubmitFailure{true, "sbatch: error: Batch job submission failed: Requested node configuration is not available"}, LendFailed},
		{"and an account the user may not use",
			SubmitFailure{true, "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"}, LendFailed},
		{"and a policy limit", SubmitFailure{true, "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy " +
			"(job submit limit, user's size and/or time limits)"}, LendFailed},
		{"and a job_submit plugin's refusal", SubmitFailure{true, "sbatch: error: extra jobs are not allowed here\n" +
			"sbatch: error: Batch job submission failed: Unspecified error"}, LendFailed},
		{"and a request the daemon cannot form for the job's user",
			SubmitFailure{true, "looking up the group of user ghost: user: unknown user ghost"}, LendFailed},
		{"slurmctld down is not the job's fault",
			SubmitFailure{true, "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"}, LendNeutral},
		{"nor is a timeout", SubmitFailure{true, "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"}, LendNeutral},
		{"nor a controller that takes no jobs now", SubmitFailure{true, "sbatch: error: Slurm temporarily unable to accept job, " +
			"sleeping and retrying\nsbatch: error: Batch job submission failed: Resource temporarily unavailable"}, LendNeutral},
		{"nor munge down on the daemon's host", SubmitFailure{true, "sbatch: error: auth_g_create: REQUEST_SUBMIT_BATCH_JOB " +
			"has authentication error: Munge encode failed\nsbatch: error: Batch job submission failed: Protocol authentication error"}, LendNeutral},
		{"nor a backup controller in standby",
			SubmitFailure{true, "sbatch: error: Batch job submission failed: Slurm backup controller in standby mode"}, LendNeutral},
		{"nor an sbatch killed at its timeout", SubmitFailure{false, "signal: killed"}, LendNeutral},
		{"nor one that could not be run", SubmitFailure{false, `exec: "sbatch": executable file not found in $PATH`}, LendNeutral},
		{"nor one that printed no job id", SubmitFailure{false, `sbatch printed "", not a job id`}, LendNeutral},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.Outcome(); got != tc.want {
				t.Errorf("%+v: outcome %v, want %v", tc.f, got, tc.want)
			}
		})
	}
}

// TestPendingLendOutcome: a lend cancelled after pending_timeout counts
// on its node, or against the job too when Slurm holds it for a limit of
// the job's user, account or QOS.
func TestPendingLendOutcome(t *testing.T) {
	tests := []struct {
		reason string
		want   LendOutcome
	}{
		{"Resources", LendNodeFailed},
		{"Priority", LendNodeFailed},
		{"ReqNodeNotAvail, UnavailableNodes:n1", LendNodeFailed},
		{"", LendNodeFailed},
		{"QOSMaxGRESPerUser", LendFailed},
		{"QOSGrpGRES", LendFailed},
		{"AssocGrpGRES", LendFailed},
		{"AssocMaxJobsLimit", LendFailed},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			if got := (PendingLend{Reason: tc.reason}).Outcome(); got != tc.want {
				t.Errorf("pending for %q: outcome %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestANodesFailureBacksOffTheNodeOnly: lends that stay pending on one
// node back that node off, doubling, and never hold or stop the job.
func TestANodesFailureBacksOffTheNodeOnly(t *testing.T) {
	p := RetryPolicy{BaseSeconds: 60, MaxSeconds: 3600, StopAfter: 2}
	var h LendHistory
	for k, at := range []int64{1000, 1100, 1300} {
		h = h.Record("n1", LendNodeFailed, at, "s")
		want := LendHistory{Nodes: []NodeFailures{{Node: "n1", Failures: k + 1, Last: at}}}
		if !reflect.DeepEqual(h, want) {
			t.Fatalf("after %d pending lends on n1: %+v, want %+v", k+1, h, want)
		}
	}
	tests := []struct {
		name string
		now  int64
		want LendVerdict
	}{
		{"the third failure holds n1 for four base waits", 1539, LendVerdict{Nodes: []string{"n1"}}},
		{"and then lets it be tried again", 1540, LendVerdict{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := p.MayLend(h, "s", tc.now)
			if !reflect.DeepEqual(v, tc.want) || v.Held(tc.now) {
				t.Errorf("MayLend = %+v (held %v), want %+v and the job not held", v, v.Held(tc.now), tc.want)
			}
		})
	}
	if ok := h.Record("n1", LendSucceeded, 2000, "s"); !ok.Empty() {
		t.Errorf("a lend that ran on n1 left %+v, want an empty history", ok)
	}
	if got := LendNodeFailed.String(); got != "node-failed" {
		t.Errorf("String() = %q", got)
	}
}
