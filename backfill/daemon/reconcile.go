package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// reconciled is what reconcile hands to planning: the live extra jobs this
// daemon owns, GPUs lent to other daemons' jobs per user, and jobs that look
// like extra jobs but are not this daemon's (planned as ordinary jobs).
type reconciled struct {
	live      map[string]*lent
	otherLent map[string]int
	foreign   []slurmcli.Job
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
//   - an extra job Slurm lists but the database does not is handled by
//     reconcileUnknown, which acts only on jobs the ownership rule (see the
//     package documentation) lets it treat as its own.
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
		if err := d.reconcileUnknown(ctx, v, id, running, &rc, r); err != nil {
			return rc, err
		}
	}
	for _, id := range sortedIDs(v.Lookalikes) {
		x := v.Lookalikes[id]
		d.note(id, x, false, fmt.Sprintf("name %q and comment %q are not the extra job form %q / \"%s parent=JOBID\"",
			x.Job.Name, x.Job.Comment, "es-extra-JOBID", ExtraCommentPrefix))
	}
	for id := range d.noted {
		_, extra := v.Extras[id]
		_, lookalike := v.Lookalikes[id]
		if !extra && !lookalike {
			delete(d.noted, id)
		}
	}
	return rc, nil
}

// note logs, once per job and reason, why an extra-looking job is left alone
// (at warn when scopes overlap, else at info).
func (d *Daemon) note(id string, x *ExtraView, warn bool, why string) {
	if d.noted[id] == why {
		return
	}
	d.noted[id] = why
	log := d.log.Named("reconcile").With("extra_id", id, "job_id", x.Parent, "node", x.Node, "partition", x.Job.Partition)
	if warn {
		log.Warn("leaving job alone: "+why, "dry_run", d.cfg.DryRun)
		return
	}
	log.Info("leaving job alone: "+why, "dry_run", d.cfg.DryRun)
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

// reconcileUnknown handles an extra-looking job the database does not
// record. It is this daemon's to act on only under the ownership rule
// (mayOwn): otherwise it is left alone, logged once, and planned as an
// ordinary job. An owned job is adopted when it runs on a managed node for a
// running elastic job whose nodes are all managed (the daemon was killed
// between sbatch and recording it: cancelling it would shrink that job by
// mistake), cancelled when it is pending for such a job or when its parent
// is gone and it sits on a managed node (an orphan), and otherwise left
// alone: an owned-looking job outside this daemon's scope belongs to
// another daemon, and one whose parent is in scope but whose node is not
// (or the reverse) means two daemons' scopes overlap, which is logged as a
// warning.
func (d *Daemon) reconcileUnknown(ctx context.Context, v *View, id string, running map[string]bool, rc *reconciled, r *Report) error {
	x := v.Extras[id]
	if x.Job.State == "COMPLETING" {
		return nil // ending by itself
	}
	if _, err := d.db.Extra(ctx, id); err == nil {
		return nil // recorded as ended (we cancelled it); Slurm has not caught up
	} else if !errors.Is(err, statedb.ErrNoExtra) {
		return err
	}
	own, node, why, err := d.mayOwn(ctx, v, x)
	if err != nil {
		return err
	}
	if !own {
		d.note(id, x, false, why)
		rc.foreign = append(rc.foreign, x.Job)
		return nil
	}
	nv := v.node(node)
	inScope := node != "" && nv != nil && nv.Managed
	e := v.Elastic[x.Parent]
	switch {
	case e != nil && !e.Managed && !inScope:
		rc.otherLent[e.User] += x.GPUs
		d.note(id, x, false, "extra job of a job outside this daemon's nodes (another daemon's)")
		return nil
	case e != nil && e.Managed != inScope:
		rc.otherLent[e.User] += x.GPUs
		d.note(id, x, true, fmt.Sprintf("unrecorded extra job on node %q of job %s: only one of them is inside this daemon's "+
			"partitions/nodes, so another easyscale-backfilld's scope overlaps this one; give each daemon disjoint nodes", node, x.Parent))
		return nil
	case e != nil && x.Job.State == "RUNNING" && x.Node != "":
		return d.adopt(ctx, v, id, x, e, rc, r)
	case e != nil:
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, id)
		return d.cancel(ctx, id, x.Parent, node, "unrecorded extra job not yet running", false)
	case running[x.Parent]:
		d.note(id, x, false, fmt.Sprintf("its parent %s runs but is not an elastic job", x.Parent))
		rc.foreign = append(rc.foreign, x.Job)
		return nil
	case !inScope:
		d.note(id, x, false, fmt.Sprintf("orphan on node %q outside this daemon's partitions/nodes", node))
		return nil
	}
	d.metrics.Reconciled.WithLabelValues("cancel").Inc()
	r.Cancelled = append(r.Cancelled, id)
	return d.cancel(ctx, id, x.Parent, node, fmt.Sprintf("orphan: parent job %s is not running", x.Parent), false)
}

// adopt records an unrecorded running extra job of a managed elastic job.
func (d *Daemon) adopt(ctx context.Context, v *View, id string, x *ExtraView, e *ElasticJob, rc *reconciled, r *Report) error {
	rec := statedb.ExtraJob{ID: id, Parent: x.Parent, User: e.User, Partition: x.Job.Partition, Node: x.Node,
		GPUType: nodeType(v, x.Node), GPUs: x.GPUs, Submitted: v.Now, End: x.End, State: statedb.ExtraSubmitted,
		Reason: "adopted after a restart", Adopted: true}
	if rec.End.IsZero() {
		rec.End = v.Now
	}
	d.log.Named("reconcile").Warn("adopting extra job found in Slurm but not in the database (expected after a crash "+
		"between sbatch and the database write; if another easyscale-backfilld manages these nodes, the scopes overlap)",
		"extra_id", id, "job_id", x.Parent, "node", x.Node, "gpus", x.GPUs, "dry_run", d.cfg.DryRun)
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
}

// mayOwn applies the ownership rule to an unrecorded extra-looking job x
// (its name and comment were checked by the snapshot): it may be this
// daemon's only when it runs in extra.partition and, when Slurm still knows
// the parent, belongs to the parent's user. It returns the node the job runs
// on (or, pending, asked for with --nodelist) and, when not owned, why.
// Errors are Slurm failures other than "no such job".
func (d *Daemon) mayOwn(ctx context.Context, v *View, x *ExtraView) (own bool, node, why string, err error) {
	node = x.Node
	if name := ExtraJobName(x.Parent); x.Job.Name != name || x.Job.Comment != ExtraComment(x.Parent) {
		return false, node, fmt.Sprintf("name %q or comment %q is not the extra job form %q / %q",
			x.Job.Name, x.Job.Comment, name, ExtraComment(x.Parent)), nil
	}
	if x.Job.Partition != d.cfg.Extra.Partition {
		return false, node, fmt.Sprintf("partition %q is not extra.partition %q", x.Job.Partition, d.cfg.Extra.Partition), nil
	}
	det, err := d.snap.detail(ctx, x.Job.ID)
	if noSuchJob(err) {
		return false, node, "Slurm no longer knows it", nil
	} else if err != nil {
		return false, node, "", err
	}
	if node == "" && !strings.ContainsAny(det.reqNodes, ",[") {
		node = det.reqNodes
	}
	parentUser := ""
	if e := v.Elastic[x.Parent]; e != nil {
		parentUser = e.User
	} else if pd, err := d.snap.detail(ctx, x.Parent); err == nil {
		parentUser = pd.user
	} else if !noSuchJob(err) {
		return false, node, "", err
	}
	if parentUser != "" && det.user != parentUser {
		return false, node, fmt.Sprintf("its user %q is not the user %q of job %s", det.user, parentUser, x.Parent), nil
	}
	return true, node, "", nil
}

// noSuchJob reports whether err says Slurm does not know the job.
func noSuchJob(err error) bool {
	var ce *slurmcli.CommandError
	return errors.Is(err, slurmcli.ErrNoSuchJob) || (errors.As(err, &ce) && strings.Contains(ce.Stderr, "Invalid job id"))
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
