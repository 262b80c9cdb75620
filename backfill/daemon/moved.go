package daemon

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// moveWaitBound is how long a moved job may wait for the faster nodes
// before its owner's excluded nodes are put back and it may start
// anywhere again: the nodes were idle when it was requeued, but a job
// submitted meanwhile may have taken them.
const moveWaitBound = 10 * time.Minute

// excludeMoved sets the excluded nodes of requeued job rec.Job, once it
// waits, to its owner's (rec.Owner, recorded before the requeue) plus
// rec.From, and records them (state excluded). A job not pending yet is
// left for the next cycle (followMoved); a refused update is logged and
// tried again there. Only a database error is returned.
func (d *Daemon) excludeMoved(ctx context.Context, rec backfillstore.Moved, log hclog.Logger) error {
	p, pending, err := d.snap.Slurm.PendingPlacement(ctx, rec.Job)
	if err != nil || !pending {
		if err != nil {
			log.Warn("reading the requeued job's excluded nodes failed; trying again next cycle", "error", err)
		}
		return nil
	}
	set := slices.Clone(rec.Owner)
	for _, n := range rec.From {
		if !slices.Contains(set, n) {
			set = append(set, n)
		}
	}
	now, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err != nil || !sameSet(now, set) { // not already set (by this daemon before a restart)
		if err := d.excluder.SetExcluded(ctx, rec.Job, set); err != nil {
			log.Warn("excluding the nodes the requeued job ran on failed; trying again next cycle", "error", err)
			return nil
		}
	}
	rec.Set, rec.State = set, backfillstore.MoveExcluded
	delete(d.moving, rec.Job)
	log.Info("the requeued job waits for faster nodes", "excluded", strings.Join(set, ","))
	return d.db.PutMoved(ctx, rec)
}

// followMoved takes each move recorded in state_db one step on, whether
// move_to_faster is on or not (what it changed is put back either way):
//
//   - the job is gone: the record is deleted;
//   - requeued, and the job waits: its excluded nodes are set
//     (excludeMoved; nudge_eligible leaves it alone until then);
//     requeued, and it runs: it restarted before they were (or the
//     requeue never happened), nothing to put back;
//   - excluded, and it runs: it ran again (state ran); excluded, and it
//     has waited longer than moveWaitBound since the move: the owner's
//     list is put back so that it may start anywhere;
//   - ran, and the job waits again (requeued since, e.g. after a node
//     failure): the owner's list is put back, unless the owner changed the
//     list the daemon set (then it is the owner's).
//
// A restored record stays, so the job is never moved again. Only a
// database error is returned.
func (d *Daemon) followMoved(ctx context.Context, v *View, r *Report) error {
	recs, err := d.db.MovedJobs(ctx)
	if err != nil {
		return err
	}
	d.moving = map[string]bool{}
	for id, rec := range recs {
		if rec.State == backfillstore.MoveRequeued {
			d.moving[id] = true
		}
	}
	for _, id := range sortedIDs(recs) {
		rec := recs[id]
		j, listed := v.All[id]
		log := d.log.Named("move").With("job_id", id)
		switch {
		case !listed:
			if _, unreadable := v.Unreadable[id]; unreadable {
				continue
			}
			if err := d.db.ForgetMoved(ctx, id); err != nil {
				return err
			}
		case rec.State == backfillstore.MoveRequeued && j.State == "PENDING":
			if d.cfg.DryRun {
				continue
			}
			if err := d.excludeMoved(ctx, rec, log); err != nil {
				return err
			}
		case rec.State == backfillstore.MoveRequeued && j.State == "RUNNING":
			delete(d.moving, id)
			rec.State = backfillstore.MoveRestored
			if err := d.db.PutMoved(ctx, rec); err != nil {
				return err
			}
		case rec.State == backfillstore.MoveExcluded && j.State == "RUNNING":
			log.Info("the moved job runs again", "nodes", j.NodeList)
			rec.State = backfillstore.MoveRan
			if err := d.db.PutMoved(ctx, rec); err != nil {
				return err
			}
		case rec.State == backfillstore.MoveExcluded && j.State == "PENDING" && v.Now.Sub(rec.Since) > moveWaitBound,
			rec.State == backfillstore.MoveRan && j.State == "PENDING":
			if d.cfg.DryRun {
				continue
			}
			if err := d.restoreMoved(ctx, rec, log, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreMoved puts back the owner's excluded nodes of waiting job
// rec.Job when Slurm still lists the ones the daemon set (else the owner
// changed them: they are the owner's) and records the move as restored;
// a refused update is tried again next cycle. Only a database error is
// returned.
func (d *Daemon) restoreMoved(ctx context.Context, rec backfillstore.Moved, log hclog.Logger, r *Report) error {
	p, pending, err := d.snap.Slurm.PendingPlacement(ctx, rec.Job)
	if err != nil || !pending {
		return nil
	}
	now, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err == nil && sameSet(now, rec.Set) {
		if err := d.excluder.SetExcluded(ctx, rec.Job, rec.Owner); err != nil {
			log.Warn("putting the owner's excluded nodes back failed; trying again next cycle", "error", err)
			return nil
		}
		d.metrics.Moves.WithLabelValues("restored").Inc()
		r.MoveRestored = append(r.MoveRestored, rec.Job)
		log.Info("put the owner's excluded nodes back", "excluded", strings.Join(rec.Owner, ","))
	} else {
		log.Info("the job's excluded nodes are no longer the ones the daemon set; leaving them to its owner", "excluded", p.ExcNodes)
	}
	rec.State = backfillstore.MoveRestored
	return d.db.PutMoved(ctx, rec)
}
