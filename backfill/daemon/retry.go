package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Failing lends: the rules are the planner's (planner.LendEnd.Outcome,
// planner.LendHistory.Record, planner.RetryPolicy.MayLend); this file only
// translates the store's records and Slurm's view into them and applies
// the answers (see the package documentation, "Failing extra jobs").

// toPlanner turns a stored history into the planner's (seconds).
func toPlanner(h backfillstore.LendHistory) planner.LendHistory {
	out := planner.LendHistory{Failures: h.Failures, Last: unix(h.Last), Status: h.Status}
	for _, n := range h.Nodes {
		out.Nodes = append(out.Nodes, planner.NodeFailures{Node: n.Node, Failures: n.Failures, Last: unix(n.Last)})
	}
	return out
}

// fromPlanner turns the planner's history of job back into the store's,
// with stopped (when the stop was announced); an empty history is an empty
// record (PutLendHistory deletes it).
func fromPlanner(job string, h planner.LendHistory, stopped time.Time) backfillstore.LendHistory {
	if h.Empty() && stopped.IsZero() {
		return backfillstore.LendHistory{Job: job}
	}
	out := backfillstore.LendHistory{Job: job, Failures: h.Failures, Status: h.Status, Stopped: stopped}
	if h.Last != 0 {
		out.Last = time.Unix(h.Last, 0)
	}
	for _, n := range h.Nodes {
		out.Nodes = append(out.Nodes, backfillstore.NodeFailures{Node: n.Node, Failures: n.Failures, Last: time.Unix(n.Last, 0)})
	}
	return out
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// lendEnded records what recorded extra job rec, seen ended in this cycle
// with Slurm's final state ("" when squeue no longer lists it), says of
// lending to its job (planner.LendEnd.Outcome): a failure adds to the job's
// and the node's counts, a success clears them. The failure that stops the
// job's growth is announced once, in the log (job_id, node) and the
// metrics. It returns the outcome; err is a database error.
func (d *Daemon) lendEnded(ctx context.Context, v *View, rec backfillstore.ExtraJob, state string, parentRunning bool,
	hist map[string]backfillstore.LendHistory) (planner.LendOutcome, error) {
	o := planner.LendEnd{State: state, Seen: v.Now.Unix(), End: rec.End.Unix(), Shrunk: rec.State == backfillstore.ExtraSignalled,
		ParentRunning: parentRunning}.Outcome()
	old := hist[rec.Parent]
	if o == planner.LendNeutral || (o == planner.LendSucceeded && toPlanner(old).Empty()) {
		return o, nil
	}
	status := old.Status
	if e := v.Elastic[rec.Parent]; e != nil {
		status = e.Status
	}
	ph := toPlanner(old).Record(rec.Node, o, v.Now.Unix(), status)
	stopped := old.Stopped
	policy := d.cfg.RetryPolicy()
	verdict := policy.MayLend(ph, status, v.Now.Unix())
	if !verdict.Stopped {
		stopped = time.Time{}
	}
	if o == planner.LendFailed {
		d.metrics.LendFailures.Inc()
		log := d.log.Named("retry").With("job_id", rec.Parent, "node", rec.Node, "extra_id", rec.ID)
		next := time.Unix(max(verdict.Until, v.Now.Unix()), 0)
		detail := fmt.Sprintf("ended (%s) %s before its time limit while its job runs: %d consecutive failed extra jobs",
			stateOrGone(state), rec.End.Sub(v.Now).Round(time.Second), ph.Failures)
		if err := d.decide(ctx, "lend-failed", rec.Parent, rec.ID, rec.Node, rec.GPUs, detail); err != nil {
			return o, err
		}
		log.Info("extra job failed: "+detail+"; backing off", "failures", ph.Failures, "next_lend", next)
		if verdict.Stopped && stopped.IsZero() {
			stopped = v.Now
			d.metrics.GrowthStops.Inc()
			why := fmt.Sprintf("its last %d extra jobs failed (retry.stop_after = %d); growing it again once its status changes "+
				"(requeued or restarted, coordinator or token file rewritten, request changed) or a lend of it succeeds",
				ph.Failures, policy.StopAfter)
			if err := d.decide(ctx, "stop-growing", rec.Parent, rec.ID, rec.Node, 0, why); err != nil {
				return o, err
			}
			log.Warn("not growing job: "+why, "failures", ph.Failures)
		}
	}
	if o == planner.LendSucceeded && !old.Stopped.IsZero() && stopped.IsZero() {
		d.log.Named("retry").Info("growing job again: an extra job of it ran to its time limit",
			"job_id", rec.Parent, "node", rec.Node, "extra_id", rec.ID)
	}
	h := fromPlanner(rec.Parent, ph, stopped)
	hist[rec.Parent] = h
	return o, d.db.PutLendHistory(ctx, h)
}

func stateOrGone(state string) string {
	if state == "" {
		return "no longer listed by squeue"
	}
	return state
}

// lendVerdicts asks the planner where each running elastic job with failed
// lends may be grown now (planner.RetryPolicy.MayLend), for the planner's
// snapshot. A stop that its status change lifted is logged once and
// cleared; the gauges count the jobs stopped and backing off. Histories of
// jobs Slurm no longer lists are deleted. err is a database error.
func (d *Daemon) lendVerdicts(ctx context.Context, v *View, hist map[string]backfillstore.LendHistory) (map[string]planner.LendVerdict, error) {
	out := map[string]planner.LendVerdict{}
	policy := d.cfg.RetryPolicy()
	now := v.Now.Unix()
	stopped, waiting := 0, 0
	for _, job := range sortedIDs(hist) {
		h := hist[job]
		_, listed := v.All[job]
		if !listed && v.Unreadable[job] == nil {
			if d.cfg.DryRun {
				continue
			}
			delete(hist, job)
			if err := d.db.PutLendHistory(ctx, backfillstore.LendHistory{Job: job}); err != nil {
				return nil, err
			}
			continue
		}
		e := v.Elastic[job]
		if e == nil {
			continue // not running, or its request cannot be read: not planned
		}
		verdict := policy.MayLend(toPlanner(h), e.Status, now)
		out[job] = verdict
		switch {
		case verdict.Stopped:
			stopped++
		case now < verdict.Until:
			waiting++
		}
		if verdict.Stopped || h.Stopped.IsZero() {
			continue
		}
		d.log.Named("retry").Info("growing job again: its status changed since its extra jobs failed",
			"job_id", job, "failures", h.Failures, "next_lend", time.Unix(max(verdict.Until, now), 0))
		if err := d.decide(ctx, "grow-again", job, "", "", 0, "its status changed since its extra jobs failed"); err != nil {
			return nil, err
		}
		h.Stopped = time.Time{}
		hist[job] = h
		if err := d.db.PutLendHistory(ctx, h); err != nil {
			return nil, err
		}
	}
	d.metrics.JobsNotGrown.Set(float64(stopped))
	d.metrics.JobsBackingOff.Set(float64(waiting))
	return out, nil
}

// prune deletes the rows of state_db that [retention] does not keep
// (backfillstore.DB.Prune): the extra jobs Slurm still lists and the
// shrink-to-admit records of running jobs stay.
func (d *Daemon) prune(ctx context.Context, v *View) error {
	if d.cfg.DryRun {
		return nil
	}
	k := d.cfg.Retention
	r := backfillstore.Retention{Decisions: k.Decisions, EndedExtras: k.EndedExtras, Before: v.Now.Add(-k.MaxAge.Duration)}
	for id := range v.All {
		r.Listed = append(r.Listed, id)
	}
	for id := range v.Unreadable {
		r.Listed = append(r.Listed, id)
	}
	for _, j := range v.Running {
		r.Running = append(r.Running, j.ID)
	}
	p, err := d.db.Prune(ctx, r)
	if err != nil {
		return err
	}
	d.metrics.Pruned.WithLabelValues("decisions").Add(float64(p.Decisions))
	d.metrics.Pruned.WithLabelValues("extras").Add(float64(p.Extras))
	d.metrics.Pruned.WithLabelValues("admit_shrinks").Add(float64(p.AdmitShrinks))
	if p != (backfillstore.Pruned{}) {
		d.log.Named("retention").Debug("pruned state_db", "decisions", p.Decisions, "extras", p.Extras, "admit_shrinks", p.AdmitShrinks)
	}
	return nil
}
