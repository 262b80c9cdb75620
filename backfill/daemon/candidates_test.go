package daemon

import (
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// The QOS and association Reasons (Slurm's job_state_reason_string) that
// no shrink lifts, and those it may.
func TestLimitNoShrinkLifts(t *testing.T) {
	for _, tc := range []struct {
		reason string
		never  bool
	}{
		{"QOSMaxJobsPerUserLimit", true},
		{"AssocMaxJobsLimit", true},
		{"AssocGrpSubmitJobsLimit", true},
		{"QOSMaxSubmitJobPerUserLimit", true},
		{"QOSMaxGRESPerJob", true},
		{"QOSMaxGRESPerNode", true},
		{"QOSMaxWallDurationPerJobLimit", true},
		{"AssocMaxWallDurationPerJobLimit", true},
		{"QOSGrpWallLimit", true},
		{"QOSGrpCPUMinutesLimit", true},
		{"QOSMinGRES", true},
		{"QOSMaxGRESPerUser", false},
		{"QOSGrpGRES", false},
		{"AssocGrpNodeLimit", false},
		{"AssocGrpGRESRunMinutes", false},
		{"QOSJobLimit", false},
		{"QOSResourceLimit", false},
		{"Resources", false},
		{"Priority", false},
		{"QOS", false},
		{"", false},
	} {
		if got := limitNoShrinkLifts(tc.reason); got != tc.never {
			t.Errorf("limitNoShrinkLifts(%q) = %v, want %v", tc.reason, got, tc.never)
		}
	}
	// a job queued in several partitions shows one partition's Reason
	if startsNever(slurmcli.Job{Reason: "QOSMaxJobsPerUserLimit", Partition: "normal,other"}) {
		t.Errorf("a job in two partitions held by one's limit is taken to start nowhere")
	}
	if !startsNever(slurmcli.Job{Reason: "QOSMaxJobsPerUserLimit", Partition: "normal"}) {
		t.Errorf("a job in one partition held by its user's job count is taken to start")
	}
}
