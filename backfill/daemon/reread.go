package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// unknownJob is reReadJob's why for a job Slurm no longer knows.
const unknownJob = "Slurm no longer knows the job"

// reReadJob re-reads job id by id right before the daemon changes it
// (`squeue --jobs=ID --states=all`, with fresh random separators; doing
// says what for, in the error). It returns the job's record and how many
// records squeue listed under the id (more than one for a job array's
// tasks or a heterogeneous job's components), or why there is none to act
// on: Slurm no longer knows the job (unknownJob), or its record cannot be
// read. err is a failed squeue.
func (d *Daemon) reReadJob(ctx context.Context, id, doing string) (j slurmcli.Job, listed int, why string, err error) {
	jobs, skipped, err := d.snap.Slurm.ListJobs(ctx, "--jobs="+id, "--states=all")
	if noSuchJob(err) {
		return slurmcli.Job{}, 0, unknownJob, nil
	}
	if err != nil {
		return slurmcli.Job{}, 0, "", fmt.Errorf("re-reading job %s before %s: %w", id, doing, err)
	}
	if i := slices.IndexFunc(skipped, func(pe *slurmcli.ParseError) bool { return pe.ID == id }); i >= 0 {
		return slurmcli.Job{}, 0, fmt.Sprintf("its squeue record cannot be read: %v", skipped[i]), nil
	}
	i := slices.IndexFunc(jobs, func(j slurmcli.Job) bool { return j.ID == id })
	if i < 0 {
		return slurmcli.Job{}, 0, unknownJob, nil
	}
	return jobs[i], len(jobs), "", nil
}

// fieldCheck is one field of a re-read job: what it is, the value squeue
// prints now and the value the daemon acts on.
type fieldCheck struct{ what, got, want string }

// firstDifference returns "its WHAT is "GOT", SOURCE "WANT"" for the first
// check whose values differ, "" when none does; source says where want
// came from ("the snapshot read", "recorded", "want").
func firstDifference(source string, checks ...fieldCheck) string {
	for _, f := range checks {
		if f.got != f.want {
			return fmt.Sprintf("its %s is %q, %s %q", f.what, f.got, source, f.want)
		}
	}
	return ""
}
