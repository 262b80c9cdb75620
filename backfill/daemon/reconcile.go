package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// reconciled is what reconcile hands to planning: the live extra jobs this
// daemon owns, and GPUs lent to other daemons' jobs per user.
type reconciled struct {
	live      map[string]*lent
	otherLent map[string]int
}

// reconcile brings the database in line with Slurm, every cycle (so a
// restart after SIGKILL needs no special path):
//
//   - a recorded extra job Slurm no longer lists, or lists in a final state,
//     is marked ended with that state (PREEMPTED, COMPLETED, TIMEOUT, ...);
//   - a recorded extra job whose parent is not running is cancelled;
//   - a recorded extra job still pending after pending_timeout is cancelled
//     (the gap it was meant for is gone);
//   - a signalled extra job still there after grace_period is cancelled;
//   - an extra job Slurm lists but the database does not (the daemon was
//     killed between sbatch and recording it, or the database was lost) is
//     adopted when it runs for a running elastic job this daemon manages —
//     cancelling it would shrink that job by mistake — and is cancelled
//     when it is still pending (nothing is lost) or its parent is gone
//     (an orphan). Extra jobs of elastic jobs on nodes this daemon does not
//     manage belong to another daemon: they are left alone and count toward
//     their user's lent GPUs.
func (d *Daemon) reconcile(ctx context.Context, v *View, r *Report) (reconciled, error) {
	rc := reconciled{live: map[string]*lent{}, otherLent: map[string]int{}}
	recs, err := d.db.ActiveExtras(ctx)
	if err != nil {
		return rc, err
	}
	running := map[string]bool{}
	for _, j := range v.Running {
		running[j.ID] = true
	}
	known := map[string]bool{}
	for _, rec := range recs {
		known[rec.ID] = true
		if err := d.reconcileKnown(ctx, v, rec, running, rc, r); err != nil {
			return rc, err
		}
	}
	for _, id := range sortedIDs(v.Extras) {
		if known[id] {
			continue
		}
		if err := d.reconcileUnknown(ctx, v, id, running, rc, r); err != nil {
			return rc, err
		}
	}
	return rc, nil
}

func (d *Daemon) reconcileKnown(ctx context.Context, v *View, rec statedb.ExtraJob, running map[string]bool, rc reconciled, r *Report) error {
	log := d.log.Named("reconcile").With("extra_id", rec.ID, "job_id", rec.Parent, "node", rec.Node)
	x, inSlurm := v.Extras[rec.ID]
	if !inSlurm {
		state := v.Ended[rec.ID]
		if state == "" {
			state = "gone (no longer listed by squeue)"
		}
		log.Info("extra job ended", "state", state)
		d.metrics.ExtraEnds.WithLabelValues(firstWord(state)).Inc()
		d.metrics.Reconciled.WithLabelValues("ended").Inc()
		if d.cfg.DryRun {
			return nil
		}
		return d.db.MarkEnded(ctx, rec.ID, v.Now, state)
	}
	grace := d.cfg.GracePeriod.Duration
	pending := x.Job.State == "PENDING"
	switch {
	case !running[rec.Parent]:
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, rec.ID)
		return d.cancel(ctx, rec.ID, rec.Parent, rec.Node, fmt.Sprintf("parent job %s is not running", rec.Parent), true)
	case pending && v.Now.Sub(rec.Submitted) > d.cfg.PendingTimeout.Duration:
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, rec.ID)
		return d.cancel(ctx, rec.ID, rec.Parent, rec.Node,
			fmt.Sprintf("still pending (%s) after pending_timeout %v", x.Job.Reason, d.cfg.PendingTimeout), true)
	case rec.State == statedb.ExtraSignalled && !v.Now.Before(rec.Signalled.Add(grace)):
		d.metrics.Shrinks.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, rec.ID)
		return d.cancel(ctx, rec.ID, rec.Parent, rec.Node, "still running after the grace period: "+rec.Reason, false)
	}
	l := &lent{rec: rec, view: x, pending: pending, end: x.End}
	if pending || l.end.IsZero() {
		l.end = v.Now.Add(rec.End.Sub(rec.Submitted))
	}
	if rec.State == statedb.ExtraSignalled {
		l.end = minTime(l.end, rec.Signalled.Add(grace))
	}
	rc.live[rec.ID] = l
	return nil
}

func (d *Daemon) reconcileUnknown(ctx context.Context, v *View, id string, running map[string]bool, rc reconciled, r *Report) error {
	x := v.Extras[id]
	log := d.log.Named("reconcile").With("extra_id", id, "job_id", x.Parent, "node", x.Node)
	if x.Job.State == "COMPLETING" {
		return nil // ending by itself
	}
	if _, err := d.db.Extra(ctx, id); err == nil {
		return nil // recorded as ended (we cancelled it); Slurm has not caught up
	} else if !errors.Is(err, statedb.ErrNoExtra) {
		return err
	}
	e := v.Elastic[x.Parent]
	nodeManaged := x.Node != "" && v.node(x.Node) != nil && v.node(x.Node).Managed
	switch {
	case e != nil && !e.Managed:
		rc.otherLent[e.User] += x.GPUs
		return nil
	case e != nil && x.Job.State == "RUNNING" && x.Node != "":
		rec := statedb.ExtraJob{ID: id, Parent: x.Parent, User: e.User, Partition: x.Job.Partition, Node: x.Node,
			GPUType: nodeType(v, x.Node), GPUs: x.GPUs, Submitted: v.Now, End: x.End, State: statedb.ExtraSubmitted,
			Reason: "adopted after a restart", Adopted: true}
		if rec.End.IsZero() {
			rec.End = v.Now
		}
		log.Info("adopting extra job found in Slurm but not in the database", "gpus", x.GPUs, "dry_run", d.cfg.DryRun)
		d.metrics.Reconciled.WithLabelValues("adopt").Inc()
		r.Adopted = append(r.Adopted, id)
		if err := d.decide(ctx, "adopt", x.Parent, id, x.Node, x.GPUs, "running extra job of a managed elastic job"); err != nil {
			return err
		}
		if d.cfg.DryRun {
			return nil
		}
		if err := d.db.RecordExtra(ctx, rec); err != nil {
			return err
		}
		rc.live[id] = &lent{rec: rec, view: x, end: x.End}
		return nil
	case e != nil:
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, id)
		return d.cancel(ctx, id, x.Parent, x.Node, "unrecorded extra job not yet running", false)
	case !running[x.Parent] && (nodeManaged || x.Job.State == "PENDING"):
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, id)
		return d.cancel(ctx, id, x.Parent, x.Node, fmt.Sprintf("orphan: parent job %s is not running", x.Parent), false)
	}
	return nil
}

func nodeType(v *View, name string) string {
	if n := v.node(name); n != nil {
		return n.GPUType
	}
	return ""
}

func firstWord(s string) string {
	for i, c := range s {
		if c == ' ' {
			return s[:i]
		}
	}
	return s
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
