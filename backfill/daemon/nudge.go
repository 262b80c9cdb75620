package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// Nudger makes Slurm's scheduler consider a waiting job now.
type Nudger interface {
	// Nudge sets job id's begin time to a time in the past, which
	// slurmctld raises to its own now: `scontrol update JobId=ID
	// StartTime=now-300`. For a job whose begin time has passed it changes
	// nothing but is a job update, after which slurmctld runs its
	// scheduler (planner.PlanNudges).
	Nudge(ctx context.Context, id string) error
}

// NudgeStartTime is the StartTime a nudge sets: five minutes before the
// clock of the host that runs scontrol (parse_time's now-N), so that
// slurmctld, which raises a begin time in the past to its own now, sets
// the job's begin time to its now even when the daemon's clock is ahead of
// slurmctld's (munge refuses credentials from clocks further apart, 300 s
// by default). "now" would set the client's now, which on a clock ahead
// would hold an eligible job again for the difference.
const NudgeStartTime = "StartTime=now-300"

// SlurmNudger is the Nudger over scontrol.
type SlurmNudger struct{ Slurm slurmcli.Runner }

var _ Nudger = (*SlurmNudger)(nil)

// Nudge runs `scontrol update JobId=ID StartTime=now-300`.
func (s *SlurmNudger) Nudge(ctx context.Context, id string) error {
	if err := s.Slurm.UpdateJob(ctx, id, NudgeStartTime); err != nil {
		return fmt.Errorf("nudging job %s: %w", id, err)
	}
	return nil
}

// beginHeld lists the waiting elastic jobs (an EasyScale comment) that
// Slurm holds by their begin time (Reason "BeginTime") in the daemon's
// partitions (config partitions; empty: all), in queue order as squeue
// printed them. A job whose StartTime cannot be read, or that squeue
// prints as "Unknown" or "None" (a begin time of INFINITE or NO_VAL, which
// `--begin=2106-02-07T06:28:15` sets) rather than "N/A", is left out:
// nothing says its begin time has passed.
func (d *Daemon) beginHeld(v *View) []planner.BeginHeld {
	var held []planner.BeginHeld
	for _, j := range v.Pending {
		if j.Reason != "BeginTime" || !anyIn(strings.Split(j.Partition, ","), d.cfg.Partitions) {
			continue
		}
		if _, err := elastic.ParseComment(j.Comment); err != nil {
			continue
		}
		h := planner.BeginHeld{ID: j.ID}
		if j.StartTime == "" && j.StartUnset != "N/A" {
			continue
		}
		if j.StartTime != "" {
			t, err := slurmcli.ParseTime(j.StartTime, d.snap.loc())
			if err != nil {
				continue
			}
			h.Begin = t.Unix()
		}
		held = append(held, h)
	}
	return held
}

// nudgeEligible applies this cycle's nudges ([nudge_eligible],
// planner.PlanNudges): each waiting elastic job whose begin time has
// passed is re-read by id (verifyEligible) and nudged once while it stays
// held; a failed nudge is logged and counted, not retried (Slurm's own
// pass still starts the job). It sets d.nextNudge to when the earliest
// begin time still ahead passes. Only a database error is returned.
func (d *Daemon) nudgeEligible(ctx context.Context, v *View, r *Report) error {
	d.nextNudge = time.Time{}
	if !d.cfg.NudgeEligible {
		return nil
	}
	held := slices.DeleteFunc(d.beginHeld(v), func(h planner.BeginHeld) bool { return d.moving[h.ID] }) // a moved job waits for its exclusion first
	if d.nudged == nil {
		d.nudged = map[string]bool{}
	}
	for id := range d.nudged { // a job that left the hold (started, waits for resources, held again) may be nudged anew
		if !slices.ContainsFunc(held, func(h planner.BeginHeld) bool { return h.ID == id && h.Begin == 0 }) {
			delete(d.nudged, id)
		}
	}
	plan := planner.PlanNudges(held, func(id string) bool { return d.nudged[id] })
	if plan.WakeAt > 0 {
		d.nextNudge = time.Unix(plan.WakeAt, 0).Add(nudgeLag)
	}
	for _, id := range plan.Nudge {
		d.nudged[id] = true
		log := d.log.Named("nudge").With("job_id", id)
		if d.cfg.DryRun {
			log.Info("would nudge Slurm's scheduler for a waiting elastic job whose begin time has passed (dry run)")
			if err := d.decide(ctx, "nudge", id, "", "", 0, "begin time passed (dry run)"); err != nil {
				return err
			}
			continue
		}
		why, err := d.verifyEligible(ctx, v, id)
		if err != nil || why != "" {
			if err != nil {
				log.Error("re-reading the job before nudging it failed; leaving it", "error", err)
			} else {
				log.Debug("not nudging", "why", why)
			}
			d.metrics.Nudges.WithLabelValues("skipped").Inc()
			continue
		}
		if err := d.decide(ctx, "nudge", id, "", "", 0, "begin time passed: "+NudgeStartTime+" so that Slurm schedules it now"); err != nil {
			return err
		}
		if err := d.nudger.Nudge(ctx, id); err != nil {
			log.Error("nudging failed; Slurm's next pass will start the job", "error", err)
			d.metrics.Nudges.WithLabelValues("failed").Inc()
			continue
		}
		d.metrics.Nudges.WithLabelValues("ok").Inc()
		r.Nudged = append(r.Nudged, id)
		log.Info("nudged Slurm's scheduler: the job's begin time has passed")
	}
	return nil
}

// nudgeLag is how long after a begin time (whole seconds, as squeue prints
// it) the daemon looks again: slurmctld stops printing it within the
// second, and the cycle then sees the job eligible.
const nudgeLag = 250 * time.Millisecond

// verifyEligible re-reads job id right before it is nudged and returns why
// it must not be ("" when it may): it must still be a pending elastic job
// of the user the snapshot read, held by its begin time, with its begin
// time passed by slurmctld's clock (squeue prints "N/A"), and alone:
// `squeue --jobs=ID` lists no other record under its id, as it does for a
// job array's tasks (a pending array's record carries the array's id, and
// `scontrol update JobId=ID` changes every task, a task held to a later
// begin time too) and a heterogeneous job's components. A user who moves
// their job's begin time later between the two readings is seen here; one
// who does so in the milliseconds between this reading and the update has
// it set to now (their own job only). err is a failed squeue.
func (d *Daemon) verifyEligible(ctx context.Context, v *View, id string) (string, error) {
	j, why, err := d.reReadJob(ctx, id, "nudging it")
	if why != "" || err != nil {
		return why, err
	}
	i := slices.IndexFunc(v.Pending, func(p slurmcli.Job) bool { return p.ID == id })
	if i < 0 {
		return "the snapshot did not list it waiting", nil
	}
	if why := firstDifference("want",
		fieldCheck{"state", j.State, "PENDING"}, fieldCheck{"reason", j.Reason, "BeginTime"}, fieldCheck{"user", j.User, v.Pending[i].User},
	); why != "" {
		return why, nil
	}
	if _, err := elastic.ParseComment(j.Comment); err != nil {
		return "its comment is no longer an EasyScale request", nil
	}
	if j.StartTime != "" || j.StartUnset != "N/A" {
		return fmt.Sprintf("squeue prints its begin time as %q: not passed", j.StartTime+j.StartUnset), nil
	}
	return "", nil
}

// NudgeWait is the wait before the next cycle after a good one: poll, or
// less when a nudge is due earlier (wakeAt: when the earliest begin time
// of a waiting elastic job passes; zero: none), but at most one such early
// cycle per poll interval (lastEarly: when the last one was due), so that
// however many begin times users set, the daemon runs at most twice as
// many cycles as poll_interval gives. It returns the wait and whether it
// is an early one.
func NudgeWait(poll time.Duration, wakeAt, lastEarly, now time.Time) (time.Duration, bool) {
	if wakeAt.IsZero() {
		return poll, false
	}
	w := max(wakeAt.Sub(now), 0)
	if w >= poll || wakeAt.Sub(lastEarly) < poll {
		return poll, false
	}
	return w, true
}
