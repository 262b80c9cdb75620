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

// moveWaitBound is the longest a moved job waits for the faster nodes
// before its owner's excluded nodes are put back and it may start
// anywhere again: the outer bound. The nodes were idle when it was
// requeued; once a job submitted meanwhile is seen to have taken them
// (movedTargetsTaken) the list is put back in that cycle, and the bound
// covers what the daemon cannot see (Slurm holding idle nodes for a job
// of higher priority, a request it cannot read).
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
//   - excluded, and it runs: it ran again (state ran);
//   - excluded, and it waits: when the nodes it may start on (the
//     schedulable nodes its partitions and --nodelist allow, outside the
//     list the daemon set) no longer hold its request on idle GPUs (those
//     of this daemon's started extra jobs count as idle: Slurm preempts
//     them), another job took the faster nodes, and the owner's list is
//     put back in this cycle (moveTargetsGone, movedTargetsTaken); it is
//     put back too once the job has waited longer than moveWaitBound
//     since the move, whatever the nodes hold; otherwise it waits on;
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
	var lentOn map[string]int // read for the first excluded job that waits
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
		case rec.State == backfillstore.MoveExcluded && j.State == "PENDING":
			if d.cfg.DryRun {
				continue
			}
			if waited := v.Now.Sub(rec.Since); waited > moveWaitBound {
				log.Info("the moved job waited longer than the bound for the faster nodes", "waited", waited.Round(time.Second).String(), "bound", moveWaitBound.String())
			} else {
				if lentOn == nil {
					if lentOn, err = d.startedExtrasByNode(ctx, v); err != nil {
						return err
					}
				}
				if !d.moveTargetsGone(v, j, rec, lentOn, log) {
					continue
				}
			}
			if err := d.restoreMoved(ctx, rec, log, r); err != nil {
				return err
			}
		case rec.State == backfillstore.MoveRan && j.State == "PENDING":
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

// startedExtrasByNode counts, by node, the GPUs of this daemon's extra
// jobs (recorded in state_db, not ended) that Slurm lists as started
// (running or completing, not pending), as lentByNode counts the live
// extra jobs reconcile hands to planning: idle for a moved job, since
// Slurm preempts extra.partition for it. It reads state_db rather than
// reconcile's live set because that set leaves out the extra jobs
// reconcile cancels this cycle, whose GPUs are as free for the moved job
// as the others' (one query, only while a moved job waits excluded).
// Only a database error is returned.
func (d *Daemon) startedExtrasByNode(ctx context.Context, v *View) (map[string]int, error) {
	recs, err := d.db.ActiveExtras(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]*lent{}
	for _, rec := range recs {
		if x, ok := v.Extras[rec.ID]; ok && x.Job.State != "PENDING" {
			live[rec.ID] = &lent{rec: rec, view: x}
		}
	}
	return lentByNode(live, v, d.cfg.Extra.Partition), nil
}

// moveTargetsGone reports whether moved job j, waiting with the excluded
// nodes the daemon set (rec.Set), can no longer start on the nodes left to
// it, so that it would wait for nothing: its request (readQueued: GPUs per
// node and node count) no longer fits the idle GPUs (lentOn, this daemon's
// started extra jobs' GPUs by node, counted as idle) of the schedulable
// nodes its partitions and --nodelist allow outside rec.Set
// (movedTargetsTaken). A request it cannot read is not gone (the job waits
// for moveWaitBound). It logs the nodes when they are gone.
func (d *Daemon) moveTargetsGone(v *View, j slurmcli.Job, rec backfillstore.Moved, lentOn map[string]int, log hclog.Logger) bool {
	q, ok := readQueued(j)
	if !ok {
		log.Debug("the moved job's request does not read; it waits for the faster nodes up to the bound")
		return false
	}
	places := d.placesJob(j, nil)
	free := map[string]int{}
	for _, n := range v.Nodes {
		if n.Schedulable && places(n) {
			free[n.Name] = freeGPUs(n, lentOn)
		}
	}
	taken, left := movedTargetsTaken(q.perNode, q.nodes, free, rec.Set)
	if taken {
		log.Info("another job took the faster nodes the moved job waits for; putting its owner's excluded nodes back now",
			"node", strings.Join(left, ","), "gpus_per_node", q.perNode, "nodes", q.nodes, "waited", v.Now.Sub(rec.Since).Round(time.Second).String())
	}
	return taken
}

// movedTargetsTaken is the rule of moveTargetsGone over plain values: a
// moved job asking for perNode GPUs on each of nodes nodes, excluded from
// set (the list the daemon set), may start only on the nodes of free (the
// nodes its placement allows and Slurm may start jobs on, by name, with
// their idle GPUs) outside set. taken reports whether fewer than nodes of
// them hold perNode idle GPUs each (the faster nodes were taken); left is
// those nodes, sorted, whatever they hold (for the log). A request of no
// GPUs or no nodes is never taken.
func movedTargetsTaken(perNode, nodes int, free map[string]int, set []string) (taken bool, left []string) {
	fit := 0
	for n, gpus := range free {
		if slices.Contains(set, n) {
			continue
		}
		left = append(left, n)
		if gpus >= perNode {
			fit++
		}
	}
	slices.Sort(left)
	if perNode < 1 || nodes < 1 {
		return false, left
	}
	return fit < nodes, left
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
