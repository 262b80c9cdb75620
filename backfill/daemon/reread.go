package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// reReadJob re-reads job id by id right before the daemon changes it
// (`squeue --jobs=ID --states=all`; doing says what for, in the error).
// It returns the job's record and how many records squeue listed under
// the id (more than one for a job array's tasks or a heterogeneous job's
// components), or why there is none to act on: Slurm no longer knows the
// job, or its record cannot be read. err is a failed squeue.
func (d *Daemon) reReadJob(ctx context.Context, id, doing string) (j slurmcli.Job, listed int, why string, err error) {
	jobs, skipped, err := d.snap.Slurm.ListJobs(ctx, "--jobs="+id, "--states=all")
	if noSuchJob(err) {
		return slurmcli.Job{}, 0, "Slurm no longer knows the job", nil
	}
	if err != nil {
		return slurmcli.Job{}, 0, "", fmt.Errorf("re-reading job %s before %s: %w", id, doing, err)
	}
	if slices.ContainsFunc(skipped, func(pe *slurmcli.ParseError) bool { return pe.ID == id }) {
		return slurmcli.Job{}, 0, "its squeue record cannot be read", nil
	}
	i := slices.IndexFunc(jobs, func(j slurmcli.Job) bool { return j.ID == id })
	if i < 0 {
		return slurmcli.Job{}, 0, "Slurm no longer knows the job", nil
	}
	return jobs[i], len(jobs), "", nil
}
