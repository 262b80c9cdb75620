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
// says what for, in the error). It returns the job's record, or why there
// is none to act on: Slurm no longer knows the job (unknownJob), its
// record cannot be read, or squeue lists more than one record under the
// id (manyRecords: a job array's tasks, whose last task's raw id is the
// array's, or a heterogeneous job's components; one `scontrol update
// JobId=ID` or requeue would change them all, other tasks the user never
// marked elastic included). Such an id is remembered (d.manyRecords) so
// that later cycles treat the job as an ordinary one (forgetManyRecords).
// err is a failed squeue.
func (d *Daemon) reReadJob(ctx context.Context, id, doing string) (j slurmcli.Job, why string, err error) {
	j, records, why, err := d.reReadRecord(ctx, id, doing)
	if why != "" || err != nil || records == 1 {
		return j, why, err
	}
	if d.manyRecords == nil {
		d.manyRecords = map[string]bool{}
	}
	if _, seen := d.manyRecords[id]; !seen {
		d.manyRecords[id] = false // not yet warned about
	}
	return slurmcli.Job{}, fmt.Sprintf("%s: squeue --jobs=%s lists %d records", manyRecords, id, records), nil
}

// reReadRecord is reReadJob for a job the daemon only reads (the queued
// job of an admission): it returns the record squeue lists under id
// itself and how many records it listed (records), without refusing
// several.
func (d *Daemon) reReadRecord(ctx context.Context, id, doing string) (j slurmcli.Job, records int, why string, err error) {
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
	return jobs[i], len(jobs) + len(skipped), "", nil
}

// manyRecords begins reReadJob's why for an id squeue lists more than one
// record under.
const manyRecords = "a job array's tasks or a heterogeneous job's components, which one update would change together"

// forgetManyRecords drops from v.Elastic the running jobs a re-read found
// to share their id with other records (d.manyRecords), warning once per
// job: the daemon then neither shrinks, moves nor sheds them, and plans
// them as ordinary running jobs. Ids v no longer lists are forgotten.
func (d *Daemon) forgetManyRecords(v *View) {
	for id, warned := range d.manyRecords {
		if _, ok := v.All[id]; !ok {
			delete(d.manyRecords, id)
			continue
		}
		if v.Elastic[id] != nil {
			if !warned {
				d.log.Warn("an elastic job shares its id with other records; it is left as an ordinary job",
					"job_id", id, "why", manyRecords)
				d.manyRecords[id] = true
			}
			delete(v.Elastic, id)
		}
	}
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
