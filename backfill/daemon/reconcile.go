package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// reconciled is what reconcile hands to planning: the live extra jobs this
// daemon owns, GPUs lent to other daemons' jobs per user, and jobs that look
// like extra jobs but are not this daemon's (planned as ordinary jobs).
type reconciled struct {
	live      map[string]*lent
	otherLent map[string]int
	foreign   []slurmcli.Job
	// hist holds the elastic jobs' failed lends, by job id, updated with
	// the extra jobs seen ended in this cycle.
	hist map[string]backfillstore.LendHistory
}

// reconcile brings the database in line with Slurm, every cycle (so a
// restart after SIGKILL needs no special path). A recorded extra job is
// found by the job id its sbatch returned, not by its name and comment,
// which its owner may change: one listed out of the extra job form under
// the recorded user and partition is still this daemon's (renamedExtra),
// and is moved in v from the ordinary jobs to v.Extras.
//
//   - a recorded extra job Slurm no longer lists, or lists in a final state,
//     is marked ended with that state (PREEMPTED, COMPLETED, TIMEOUT, ...),
//     and what its end says of lending to its job is recorded (lendEnded:
//     a failure when it ended on its own well before its time limit while
//     its job ran);
//   - a recorded extra job whose parent is not running is cancelled;
//   - a recorded extra job still pending after pending_timeout is cancelled
//     (the gap it was meant for is gone), and counted as a failed lend on
//     its node, or of its job too when Slurm held it for a limit of the
//     job's user, account or QOS (planner.PendingLend.Outcome);
//   - a signalled extra job still there after grace_period is cancelled;
//   - an extra job Slurm lists but the database does not is handled by
//     reconcileUnknown: it is adopted only when it matches a submission
//     intent this daemon wrote before its sbatch (see the ownership rule in
//     the package documentation), and otherwise left alone;
//   - a recorded job, or one whose parent, squeue printed but the snapshot
//     could not read is left as it is for the cycle.
func (d *Daemon) reconcile(ctx context.Context, v *View, r *Report) (reconciled, error) {
	rc := reconciled{live: map[string]*lent{}, otherLent: map[string]int{}}
	recs, err := d.db.ActiveExtras(ctx)
	if err != nil {
		return rc, err
	}
	if rc.hist, err = d.db.LendHistories(ctx); err != nil {
		return rc, err
	}
	intents, err := d.db.Intents(ctx)
	if err != nil {
		return rc, err
	}
	for i := range recs {
		recs[i].UID = v.recordUID(recs[i].User, recs[i].UID)
	}
	for i := range intents {
		intents[i].UID = v.recordUID(intents[i].User, intents[i].UID)
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
		if err := d.reconcileUnknown(ctx, v, id, running, &intents, &rc, r); err != nil {
			return rc, err
		}
	}
	if err := d.expireIntents(ctx, v, intents); err != nil {
		return rc, err
	}
	for _, id := range sortedIDs(v.Lookalikes) {
		x := v.Lookalikes[id]
		d.note(id, x, fmt.Sprintf("name %q and comment %q are not the extra job form %q / \"%s parent=JOBID\"",
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

// note logs at info, once per job and reason, why an extra-looking job is
// left alone.
func (d *Daemon) note(id string, x *ExtraView, why string) {
	if d.noted[id] == why {
		return
	}
	d.noted[id] = why
	log := d.log.Named("reconcile").With("extra_id", id, "job_id", x.Parent, "node", x.Node, "partition", x.Job.Partition,
		"user", x.Job.User)
	log.Info("leaving job alone: "+why, "dry_run", d.cfg.DryRun)
}

// noteOnce calls logf once per job id and reason (the note map: a reason
// logged again after another one is logged again).
func (d *Daemon) noteOnce(id, why string, logf func()) {
	if d.noted[id] == why {
		return
	}
	d.noted[id] = why
	logf()
}

// reconcileKnown reconciles recorded extra job rec: it is found in Slurm
// by its id (the one sbatch returned), in v.Extras when it is still in the
// extra job form, and otherwise among all the jobs Slurm lists when its
// owner renamed it (`scontrol update JobId=ID Name=... Comment=...`; see
// renamedExtra: the same user as recorded), or listed in
// the extra job form with another name, comment or parent than recorded
// (renamed into another extra job's form: its parent is still rec.Parent).
// A renamed one is warned about once and then reconciled exactly as an
// unrenamed one: its GPUs count toward the caps (rc.live), it is cancelled
// when its parent is not running or it stayed pending past
// pending_timeout, and shrunk when the planner says so (the re-read before
// each signal or cancel, verify, checks its id and user only). One its
// owner changed otherwise (moved, more GPUs, other nodes, requeueable, a
// longer limit: extraChanged) is cancelled at once and counts as a failed
// lend. A job of that id listed under another user (compareOwner: by uid,
// or by name for a record without one) is not this daemon's (the id was
// reused): the record ends as for a job Slurm no longer lists, and that
// job is left alone; listed under a stand-in name and a record without a
// uid, it waits (ownerUnknown). (Slurm reuses no id
// it still lists; the same user's job under a recorded id would need the
// ids to wrap round, MaxJobId, while the record is active.)
func (d *Daemon) reconcileKnown(ctx context.Context, v *View, rec backfillstore.ExtraJob, running map[string]bool, rc reconciled, r *Report) error {
	log := d.log.Named("reconcile").With("extra_id", rec.ID, "job_id", rec.Parent, "node", rec.Node)
	if why := unreadable(v, rec); why != nil {
		log.Debug("leaving recorded extra job as it is this cycle: squeue printed a record that cannot be read", "error", why)
		return nil
	}
	x, inSlurm := v.Extras[rec.ID]
	endState := v.Ended[rec.ID]
	recOwner := owner{rec.User, rec.UID}
	if j, listed := v.All[rec.ID]; listed && compareOwner(recOwner, j) == ownerUnknown {
		d.noteOnce(rec.ID, "owner unresolved", func() {
			log.Warn("leaving recorded extra job as it is until squeue prints its owner's name again: it printed "+
				"a stand-in (the name service does not resolve the uid); nothing is done to the job meanwhile",
				"user", rec.User, "printed", j.User)
		})
		return nil
	}
	if inSlurm && compareOwner(recOwner, x.Job) != ownerSame {
		// Another user's: not the job this daemon submitted (renamedExtra's
		// rule); left alone, and the record ends as for a job Slurm no
		// longer lists.
		x, inSlurm = nil, false
	}
	if inSlurm && (x.Job.Name != rec.Name || x.Job.Comment != rec.Comment || x.Parent != rec.Parent) {
		// Renamed by its owner into another extra job's form (e.g. "es-extra
		// parent=OTHER"): still this daemon's extra job of rec.Parent (a
		// tester's finding: read as OTHER's, it outlived its parent).
		d.noteRenamed(rec, x)
		x.Parent = rec.Parent
	}
	if !inSlurm && endState == "" {
		renamed, final, err := d.renamedExtra(v, rec)
		if err != nil {
			log.Debug("leaving recorded extra job as it is this cycle: its owner renamed it and its record cannot be read", "error", err)
			return nil
		}
		if renamed != nil {
			d.noteRenamed(rec, renamed)
			x, inSlurm = renamed, true
		}
		endState = final
	}
	if !inSlurm {
		state := endState
		if state == "" {
			state = "gone (no longer listed by squeue)"
		}
		log.Info("extra job ended", "state", state)
		d.metrics.ExtraEnds.WithLabelValues(firstWord(state)).Inc()
		d.metrics.Reconciled.WithLabelValues("ended").Inc()
		if d.cfg.DryRun {
			return nil
		}
		if err := d.db.MarkEnded(ctx, rec.ID, v.Now, state); err != nil {
			return err
		}
		_, err := d.lendEnded(ctx, v, rec, endState, running[rec.Parent], rc.hist)
		return err
	}
	terms := lendTerms{qos: d.cfg.Extra.QOS, startWithin: d.cfg.PendingTimeout.Duration + d.cfg.PollInterval.Duration + 5*time.Second,
		cpus: cpuShare(v.node(rec.Node), rec.GPUs)}
	if parent, ok := v.All[rec.Parent]; ok && compareOwner(recOwner, parent) == ownerSame {
		// Listed at all, not only as an elastic job: its owner may change
		// its comment so that it no longer reads as one (a helper's way
		// round the account check).
		terms.account = parent.Account
	}
	if why := extraChanged(x, rec, terms); why != "" {
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, rec.ID)
		if ended, err := d.cancelled(ctx, rec, why, true); err != nil || !ended {
			return err
		}
		// A failed lend for the retry rule: an owner who changes each new
		// extra job gets lent less and less often, not once a cycle.
		_, err := d.recordLend(ctx, v, lendFailure{job: rec.Parent, node: rec.Node, extra: rec.ID, gpus: rec.GPUs,
			outcome: planner.LendFailed, reason: "changed", kind: "lend-failed", what: "extra job changed by its owner",
			detail: why}, rc.hist)
		return err
	}
	grace := d.cfg.GracePeriod.Duration
	pending := x.Job.State == "PENDING"
	switch {
	case !running[rec.Parent]:
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, rec.ID)
		return d.cancel(ctx, rec, fmt.Sprintf("parent job %s is not running", rec.Parent), true)
	case pending && v.Now.Sub(rec.Submitted) > d.cfg.PendingTimeout.Duration:
		d.metrics.Reconciled.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, rec.ID)
		why := fmt.Sprintf("still pending (%s) after pending_timeout %v", x.Job.Reason, d.cfg.PendingTimeout)
		if ended, err := d.cancelled(ctx, rec, why, true); err != nil || !ended {
			return err
		}
		_, err := d.recordLend(ctx, v, lendFailure{job: rec.Parent, node: rec.Node, extra: rec.ID, gpus: rec.GPUs,
			outcome: planner.PendingLend{Reason: x.Job.Reason}.Outcome(), reason: "pending", kind: "lend-failed",
			what: "extra job cancelled pending", detail: why}, rc.hist)
		return err
	case rec.State == backfillstore.ExtraSignalled && !v.Now.Before(rec.Signalled.Add(grace)):
		d.metrics.Shrinks.WithLabelValues("cancel").Inc()
		r.Cancelled = append(r.Cancelled, rec.ID)
		return d.cancel(ctx, rec, "still running after the grace period: "+rec.Reason, false)
	}
	l := &lent{rec: rec, view: x, pending: pending, end: x.End}
	if pending || l.end.IsZero() {
		l.end = v.Now.Add(rec.End.Sub(rec.Submitted))
	}
	if rec.State == backfillstore.ExtraSignalled {
		l.end = minTime(l.end, rec.Signalled.Add(grace))
	}
	rc.live[rec.ID] = l
	return nil
}

// renamedExtra returns recorded extra job rec as Slurm lists it when its
// owner took it out of the extra job form (changed its name or comment):
// Slurm lists rec.ID, not in the extra job form (v.Extras and v.Ended do
// not hold it), under the recorded user (in any partition). A
// live one is read as an extra job of rec.Parent and filed in v as one
// (out of v.Running, v.Pending, v.Elastic and v.Lookalikes, into
// v.Extras), so that planning counts its GPUs as lent, not as an ordinary
// job's; a final one returns its state. It returns nil and "" when Slurm
// does not list rec.ID, or lists it under another user: the id was
// reused, the job is not this daemon's. err: its allocation cannot be
// read (v unchanged).
func (d *Daemon) renamedExtra(v *View, rec backfillstore.ExtraJob) (x *ExtraView, final string, err error) {
	j, listed := v.All[rec.ID]
	if !listed || compareOwner(owner{rec.User, rec.UID}, j) != ownerSame {
		return nil, "", nil
	}
	if finalStates[j.State] {
		return nil, j.State, nil
	}
	if x, err = d.snap.extraView(j, rec.Parent); err != nil {
		return nil, "", err
	}
	sameID := func(o slurmcli.Job) bool { return o.ID == j.ID }
	v.Running, v.Pending = slices.DeleteFunc(v.Running, sameID), slices.DeleteFunc(v.Pending, sameID)
	delete(v.Elastic, j.ID)
	delete(v.Lookalikes, j.ID)
	v.Extras[j.ID] = x
	return x, "", nil
}

// noteRenamed warns once per name and comment that the owner of recorded
// extra job rec renamed it (x: as Slurm lists it) and that it stays this
// daemon's extra job.
func (d *Daemon) noteRenamed(rec backfillstore.ExtraJob, x *ExtraView) {
	why := fmt.Sprintf("renamed by its owner: name %q, comment %q", x.Job.Name, x.Job.Comment)
	if d.noted[rec.ID] == why {
		return
	}
	d.noted[rec.ID] = why
	d.log.Named("reconcile").Warn("extra job renamed by its owner; it stays this daemon's extra job (its id is the one "+
		"sbatch returned, its user as recorded): its GPUs count as lent and it is cancelled with its parent",
		"extra_id", rec.ID, "job_id", rec.Parent, "node", rec.Node, "user", rec.User, "name", x.Job.Name, "comment", x.Job.Comment,
		"dry_run", d.cfg.DryRun)
}

// unreadable returns why rec's job or its parent is missing from the view
// because squeue printed a record the snapshot could not read (nil when
// neither is).
func unreadable(v *View, rec backfillstore.ExtraJob) error {
	if err := v.Unreadable[rec.ID]; err != nil {
		return err
	}
	return v.Unreadable[rec.Parent]
}

// reconcileUnknown handles an extra-looking job the database does not
// record. It is this daemon's only when it matches a submission intent
// (matchIntent): the daemon was killed between sbatch and recording the
// job. Then it is adopted (recorded with the intent's user, name, comment
// and partition) and reconciled like any recorded job in the same cycle
// (kept, or cancelled when its parent is gone or it stayed pending too
// long). Any other job is never signalled or cancelled: it is left alone,
// logged once, and counted as GPUs lent to its user when its parent is a
// running elastic job of the same user (another daemon's extra job), or
// planned as an ordinary job.
func (d *Daemon) reconcileUnknown(ctx context.Context, v *View, id string, running map[string]bool, intents *[]backfillstore.Intent,
	rc *reconciled, r *Report) error {
	x := v.Extras[id]
	if x.Job.State == "COMPLETING" {
		return nil // ending by itself
	}
	if _, err := d.db.Extra(ctx, id); err == nil {
		return nil // recorded as ended (we cancelled it); Slurm has not caught up
	} else if !errors.Is(err, backfillstore.ErrNoExtra) {
		return err
	}
	if k := matchIntent(*intents, x, ownerSame); k >= 0 {
		in := (*intents)[k]
		*intents = append((*intents)[:k:k], (*intents)[k+1:]...)
		return d.adopt(ctx, v, id, x, in, running, rc, r)
	}
	if k := matchIntent(*intents, x, ownerUnknown); k >= 0 {
		// Its owner's name does not resolve: the intent is kept from
		// expiring this cycle (taken off the list expireIntents sees), and
		// the job is adopted once the name is printed again.
		in := (*intents)[k]
		*intents = append((*intents)[:k:k], (*intents)[k+1:]...)
		d.noteOnce(id, "intent owner unresolved", func() {
			d.log.Named("reconcile").Warn("not adopting an extra job that matches a submission intent until squeue prints "+
				"its owner's name again (it printed a stand-in: the name service does not resolve the uid)",
				"extra_id", id, "job_id", in.Parent, "node", in.Node, "user", in.User, "printed", x.Job.User)
		})
		rc.foreign = append(rc.foreign, x.Job)
		return nil
	}
	if e := v.Elastic[x.Parent]; e != nil && sameOwner(e.Job, x.Job) {
		rc.otherLent[v.ownerKey(e.Job)] += x.GPUs
	} else {
		rc.foreign = append(rc.foreign, x.Job)
	}
	d.note(id, x, "not submitted by this daemon: no record and no submission intent of this daemon matches it "+
		"(a user's job, another easyscale-backfilld's, or one whose record was lost); it is never signalled or cancelled")
	return nil
}

// matchIntent returns the index of the first submission intent x was
// submitted from (submittedAs) whose owner compares with x's as want
// (compareOwner: ownerSame for the daemon's own job; ownerUnknown for one
// whose owner squeue printed as a stand-in and whose intent has no uid),
// or -1.
func matchIntent(intents []backfillstore.Intent, x *ExtraView, want ownerMatch) int {
	for k, in := range intents {
		if submittedAs(in, x) && compareOwner(owner{in.User, in.UID}, x.Job) == want {
			return k
		}
	}
	return -1
}

// submittedAs reports whether extra job x is as intent in submitted it,
// its owner aside: the same parent, job name, comment, partition and node
// (the node it asked for, or runs on).
func submittedAs(in backfillstore.Intent, x *ExtraView) bool {
	onNode := in.Node == x.Node || in.Node == x.Job.NodeList || in.Node == x.Job.ReqNodes
	return in.Parent == x.Parent && in.Name == x.Job.Name && in.Comment == x.Job.Comment && in.Partition == x.Job.Partition && onNode
}

// intentTTL is how long a submission intent waits to be matched: far longer
// than sbatch takes (its timeout included), so an intent older than this
// belongs to a submission that never reached Slurm.
const intentTTL = 10 * time.Minute

// expireIntents deletes the submission intents left unmatched for intentTTL.
func (d *Daemon) expireIntents(ctx context.Context, v *View, left []backfillstore.Intent) error {
	for _, in := range left {
		if v.Now.Sub(in.Time) < intentTTL || d.cfg.DryRun {
			continue
		}
		d.log.Named("reconcile").Info("dropping a submission intent no job matched (sbatch did not submit it)",
			"job_id", in.Parent, "node", in.Node, "since", in.Time)
		if err := d.db.DeleteIntent(ctx, in.Seq); err != nil {
			return err
		}
	}
	return nil
}

// adopt records an unrecorded extra job submitted from intent in, then
// reconciles it as a recorded one: it is held to the GPUs and time limit
// the intent lent, so what its owner changed while the daemon was down is
// found as for any recorded job (extraChanged).
func (d *Daemon) adopt(ctx context.Context, v *View, id string, x *ExtraView, in backfillstore.Intent, running map[string]bool,
	rc *reconciled, r *Report) error {
	// An intent written before schema version 10 has no uid: the job
	// matched it by name, so the uid squeue prints for it is its owner's.
	rec := backfillstore.ExtraJob{ID: id, Parent: in.Parent, User: in.User, UID: cmp.Or(in.UID, x.Job.UID), Partition: in.Partition, Node: in.Node,
		GPUType: nodeType(v, in.Node), GPUs: in.GPUs, Submitted: in.Time, End: in.Time.Add(in.Lent), Lent: in.Lent,
		State: backfillstore.ExtraSubmitted, Reason: "adopted after a restart", Adopted: true, Name: in.Name, Comment: in.Comment}
	if in.Lent <= 0 || in.GPUs <= 0 {
		// An intent written before schema version 9 says neither: the job
		// is taken as Slurm shows it.
		rec.GPUs, rec.End = x.GPUs, x.End
		if rec.GPUs == 0 {
			if g, err := slurmcli.ParseGRES(x.Job.TRESPerNode); err == nil {
				rec.GPUs = slurmcli.GPUs(g)
			}
		}
		if rec.End.IsZero() {
			rec.End = v.Now
		}
	}
	d.log.Named("reconcile").Warn("adopting extra job found in Slurm but not in the database: it matches the submission "+
		"intent this daemon wrote before its sbatch (expected after a crash between sbatch and the database write)",
		"extra_id", id, "job_id", x.Parent, "node", in.Node, "gpus", rec.GPUs, "dry_run", d.cfg.DryRun)
	d.metrics.Reconciled.WithLabelValues("adopt").Inc()
	r.Adopted = append(r.Adopted, id)
	if err := d.decide(ctx, "adopt", x.Parent, id, in.Node, rec.GPUs, "extra job of a submission intent"); err != nil {
		return err
	}
	if d.cfg.DryRun {
		return nil
	}
	if err := d.db.RecordExtra(ctx, rec); err != nil {
		return err
	}
	if err := d.db.DeleteIntent(ctx, in.Seq); err != nil {
		return err
	}
	return d.reconcileKnown(ctx, v, rec, running, *rc, r)
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
