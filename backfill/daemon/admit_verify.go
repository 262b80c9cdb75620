package daemon

import (
	"context"
	"fmt"
	"strconv"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// verifyAdmission re-reads every job admission a names right before the
// first of them is changed: the queued job (verifyAdmitQueued), then each
// donor (verifyDonor). It returns the first job that must not be acted on
// and why ("" when all may), so that no donor is shrunk for a queued job
// that no longer waits as read, nor one donor shrunk when another cannot
// be. err is a failed squeue.
func (d *Daemon) verifyAdmission(ctx context.Context, v *View, a admission) (job, why string, err error) {
	if why, err := d.verifyAdmitQueued(ctx, v, a.queued); err != nil || why != "" {
		return a.queued.ID, why, err
	}
	for _, ds := range a.donors {
		why, err := d.verifyDonor(ctx, ds.job)
		if err != nil || why != "" {
			return ds.job.Job.ID, fmt.Sprintf("donor for job %s: %s", a.queued.ID, why), err
		}
	}
	return "", "", nil
}

// queuedWhy names the queued job in a reason not to shrink for it.
func queuedWhy(why string) string {
	if why == "" {
		return ""
	}
	return "the queued job: " + why
}

// verifyAdmitQueued re-reads pending job q by id (squeue --jobs=ID, then
// the pending jobs' placements, slurmcli.Runner.PendingPlacements) and
// returns why no job may be shrunk for it ("" when one may): it must
// still be pending waiting for resources or its turn (Reason "Resources"
// or "Priority", not held, started or ended) with the user, partition, node count, time limit, GPU
// request and --nodelist the snapshot read, and the --exclude,
// --constraint, --reservation and --contiguous of the snapshot's
// placements (v.Placements). err is a
// failed squeue.
func (d *Daemon) verifyAdmitQueued(ctx context.Context, v *View, q slurmcli.Job) (string, error) {
	now, _, why, err := d.reReadRecord(ctx, q.ID, "shrinking for it")
	if why != "" || err != nil {
		return queuedWhy(why), err
	}
	if why := firstDifference("the snapshot read",
		fieldCheck{"state", now.State, "PENDING"}, fieldCheck{"reason", waitingReason(now.Reason), "Resources or Priority"},
		fieldCheck{"user", now.User, q.User},
		fieldCheck{"partition", now.Partition, q.Partition}, fieldCheck{"node count", strconv.Itoa(now.Nodes), strconv.Itoa(q.Nodes)},
		fieldCheck{"time limit", now.TimeLimit, q.TimeLimit}, fieldCheck{"GPUs per node", now.TRESPerNode, q.TRESPerNode},
		fieldCheck{"GPUs per job", now.TRESPerJob, q.TRESPerJob}, fieldCheck{"--nodelist", now.ReqNodes, q.ReqNodes},
	); why != "" {
		return queuedWhy(why), nil
	}
	ps, err := d.snap.Slurm.PendingPlacements(ctx)
	if err != nil {
		return "", fmt.Errorf("re-reading queued job %s's --exclude and --constraint before shrinking for it: %w", q.ID, err)
	}
	got, ok := ps[q.ID]
	want, read := v.Placements[q.ID]
	switch {
	case !ok || !read:
		return "the queued job's --exclude and --constraint cannot be read", nil
	case got.ExcNodes != want.ExcNodes || got.Features != want.Features:
		return fmt.Sprintf("the queued job's --exclude/--constraint is %q/%q, the snapshot read %q/%q",
			got.ExcNodes, got.Features, want.ExcNodes, want.Features), nil
	case got.Reservation != want.Reservation || got.Contiguous != want.Contiguous:
		return fmt.Sprintf("the queued job's --reservation/--contiguous is %q/%v, the snapshot read %q/%v",
			got.Reservation, got.Contiguous, want.Reservation, want.Contiguous), nil
	}
	return "", nil
}

// waitingReason is "Resources or Priority" for a pending job's Reason that
// shrink-to-admit acts for (Resources, Priority: admitCandidates), else
// the reason itself, for firstDifference.
func waitingReason(reason string) string {
	if reason == "Resources" || reason == "Priority" {
		return "Resources or Priority"
	}
	return reason
}
