package daemon

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Resizer changes a running job's allocation and time limit
// (shrink-to-admit).
type Resizer interface {
	// SetTimeLimit sets job id's time limit (from its start) to whole
	// minutes: `scontrol update JobId=ID TimeLimit=MINUTES` (the daemon
	// runs as root or a Slurm operator, who may raise it).
	SetTimeLimit(ctx context.Context, id string, minutes int64) error
	// SetNodes shrinks job id to its first nodes nodes: `scontrol update
	// JobId=ID NumNodes=N` (Slurm releases the last nodes of its node list
	// and kills the tasks of running steps there; the EasyScale runtime
	// takes that as a membership change), with the running job's NumTasks
	// where Slurm 23.02 and later refuse it without (slurmcli.TaskCountRefusal).
	SetNodes(ctx context.Context, id string, nodes int) error
}

// SlurmResizer is the Resizer over scontrol.
type SlurmResizer struct{ Slurm slurmcli.Runner }

var _ Resizer = (*SlurmResizer)(nil)

// SetTimeLimit runs `scontrol update JobId=ID TimeLimit=MINUTES`
// (slurmcli.Runner.UpdateJob: with the job's NumTasks where Slurm 24.11
// refuses it without, after a shrink).
func (s *SlurmResizer) SetTimeLimit(ctx context.Context, id string, minutes int64) error {
	if err := s.Slurm.UpdateJob(ctx, id, "TimeLimit="+strconv.FormatInt(minutes, 10)); err != nil {
		return fmt.Errorf("setting the time limit of job %s to %d min: %w", id, minutes, err)
	}
	return nil
}

// SetNodes runs `scontrol update JobId=ID NumNodes=N` as
// slurmcli.Runner.SetNodes does (a running job submitted with
// --ntasks-per-node keeps its task count on Slurm 23.02 and later, which
// refuse NumNodes alone).
func (s *SlurmResizer) SetNodes(ctx context.Context, id string, nodes int) error {
	if err := s.Slurm.SetNodes(ctx, id, nodes); err != nil {
		return fmt.Errorf("shrinking job %s to %d nodes: %w", id, nodes, err)
	}
	return nil
}

// admit runs shrink-to-admit for this cycle (when admit.enabled): it first
// finishes or undoes shrinks a previous run recorded but did not finish
// (resumeAdmits; records are the store's, read this cycle), then applies at most one admission (planAdmission):
// the queued job and every donor are re-read by id before any donor is
// changed (verifyAdmission, in a dry run too; an "admit-skip" decision when one changed),
// then the donors are shrunk in turn; a donor Slurm refuses after others
// were shrunk is handled by undoAdmission. It returns true when it
// changed an allocation, so that the cycle lends nothing on the state it
// read before.
func (d *Daemon) admit(ctx context.Context, v *View, live map[string]*lent, records []backfillstore.AdmitShrink, r *Report) (bool, error) {
	if !d.cfg.Admit.Enabled {
		return false, nil
	}
	resumed, err := d.resumeAdmits(ctx, v, records)
	if err != nil || resumed {
		d.noteAdmitWhy(nil) // no question asked: a reason seen again later is logged again
		return resumed, err
	}
	in, a, ok, why := d.planAdmission(v, live, records)
	if len(in.Nodes) > 0 && len(in.Queue) > 0 {
		r.AdmitAsked = &in
		if ok {
			r.AdmitDecided = &a.decision
		}
	}
	d.noteAdmitWhy(why)
	if !ok {
		return false, nil
	}
	log := d.log.Named("admit").With("queued_id", a.queued.ID)
	// The re-read only reads, so a dry run makes it too: it then logs the
	// admissions a real run would make, not those a re-read refuses.
	if job, why, err := d.verifyAdmission(ctx, v, a); err != nil || why != "" {
		if err != nil {
			log.Error("re-reading the jobs before shrinking failed; not admitting", "error", err, "dry_run", d.cfg.DryRun)
			return false, nil
		}
		log.Error("not admitting: Slurm's jobs are not those the snapshot read", "job_id", job, "why", why, "dry_run", d.cfg.DryRun)
		return false, d.decide(ctx, "admit-skip", job, "", "", 0, why)
	}
	if d.cfg.DryRun {
		for _, ds := range a.donors {
			detail := admitDetail(ds, a.queued.ID)
			log.Info("would shrink to admit (dry run)", "job_id", ds.job.Job.ID, "detail", detail)
			if err := d.decide(ctx, "admit-shrink", ds.job.Job.ID, "", "", 0, detail+" (dry run)"); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	var applied []donorShrink
	for _, ds := range a.donors {
		ok, err := d.applyShrink(ctx, a.queued.ID, ds, log.With("job_id", ds.job.Job.ID))
		if ok {
			applied = append(applied, ds)
			r.AdmitShrunk = append(r.AdmitShrunk, ds.job.Job.ID)
		}
		if err != nil {
			return len(applied) > 0, err
		}
		if !ok {
			return len(applied) > 0, d.undoAdmission(ctx, a.queued.ID, ds.job.Job.ID, applied, log)
		}
	}
	r.Admitted = append(r.Admitted, a.queued.ID)
	log.Info("shrunk running elastic jobs so that a queued job can start", "donors", r.AdmitShrunk, "on", a.decision.Alloc)
	return true, nil
}

// undoAdmission handles an admission Slurm refused part of: donor failed
// (applyShrink already put its own time limit back and abandoned its
// record) after the donors in applied were shrunk, so the queued job does
// not fit. A node count cannot grow back by scontrol (Slurm only lowers a
// running job's NumNodes), and a shrunk donor keeps its raised time limit,
// which covers its work on fewer nodes (lowering it would end the job
// before its work is done). Each such donor is recorded as an "admit-undo"
// decision; its store record stays done, so its node count before the
// shrink still caps later shrinks, and lending grows it back with extra
// jobs on the nodes it released like any elastic job below its maximum.
func (d *Daemon) undoAdmission(ctx context.Context, queued, failed string, applied []donorShrink, log hclog.Logger) error {
	for _, ds := range applied {
		detail := fmt.Sprintf("for job %s: donor %s was refused, so job %s stays on %d nodes with its time limit %v (a node count cannot grow back by scontrol; extra jobs may grow it)",
			queued, failed, ds.job.Job.ID, ds.ToNodes, ds.NewLimit)
		log.Warn("an admission was only partly applied; a shrunk donor cannot be grown back by scontrol", "job_id", ds.job.Job.ID, "failed", failed)
		if err := d.decide(ctx, "admit-undo", ds.job.Job.ID, "", "", 0, detail); err != nil {
			return err
		}
	}
	return nil
}

// applyShrink records the shrink of donor ds (verifyAdmission re-read it)
// in the store (state intent) and the decision log, raises the time limit,
// then shrinks the node count, and marks the record done. If Slurm refuses
// the shrink the old time limit is put back and the record abandoned; ok
// is then false.
func (d *Daemon) applyShrink(ctx context.Context, queued string, ds donorShrink, log hclog.Logger) (bool, error) {
	e := ds.job
	detail := admitDetail(ds, queued)
	rec := backfillstore.AdmitShrink{Job: e.Job.ID, Queued: queued, User: e.User, UID: e.Job.UID, Partition: e.Job.Partition,
		OrigNodes: ds.OrigNodes, FromNodes: ds.FromNodes, ToNodes: ds.ToNodes, OldLimit: ds.OldLimit,
		NewLimit: ds.NewLimit, Time: d.now()}
	seq, err := d.db.RecordAdmitShrink(ctx, rec)
	if err != nil {
		return false, err
	}
	if err := d.decide(ctx, "admit-shrink", e.Job.ID, "", "", 0, detail); err != nil {
		return false, err
	}
	if ds.NewLimit > ds.OldLimit {
		if err := d.resize.SetTimeLimit(ctx, e.Job.ID, minutes(ds.NewLimit)); err != nil {
			log.Error("raising the time limit failed; not shrinking", "error", err)
			return false, d.db.MarkAdmitShrink(ctx, seq, backfillstore.AdmitAbandoned, err.Error())
		}
	}
	if err := d.resize.SetNodes(ctx, e.Job.ID, ds.ToNodes); err != nil {
		log.Error("shrinking failed; putting the time limit back", "error", err)
		if ds.NewLimit > ds.OldLimit {
			if rerr := d.resize.SetTimeLimit(ctx, e.Job.ID, minutes(ds.OldLimit)); rerr != nil {
				log.Error("putting the time limit back failed", "error", rerr)
			}
		}
		return false, d.db.MarkAdmitShrink(ctx, seq, backfillstore.AdmitAbandoned, err.Error())
	}
	if err := d.db.MarkAdmitShrink(ctx, seq, backfillstore.AdmitDone, ""); err != nil {
		return true, err
	}
	d.metrics.Shrinks.WithLabelValues("admit").Inc()
	log.Info("shrunk to admit", "detail", detail)
	return true, nil
}

func minutes(d time.Duration) int64 { return int64((d + time.Minute - 1) / time.Minute) }

// verifyDonor re-reads elastic job e by id (squeue --jobs=ID, fresh random
// separators) right before it is shrunk and returns why it must not be
// ("" when it may): Slurm's job of that id must still be running with the
// user, partition, node list and time limit the snapshot read, and its
// comment must still parse as an elastic EasyScale request with the same
// node range. err is a failed squeue.
func (d *Daemon) verifyDonor(ctx context.Context, e *ElasticJob) (string, error) {
	j, why, err := d.reReadJob(ctx, e.Job.ID, "shrinking it")
	if why != "" || err != nil {
		return why, err
	}
	if why := firstDifference("the snapshot read",
		fieldCheck{"state", j.State, "RUNNING"}, fieldCheck{"user", j.User, e.Job.User}, fieldCheck{"partition", j.Partition, e.Job.Partition},
		fieldCheck{"node list", j.NodeList, e.Job.NodeList}, fieldCheck{"time limit", j.TimeLimit, e.Job.TimeLimit},
	); why != "" {
		return why, nil
	}
	c, err := elastic.ParseComment(j.Comment)
	if err != nil {
		return fmt.Sprintf("its comment is not an EasyScale request: %v", err), nil
	}
	if !c.Request.Elastic() || c.Request.MinNodes != e.Request.MinNodes || c.Request.MaxNodes != e.Request.MaxNodes {
		return fmt.Sprintf("its request is now %s, the snapshot read %s", c.Request.Range(), e.Request.Range()), nil
	}
	return "", nil
}

// resumeAdmits finishes or undoes the shrinks a previous run recorded as
// intents (it was killed between the record and its last scontrol
// update): a job now on the recorded smaller node count gets the raised
// time limit (set again; setting it twice is harmless) and the record is
// marked done; a job still on its old node count whose limit was already
// raised gets the old limit back, and the record is abandoned, as it is
// for a job that ended or changed otherwise. Each job is re-read by id
// first. It returns true when it changed something in Slurm.
func (d *Daemon) resumeAdmits(ctx context.Context, v *View, records []backfillstore.AdmitShrink) (bool, error) {
	changed := false
	for _, rec := range records {
		if rec.State != backfillstore.AdmitIntent {
			continue
		}
		log := d.log.Named("admit").With("job_id", rec.Job, "queued_id", rec.Queued)
		e := v.Elastic[rec.Job]
		match := ownerOther
		if e != nil {
			match = compareOwner(owner{rec.User, rec.UID}, e.Job)
		}
		if match == ownerUnknown {
			log.Info("finishing a recorded shrink-to-admit waits: squeue printed its job's owner as a uid, not a name", "printed", e.User)
			continue
		}
		if match != ownerSame {
			log.Info("a recorded shrink-to-admit was not finished and its job is gone; abandoned")
			if err := d.db.MarkAdmitShrink(ctx, rec.Seq, backfillstore.AdmitAbandoned, "job no longer running at restart"); err != nil {
				return changed, err
			}
			continue
		}
		if why, err := d.verifyDonor(ctx, e); err != nil || why != "" {
			if err != nil {
				return changed, err
			}
			if err := d.db.MarkAdmitShrink(ctx, rec.Seq, backfillstore.AdmitAbandoned, why); err != nil {
				return changed, err
			}
			continue
		}
		limit, _ := slurmcli.ParseTimeLimit(e.Job.TimeLimit)
		switch len(e.Base) {
		case rec.ToNodes:
			if limit < rec.NewLimit {
				if err := d.resize.SetTimeLimit(ctx, rec.Job, minutes(rec.NewLimit)); err != nil {
					log.Error("raising the time limit of a shrunk job failed; retrying next cycle", "error", err)
					continue
				}
				changed = true
			}
			log.Info("finished a shrink-to-admit recorded before a restart", "nodes", rec.ToNodes, "time_limit", rec.NewLimit)
			if err := d.db.MarkAdmitShrink(ctx, rec.Seq, backfillstore.AdmitDone, "finished after a restart"); err != nil {
				return changed, err
			}
		case rec.FromNodes:
			if limit == rec.NewLimit && rec.NewLimit > rec.OldLimit {
				if err := d.resize.SetTimeLimit(ctx, rec.Job, minutes(rec.OldLimit)); err != nil {
					log.Error("putting back the time limit of a job not shrunk failed; retrying next cycle", "error", err)
					continue
				}
				changed = true
			}
			log.Info("undid a shrink-to-admit recorded before a restart but not applied")
			if err := d.db.MarkAdmitShrink(ctx, rec.Seq, backfillstore.AdmitAbandoned, "not applied before a restart"); err != nil {
				return changed, err
			}
		default:
			if err := d.db.MarkAdmitShrink(ctx, rec.Seq, backfillstore.AdmitAbandoned,
				fmt.Sprintf("job on %d nodes at restart, recorded %d -> %d", len(e.Base), rec.FromNodes, rec.ToNodes)); err != nil {
				return changed, err
			}
		}
	}
	return changed, nil
}

// noteAdmitWhy logs at debug level why queued jobs are not admitted this
// cycle, each reason once while it stays: a reason the previous cycle
// logged is not logged again (a tester saw the same line every 2 s).
func (d *Daemon) noteAdmitWhy(why []string) {
	seen := make(map[string]bool, len(why))
	for _, w := range why {
		if !d.admitWhy[w] {
			d.log.Named("admit").Debug("not admitting", "why", w)
		}
		seen[w] = true
	}
	d.admitWhy = seen
}
