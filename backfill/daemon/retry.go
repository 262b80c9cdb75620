package daemon

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Failing lends: the rules are the planner's (planner.LendEnd.Outcome,
// planner.SubmitFailure.Outcome, planner.PendingLend.Outcome,
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
// and the node's counts, a success clears them (recordLend). It returns
// the outcome; err is a database error.
func (d *Daemon) lendEnded(ctx context.Context, v *View, rec backfillstore.ExtraJob, state string, parentRunning bool,
	hist map[string]backfillstore.LendHistory) (planner.LendOutcome, error) {
	o := planner.LendEnd{State: state, Seen: v.Now.Unix(), End: rec.End.Unix(), Shrunk: rec.State == backfillstore.ExtraSignalled,
		ParentRunning: parentRunning}.Outcome()
	_, err := d.recordLend(ctx, v, lendFailure{job: rec.Parent, node: rec.Node, extra: rec.ID, gpus: rec.GPUs, outcome: o,
		reason: "ended", kind: "lend-failed", what: "extra job failed",
		detail: fmt.Sprintf("ended (%s) %s before its time limit while its job runs", stateOrGone(state),
			rec.End.Sub(v.Now).Round(time.Second))}, hist)
	return o, err
}

// lendFailure is one lend whose end, refusal or cancellation says
// something of lending to its job: its outcome (planner.LendEnd.Outcome,
// planner.SubmitFailure.Outcome or planner.PendingLend.Outcome) and how
// it is told.
type lendFailure struct {
	// job, node and extra (its Slurm job id; "" when sbatch made none)
	// and the GPUs it lent.
	job, node, extra string
	gpus             int
	outcome          planner.LendOutcome
	// reason labels lend_failures_total: "ended", "sbatch", "pending" or
	// "changed" (its owner changed it from what was lent: extraChanged).
	reason string
	// kind is the decision recorded for a failure ("lend-failed",
	// "grow-failed"); what opens the log line and detail says what
	// happened.
	kind, what, detail string
}

// recordLend records f in job f.job's history of failed lends (planner
// LendHistory.Record) and returns the verdict of the retry rule after it
// (planner.RetryPolicy.MayLend). A failure is recorded as a decision of
// f.kind, logged (job_id, node) and counted in lend_failures_total; the
// failure that stops the job's growth is announced once, in the log and
// the metrics. err is a database error.
func (d *Daemon) recordLend(ctx context.Context, v *View, f lendFailure, hist map[string]backfillstore.LendHistory) (planner.LendVerdict, error) {
	old := hist[f.job]
	status := old.Status
	if e := v.Elastic[f.job]; e != nil {
		status = e.Status
	}
	policy := d.cfg.RetryPolicy()
	now := v.Now.Unix()
	if f.outcome == planner.LendNeutral || (f.outcome == planner.LendSucceeded && toPlanner(old).Empty()) {
		return policy.MayLend(toPlanner(old), status, now), nil
	}
	ph := toPlanner(old).Record(f.node, f.outcome, now, status)
	stopped := old.Stopped
	verdict := policy.MayLend(ph, status, now)
	if !verdict.Stopped {
		stopped = time.Time{}
	}
	if f.outcome == planner.LendFailed || f.outcome == planner.LendNodeFailed {
		d.metrics.LendFailures.WithLabelValues(f.reason).Inc()
		log := d.log.Named("retry").With("job_id", f.job, "node", f.node)
		if f.extra != "" {
			log = log.With("extra_id", f.extra)
		}
		until := verdict.Until
		count := fmt.Sprintf("%d consecutive failed extra jobs", ph.Failures)
		if f.outcome == planner.LendNodeFailed {
			k := 0
			for _, n := range ph.Nodes {
				if n.Node == f.node {
					k, until = n.Failures, n.Last+policy.Backoff(n.Failures)
				}
			}
			count = fmt.Sprintf("%d consecutive failed extra jobs on node %s (counted on the node only)", k, f.node)
		}
		next := time.Unix(max(until, now), 0)
		detail := f.detail + ": " + count
		if err := d.decide(ctx, f.kind, f.job, f.extra, f.node, f.gpus, detail); err != nil {
			return verdict, err
		}
		logf := log.Info
		if f.reason == "sbatch" {
			logf = log.Warn // a refusal may be the daemon's settings: the operator should see it
		}
		logf(f.what+": "+detail+"; backing off", "failures", ph.Failures, "next_lend", next)
		if verdict.Stopped && stopped.IsZero() {
			stopped = v.Now
			d.metrics.GrowthStops.Inc()
			why := fmt.Sprintf("its last %d extra jobs failed or were refused (retry.stop_after = %d); growing it again once its status changes "+
				"(requeued or restarted, coordinator or token file rewritten, request changed) or a lend of it succeeds",
				ph.Failures, policy.StopAfter)
			if err := d.decide(ctx, "stop-growing", f.job, f.extra, f.node, 0, why); err != nil {
				return verdict, err
			}
			log.Warn("not growing job: "+why, "failures", ph.Failures)
		}
	}
	if f.outcome == planner.LendSucceeded && !old.Stopped.IsZero() && stopped.IsZero() {
		d.log.Named("retry").Info("growing job again: an extra job of it ran to its time limit",
			"job_id", f.job, "node", f.node, "extra_id", f.extra)
	}
	h := fromPlanner(f.job, ph, stopped)
	hist[f.job] = h
	return verdict, d.db.PutLendHistory(ctx, h)
}

// errNoJobID is wrapped by Submit's error when sbatch exited 0 without
// printing a job id.
var errNoJobID = errors.New("sbatch printed no job id")

// submitFailure turns the error of a failed Submit into the planner's
// planner.SubmitFailure. The request was answered when sbatch ran and
// exited with a non-zero status and a message on stderr (the message is
// its stderr), or when Submit refused to form the request (no
// *slurmcli.CommandError in err: ExtraSpec.Args, the user's group); it
// was not when sbatch could not be run, was killed (a signal, its
// timeout), ctx ended, or it printed no job id.
func submitFailure(ctx context.Context, err error) planner.SubmitFailure {
	var ce *slurmcli.CommandError
	if !errors.As(err, &ce) {
		return planner.SubmitFailure{Answered: ctx.Err() == nil && !errors.Is(err, errNoJobID), Message: err.Error()}
	}
	var ee *exec.ExitError
	var xe *exec.Error
	unanswered := ctx.Err() != nil || ce.Stderr == "" || errors.As(ce.Err, &xe) ||
		(errors.As(ce.Err, &ee) && !ee.Exited()) ||
		errors.Is(ce.Err, context.DeadlineExceeded) || errors.Is(ce.Err, context.Canceled)
	msg := ce.Stderr
	if msg == "" {
		msg = fmt.Sprint(ce.Err)
	}
	return planner.SubmitFailure{Answered: !unanswered, Message: msg}
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
// shrink-to-admit records of the jobs it lists (running or waiting
// requeued) stay.
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
