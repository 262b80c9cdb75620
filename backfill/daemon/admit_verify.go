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

// verifyAdmitQueued re-reads pending job q by id (squeue --jobs=ID, then
// the pending jobs' placements, slurmcli.Runner.PendingPlacements) and
// returns why no job may be shrunk for it ("" when one may): it must
// still be pending waiting for resources (Reason "Resources", not held,
// started or ended) with the user, partition, node count, time limit, GPU
// request and --nodelist the snapshot read, and the --exclude and
// --constraint of the snapshot's placements (v.Placements). err is a
// failed squeue.
func (d *Daemon) verifyAdmitQueued(ctx context.Context, v *View, q slurmcli.Job) (string, error) {
	jobs, skipped, err := d.snap.Slurm.ListJobs(ctx, "--jobs="+q.ID, "--states=all")
	if noSuchJob(err) {
		return "Slurm no longer knows the queued job", nil
	}
	if err != nil {
		return "", fmt.Errorf("re-reading queued job %s before shrinking for it: %w", q.ID, err)
	}
	for _, pe := range skipped {
		if pe.ID == q.ID {
			return fmt.Sprintf("the queued job's squeue record cannot be read: %v", pe), nil
		}
	}
	var now *slurmcli.Job
	for i := range jobs {
		if jobs[i].ID == q.ID {
			now = &jobs[i]
		}
	}
	if now == nil {
		return "Slurm no longer knows the queued job", nil
	}
	for _, f := range []struct{ what, got, want string }{
		{"state", now.State, "PENDING"}, {"reason", now.Reason, "Resources"}, {"user", now.User, q.User},
		{"partition", now.Partition, q.Partition}, {"node count", strconv.Itoa(now.Nodes), strconv.Itoa(q.Nodes)},
		{"time limit", now.TimeLimit, q.TimeLimit}, {"GPUs per node", now.TRESPerNode, q.TRESPerNode},
		{"GPUs per job", now.TRESPerJob, q.TRESPerJob}, {"--nodelist", now.ReqNodes, q.ReqNodes},
	} {
		if f.got != f.want {
			return fmt.Sprintf("the queued job's %s is %q, the snapshot read %q", f.what, f.got, f.want), nil
		}
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
	case got != want:
		return fmt.Sprintf("the queued job's --exclude/--constraint is %q/%q, the snapshot read %q/%q",
			got.ExcNodes, got.Features, want.ExcNodes, want.Features), nil
	}
	return "", nil
}
