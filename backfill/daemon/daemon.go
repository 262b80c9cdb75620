package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Options are what New needs. Config, DB and Logger are required.
type Options struct {
	Config *config.Config
	// Slurm runs the client commands (the zero Runner: PATH and this
	// process's environment, so SLURM_CONF is inherited).
	Slurm slurmcli.Runner
	// DB is the daemon's own store (backfillstore.Open); New does not
	// close it.
	DB     *backfillstore.DB
	Logger hclog.Logger
	// Actuator applies decisions; nil: a SlurmActuator over Slurm, with
	// --uid when the daemon runs as root.
	Actuator Actuator
	// Resizer shrinks running elastic jobs for shrink-to-admit; nil: a
	// SlurmResizer over Slurm.
	Resizer Resizer
	// Nudger nudges Slurm's scheduler for eligible waiting elastic jobs;
	// nil: SlurmNudger over Slurm.
	Nudger Nudger
	// Shedder releases the nodes a running job does not use
	// (shed_slow_nodes); nil: SlurmShedder over Slurm.
	Shedder Shedder
	// Excluder changes pending jobs' excluded nodes (keep_off_pinned);
	// nil: SlurmExcluder over Slurm.
	Excluder Excluder
	// Mover requeues running jobs (move_to_faster); nil: SlurmMover over
	// Slurm.
	Mover Mover
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Metrics; nil: NewMetrics().
	Metrics *Metrics
	// After waits between cycles and probes; nil: time.After (tests
	// shorten the waits).
	After func(time.Duration) <-chan time.Time
	// UserID returns the uid of a job's user (squeue's name); nil: the
	// system's user database (Snapshotter.UserID).
	UserID func(name string) (uint32, error)
}

// Daemon is easyscale-backfilld: it runs cycles of snapshot → reconcile →
// planner.Plan → shrink → shrink-to-admit → grow (see the package
// documentation).
type Daemon struct {
	cfg     *config.Config
	db      *backfillstore.DB
	log     hclog.Logger
	act     Actuator
	resize  Resizer
	nudger  Nudger
	shedder Shedder
	// excluder sets pending jobs' excluded nodes (keep_off_pinned,
	// keepoff.go); keepOffTried maps a job to the list last logged in a dry
	// run (once per list) or refused by Slurm (tried again after
	// keepOffRetry).
	excluder     Excluder
	keepOffTried map[string]keepOffTry
	// keepOffWhy is the last reason logged, by job id, why a pending
	// elastic job was not kept off (noteKeepOffWhy).
	keepOffWhy map[string]string
	// admitWhy is the set of reasons the last cycle logged why queued
	// jobs were not admitted (noteAdmitWhy).
	admitWhy map[string]bool
	// mover requeues running jobs to move them to faster GPUs
	// (move_to_faster, move.go); moveTried marks the jobs whose move a dry
	// run logged (once per job); moving the requeued jobs whose excluded
	// nodes are not set yet, which nudge_eligible leaves alone.
	mover     Mover
	moveTried map[string]bool
	moving    map[string]bool
	// drainView and drainBound are the last view the work bound was
	// read from (drain_horizon, drain.go) and that bound: admission and
	// start-small read it from the same view once.
	drainView  *View
	drainBound *planner.Drain
	// shed: releasing slow nodes is on (shed_slow_nodes, where the Slurm
	// series allows it; shed.go).
	shed bool
	// shedTried holds "job/node list" of every release tried (shed.go).
	shedTried map[string]bool
	// mixedShrinkSafe: the Slurm series (read at start) is one of
	// MixedShrinkSafeSeries, so a job on more than one GPU type may be shrunk.
	mixedShrinkSafe bool
	now             func() time.Time
	metrics         *Metrics
	snap            *Snapshotter
	after           func(time.Duration) <-chan time.Time
	// nextShrink is when the earliest shrink the last good cycle scheduled
	// needs a cycle (signal or cancel time); zero when none.
	nextShrink time.Time
	// noted maps extra-looking jobs left alone, and recorded ones left as
	// they are, to the reason last logged (each is logged once per reason).
	noted map[string]string
	// unreadable maps the jobs whose squeue record could not be read to
	// the error last logged (each is warned about once while it is listed).
	unreadable map[string]string
	// notReady maps the running elastic jobs that are not ready to the
	// reason last logged (noteNotReady).
	notReady map[string]string
	// mismatchesLogged is the last set of configMismatches logged, one per
	// line ("" none).
	mismatchesLogged string
	// manyRecords holds the ids a re-read found shared by several records
	// (a job array's tasks, a heterogeneous job's components), true once
	// warned about (reReadJob, forgetManyRecords).
	manyRecords map[string]bool
	// weightsUnread, placementsUnread (the running jobs'),
	// pendingPlacementsUnread (the pending jobs', with their priorities),
	// bfIntervalUnread and reservationsUnread log, once each while it
	// fails, that the View's input of that name could not be read.
	weightsUnread, placementsUnread, pendingPlacementsUnread, bfIntervalUnread, reservationsUnread unreadNote
	// seenWaiting maps each pending job to when a cycle first saw it
	// waiting (noteWaiting), for the hold on jobs Slurm has not planned.
	seenWaiting map[string]time.Time
	// nudged holds the waiting elastic jobs nudged while they stay held by
	// their begin time (nudge.go); nextNudge is when the earliest begin time
	// still ahead passes (zero: none), lastEarly when the last cycle run
	// early for one was due (NudgeWait).
	nudged               map[string]bool
	nextNudge, lastEarly time.Time

	mu          sync.Mutex
	metricsAddr net.Addr
}

// New checks the options and returns a daemon; it starts nothing.
func New(o Options) (*Daemon, error) {
	if o.Config == nil || o.DB == nil || o.Logger == nil {
		return nil, errors.New("backfill daemon: Config, DB and Logger are required")
	}
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("backfill daemon: %w", err)
	}
	d := &Daemon{cfg: o.Config, db: o.DB, log: o.Logger, act: o.Actuator, now: o.Now, metrics: o.Metrics,
		snap: &Snapshotter{Slurm: o.Slurm, Config: o.Config, UserID: o.UserID}, noted: map[string]string{}, unreadable: map[string]string{}, notReady: map[string]string{}, keepOffTried: map[string]keepOffTry{}}
	if d.act == nil {
		d.act = &SlurmActuator{Slurm: o.Slurm, AsRoot: os.Geteuid() == 0}
	}
	if d.resize = o.Resizer; d.resize == nil {
		d.resize = &SlurmResizer{Slurm: o.Slurm}
	}
	if d.nudger = o.Nudger; d.nudger == nil {
		d.nudger = &SlurmNudger{Slurm: o.Slurm}
	}
	if d.shedder = o.Shedder; d.shedder == nil {
		d.shedder = &SlurmShedder{Slurm: o.Slurm}
	}
	if d.excluder = o.Excluder; d.excluder == nil {
		d.excluder = &SlurmExcluder{Slurm: o.Slurm}
	}
	if d.mover = o.Mover; d.mover == nil {
		d.mover = &SlurmMover{Slurm: o.Slurm}
	}
	series, err := o.Slurm.Series(context.Background())
	if d.shed = o.Config.ShedSlowNodes; d.shed {
		if err := checkShedSupported(series, err); err != nil {
			switch {
			case o.Config.ShedSlowNodesDefaulted():
				d.shed = false
				args := []any{"slurm_series", series, "safe_series", strings.Join(MixedShrinkSafeSeries, ",")}
				if err != nil {
					args = append(args, "error", err)
				}
				d.log.Info("releasing slow nodes (shed_slow_nodes) is off on this Slurm: its default is on only where it was run", args...)
			case !o.Config.DryRun:
				return nil, fmt.Errorf("backfill daemon: %w", err)
			default:
				d.log.Warn("shed_slow_nodes = true would be refused on this Slurm; the dry run logs what it would release", "error", err)
			}
		}
	}
	if err != nil {
		d.log.Warn("jobs on more than one GPU type will not be shrunk to admit others", "error", err)
	} else if d.mixedShrinkSafe = mixedShrinkSafe(series); !d.mixedShrinkSafe {
		d.log.Info("jobs on more than one GPU type will not be shrunk to admit others: slurmctld crashed after such a shrink on 24.11.5",
			"slurm_series", series, "safe_series", strings.Join(MixedShrinkSafeSeries, ","))
	}
	if d.now == nil {
		d.now = time.Now
	}
	d.after = o.After
	if d.after == nil {
		d.after = time.After
	}
	if d.metrics == nil {
		d.metrics = NewMetrics()
	}
	return d, nil
}

// Metrics returns the daemon's Prometheus series.
func (d *Daemon) Metrics() *Metrics { return d.metrics }

// MetricsAddr returns the address /metrics listens on once Run has started
// it (nil before, or when disabled).
func (d *Daemon) MetricsAddr() net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.metricsAddr
}

// Run serves /metrics (unless metrics_address is "off") and runs cycles until
// ctx is done, then returns nil. A failed cycle (Slurm unreachable, a
// command or database error) changes nothing it has not finished and is
// logged with the error. While slurmctld does not answer, Run probes it
// with `scontrol ping` every poll_interval and runs a full cycle as soon as
// it answers; after other failures the next cycle waits poll_interval
// doubled per consecutive failure up to max_backoff (Backoff), but never
// past the time the earliest scheduled shrink needs a cycle (RetryWait), so
// backoff never makes a shrink late. Run returns an error only when the
// metrics address cannot be listened on.
func (d *Daemon) Run(ctx context.Context) error {
	if d.cfg.MetricsEnabled() {
		stop, err := d.serveMetrics()
		if err != nil {
			return err
		}
		defer stop()
	}
	d.log.Info("started", "poll_interval", d.cfg.PollInterval, "dry_run", d.cfg.DryRun,
		"state_db", d.db.Path(), "extra_partition", d.cfg.Extra.Partition)
	poll := d.cfg.PollInterval.Duration
	failures := 0
	for {
		wait, probe := poll, false
		_, err := d.safeCycle(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			failures++
			probe = errors.Is(err, ErrUnreachable)
			if !probe {
				wait = RetryWait(poll, d.cfg.MaxBackoff.Duration, failures, d.nextShrink, d.now())
			}
			d.log.Error("cycle failed; state kept, retrying", "error", err, "failures", failures, "retry_in", wait.String(),
				"probing", probe)
		case failures > 0:
			d.log.Info("cycle succeeded again", "after_failures", failures)
			failures = 0
		}
		if err == nil && ctx.Err() == nil {
			var early bool
			if wait, early = NudgeWait(poll, d.nextNudge, d.lastEarly, d.now()); early {
				d.lastEarly = d.nextNudge
			}
		}
		if !d.waitNext(ctx, wait, probe) {
			d.log.Info("stopping", "reason", ctx.Err())
			return nil
		}
	}
}

// waitNext waits wait (false when ctx ends first). While probing it waits
// one poll interval at a time and returns as soon as `scontrol ping`
// answers, however long the outage lasted.
func (d *Daemon) waitNext(ctx context.Context, wait time.Duration, probe bool) bool {
	select {
	case <-ctx.Done():
		return false
	case <-d.after(wait):
	}
	for probe {
		err := d.snap.Ping(ctx)
		if err == nil {
			d.log.Info("slurmctld answers again; running a cycle now")
			return true
		}
		d.log.Debug("slurmctld still unreachable", "error", err, "retry_in", wait.String())
		select {
		case <-ctx.Done():
			return false
		case <-d.after(wait):
		}
	}
	return true
}

// Backoff returns the wait before retry number failures (≥ 1): poll, then
// doubled per further failure, at most maxWait.
func Backoff(poll, maxWait time.Duration, failures int) time.Duration {
	w := poll
	for i := 1; i < failures && w < maxWait; i++ {
		w *= 2
	}
	return min(w, maxWait)
}

// RetryWait is the wait before the next cycle after failures (≥ 1)
// consecutive failed cycles that slurmctld answered: Backoff, but at most
// until shrinkDue (when the earliest scheduled shrink needs a cycle; zero:
// none) and never below poll.
func RetryWait(poll, maxWait time.Duration, failures int, shrinkDue, now time.Time) time.Duration {
	w := Backoff(poll, maxWait, failures)
	if !shrinkDue.IsZero() {
		w = min(w, max(poll, shrinkDue.Sub(now)))
	}
	return w
}

func (d *Daemon) serveMetrics() (stop func(), err error) {
	ln, err := net.Listen("tcp", d.cfg.MetricsAddress)
	if err != nil {
		return nil, fmt.Errorf("serving metrics on %s (metrics_address): %w", d.cfg.MetricsAddress, err)
	}
	d.mu.Lock()
	d.metricsAddr = ln.Addr()
	d.mu.Unlock()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.metrics.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	d.log.Info("serving metrics", "address", ln.Addr().String())
	return func() { srv.Close() }, nil
}

// safeCycle runs one cycle and turns a panic into an error with its stack
// logged: the cycle is the daemon's unit of work.
func (d *Daemon) safeCycle(ctx context.Context) (r Report, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("cycle panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("cycle panicked: %v", p)
			d.metrics.Cycles.WithLabelValues("error").Inc()
		}
	}()
	return d.Cycle(ctx)
}

// Report summarises one cycle.
type Report struct {
	// Gaps counts nodes with lendable idle GPUs; IdleGPUs their GPUs.
	Gaps, IdleGPUs int
	// Submitted lists the extra jobs submitted (ids; empty in dry-run).
	Submitted []string
	// Signalled and Cancelled list extra jobs ended by shrinks or
	// reconciliation; Adopted those taken over.
	Signalled, Cancelled, Adopted []string
	// Admitted lists the queued jobs shrink-to-admit made room for;
	// AdmitShrunk the running elastic jobs it shrank for them.
	Admitted, AdmitShrunk []string
	// StartedSmall lists the queued elastic jobs start-small lowered to
	// the nodes idle now ([start_small]); StartSmallRestored the jobs
	// started small whose owner set the node count back, whose raised
	// time limit was put back (followStartedSmall).
	StartedSmall, StartSmallRestored []string
	// Held lists the running elastic jobs not grown this cycle because
	// their extra jobs failed ([retry]: waiting out a backoff, or stopped
	// until their status changes).
	Held []string
	// Nudged lists the waiting elastic jobs whose begin time had passed
	// that the cycle nudged ([nudge_eligible]).
	Nudged []string
	// Shed lists the running elastic jobs whose unused slow nodes the cycle
	// released (shed_slow_nodes).
	Shed []string
	// KeptOff lists the pending elastic jobs whose excluded nodes the cycle
	// changed (keep_off_pinned): kept off, or put back.
	KeptOff []string
	// Moved lists the running elastic jobs the cycle requeued to move them
	// to faster GPUs (move_to_faster); MoveRestored the moved jobs whose
	// owner's excluded nodes it put back.
	Moved, MoveRestored []string
	// AdmitAsked is the shrink-to-admit question the cycle put to the
	// planner (planner.AdmitOnNodes), nil when it asked none (admit off, no
	// job waiting for resources where it is on, or a shrink recorded before
	// a restart was finished); AdmitDecided the planner's answer, nil for
	// no admission. StartSmallAsked and StartSmallDecided are the same for
	// start-small (planner.StartSmallOnNodes). A recording carries them,
	// and the simulator replays them (simulator.ReplayAdmit,
	// ReplayStartSmall).
	AdmitAsked        *planner.NodeAdmitInput
	AdmitDecided      *planner.NodeAdmission
	StartSmallAsked   *planner.NodeStartSmallInput
	StartSmallDecided *planner.NodeStartSmall
	// Snapshot is what the planner was given (the cluster as this cycle
	// read it); Planned is the planner's output, which the cycle applied as
	// it is, except that a cycle that applied a shrink-to-admit or a
	// start-small lends nothing (it read the cluster before): the grows
	// are then moved to Withheld; and that a trade up (Shrink.Trade) whose
	// replacement extra jobs were withheld or refused ends nothing: its
	// shrinks stay in Planned (the planner's output, which a recording
	// replays) and are listed in Untraded.
	Snapshot planner.Snapshot
	Planned  planner.Actions
	Withheld []planner.Grow
	Untraded []planner.Shrink
	// ElasticJobs counts the running elastic jobs; LentGPUs the GPUs of
	// this daemon's live extra jobs.
	ElasticJobs, LentGPUs int
}

// fields returns the report as log key-value pairs.
func (r Report) fields(dryRun bool) []any {
	return []any{"gaps", r.Gaps, "idle_gpus", r.IdleGPUs, "elastic_jobs", r.ElasticJobs, "lent_gpus", r.LentGPUs,
		"grows", len(r.Planned.Grows), "shrinks", len(r.Planned.Shrinks) - len(r.Untraded), "untraded", len(r.Untraded), "submitted", len(r.Submitted),
		"signalled", len(r.Signalled), "cancelled", len(r.Cancelled), "adopted", len(r.Adopted), "admitted", len(r.Admitted), "started_small", len(r.StartedSmall), "held", len(r.Held), "nudged", len(r.Nudged), "shed", len(r.Shed), "kept_off", len(r.KeptOff), "moved", len(r.Moved), "dry_run", dryRun}
}

// Cycle runs one cycle: snapshot, reconcile, plan, shrink, grow. Errors
// wrap ErrUnreachable when slurmctld does not answer; nothing is changed
// then.
func (d *Daemon) Cycle(ctx context.Context) (Report, error) {
	start := time.Now()
	var r Report
	err := d.cycle(ctx, &r)
	d.metrics.CycleSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		d.metrics.Cycles.WithLabelValues("error").Inc()
		if errors.Is(err, ErrUnreachable) {
			d.metrics.SlurmFailures.Inc()
		}
		return r, err
	}
	d.metrics.Cycles.WithLabelValues("ok").Inc()
	return r, nil
}

func (d *Daemon) cycle(ctx context.Context, r *Report) error {
	now := d.now()
	v, err := d.snap.Snapshot(ctx, now)
	if err != nil {
		return fmt.Errorf("taking snapshot: %w", err)
	}
	d.warnUnreadable(v)
	d.noteNotReady(v)
	d.warnConfigMismatches(v)
	d.forgetManyRecords(v)
	rc, err := d.reconcile(ctx, v, r)
	if err != nil {
		return fmt.Errorf("reconciling with Slurm: %w", err)
	}
	for _, j := range rc.foreign { // not ours: planned like any other job
		switch j.State {
		case "RUNNING":
			v.Running = append(v.Running, j)
		case "PENDING":
			v.Pending = append(v.Pending, j)
		}
	}
	verdicts, err := d.lendVerdicts(ctx, v, rc.hist)
	if err != nil {
		return fmt.Errorf("applying the retry rule to failed extra jobs: %w", err)
	}
	for _, job := range sortedIDs(verdicts) {
		if verdicts[job].Held(v.Now.Unix()) {
			r.Held = append(r.Held, job)
		}
	}
	d.noteWaiting(v)
	if err := d.keepOff(ctx, v, r); err != nil {
		return fmt.Errorf("keeping jobs off pinned GPU types (keep_off_pinned): %w", err)
	}
	if err := d.followMoved(ctx, v, r); err != nil {
		return fmt.Errorf("following the jobs moved to faster GPUs (move_to_faster): %w", err)
	}
	started, err := d.followStartedSmall(ctx, v, r)
	if err != nil {
		return fmt.Errorf("following the jobs started small (start_small): %w", err)
	}
	if err := d.nudgeEligible(ctx, v, r); err != nil {
		return fmt.Errorf("nudging eligible jobs: %w", err)
	}
	added, err := d.excludedByDaemon(ctx, v)
	if err != nil {
		return fmt.Errorf("reading what this daemon excluded of the running jobs: %w", err)
	}
	ps := d.plannerSnapshot(v, rc.live, verdicts, added)
	ps.OtherLent = rc.otherLent
	for _, n := range ps.Nodes {
		if n.Idle > 0 {
			r.Gaps++
			r.IdleGPUs += n.Idle
		}
	}
	d.metrics.GapsFound.Add(float64(r.Gaps))
	d.metrics.IdleGPUs.Set(float64(r.IdleGPUs))
	t0 := time.Now()
	acts, err := planner.Plan(ps)
	d.metrics.PlanSeconds.Observe(time.Since(t0).Seconds())
	if err != nil {
		return fmt.Errorf("planning: %w", err)
	}
	r.Snapshot, r.Planned = ps, acts
	shrinks, trades := splitTrades(acts.Shrinks)
	if err := d.shrink(ctx, v, shrinks, rc.live, r); err != nil {
		return err
	}
	d.nextShrink = d.shrinkDue(shrinks, rc.live)
	// Shrink-to-admit and start-small both read the records of shrinks to
	// admit (what to resume; what a raised time limit holds); read once.
	var records []backfillstore.AdmitShrink
	if d.cfg.Admit.Enabled || d.cfg.StartSmallRule() != planner.StartSmallOff {
		if records, err = d.db.AdmitShrinks(ctx); err != nil {
			return fmt.Errorf("reading the shrink-to-admit records: %w", err)
		}
		for i := range records {
			records[i].UID = v.recordUID(records[i].User, records[i].UID)
		}
	}
	admitted, err := d.admit(ctx, v, rc.live, records, r)
	if err != nil {
		return fmt.Errorf("shrink-to-admit: %w", err)
	}
	if !admitted {
		if admitted, err = d.startSmall(ctx, v, rc.live, records, started, r); err != nil {
			return fmt.Errorf("start-small: %w", err)
		}
	}
	if !admitted {
		if admitted, err = d.shedSlow(ctx, v, ps, r); err != nil {
			return fmt.Errorf("releasing slow nodes: %w", err)
		}
	}
	if !admitted {
		if admitted, err = d.moveToFaster(ctx, v, ps, rc.live, r); err != nil {
			return fmt.Errorf("moving jobs to faster GPUs (move_to_faster): %w", err)
		}
	}
	if admitted {
		r.Withheld, r.Planned.Grows = r.Planned.Grows, nil // allocations changed: lend on the next cycle's reading
	}
	submitted := len(r.Submitted)
	if err := d.grow(ctx, v, r.Planned.Grows, rc, r); err != nil {
		return err
	}
	due := tradesDue(trades, r, rc.live, submitted, d.cfg.DryRun)
	for _, sh := range trades {
		if !slices.Contains(due, sh) {
			r.Untraded = append(r.Untraded, sh)
		}
	}
	if len(due) > 0 {
		if err := d.shrink(ctx, v, due, rc.live, r); err != nil {
			return err
		}
		d.nextShrink = d.shrinkDue(append(shrinks, due...), rc.live)
	}
	lentGPUs := 0
	for _, l := range rc.live {
		lentGPUs += l.rec.GPUs
	}
	d.metrics.GPUsLent.Set(float64(lentGPUs))
	r.LentGPUs, r.ElasticJobs = lentGPUs, len(v.Elastic)
	if err := d.prune(ctx, v); err != nil {
		return fmt.Errorf("pruning state_db ([retention]): %w", err)
	}
	// read_at: when the cycle began to read Slurm, before its squeue (what
	// it decided could not know of a job submitted after)
	d.log.Debug("cycle done", append(r.fields(d.cfg.DryRun), "read_at", now.Format(time.RFC3339Nano))...)
	return nil
}

// decide records a decision; a database error is returned (the cycle stops
// and is retried).
func (d *Daemon) decide(ctx context.Context, kind, job, extra, node string, gpus int, detail string) error {
	return d.db.RecordDecision(ctx, backfillstore.Decision{Time: d.now(), Kind: kind, Job: job, Extra: extra,
		Node: node, GPUs: gpus, DryRun: d.cfg.DryRun, Detail: detail})
}

// warnUnreadable logs one warning per job whose record squeue printed but
// the snapshot could not read, naming the job id, while the job is listed;
// the cycle goes on without it. The nodes' weights and the running jobs'
// placements that cannot be read are warned about once each until they
// read again.
func (d *Daemon) warnUnreadable(v *View) {
	for id, err := range v.Unreadable {
		if d.unreadable[id] == err.Error() {
			continue
		}
		d.unreadable[id] = err.Error()
		d.log.Named("snapshot").Warn("skipping a job squeue printed that cannot be read; the cycle goes on without it",
			"job_id", id, "error", err)
	}
	for id, err := range v.BadRequests {
		if d.unreadable[id] == err.Error() {
			continue
		}
		d.unreadable[id] = err.Error()
		d.log.Named("snapshot").Warn("a running job's EasyScale request cannot be read; the job is not grown until its comment is fixed",
			"job_id", id, "user", v.All[id].User, "error", err)
	}
	for id := range d.unreadable {
		if v.Unreadable[id] == nil && v.BadRequests[id] == nil {
			delete(d.unreadable, id)
		}
	}
	log := d.log.Named("snapshot")
	d.weightsUnread.note(log, v.WeightsUnread, v.Placements != nil,
		"the nodes' scheduling weights cannot be read; this cycle predicts placements as if they were equal", "")
	d.placementsUnread.note(log, v.RunningPlacementsUnread, v.RunningPlacements != nil,
		"the running jobs' excluded nodes and features cannot be read; no job is grown until they can",
		"the running jobs' excluded nodes and features read again")
	d.pendingPlacementsUnread.note(log, v.PendingPlacementsUnread, v.Placements != nil,
		"the pending jobs' excluded nodes, features and priorities cannot be read; no job is admitted by a shrink, started small or kept off a GPU type until they can",
		"the pending jobs' excluded nodes, features and priorities read again")
	d.bfIntervalUnread.note(log, v.BackfillIntervalUnread, v.BackfillInterval > 0,
		"Slurm's bf_interval cannot be read; shrink-to-admit counts on Slurm's default, 30 s, for when an admitted job starts",
		"Slurm's bf_interval read again", "bf_interval", v.BackfillInterval)
	d.reservationsUnread.note(log, v.ReservationsUnread, v.Reservations != nil,
		"Slurm's advance reservations cannot be read; no job is grown, admitted by a shrink or started small until they can",
		"Slurm's advance reservations read again")
}

// verify re-reads extra job rec.ID from Slurm by id (squeue --jobs=ID,
// fresh random separators) right before it is signalled or cancelled and
// checks that Slurm's job of that id is still the one this daemon
// submitted: the id sbatch returned, under the recorded user (its uid, in
// a record that has one: compareOwner). Its name,
// comment and partition are its owner's to change and are not compared: a
// tester who renamed a job faster than the cycle (hundreds of `scontrol
// update Name=` a second) refused every cancel that expected the name the
// snapshot read, and the job outlived its parent; a job listed under
// another user is not the one submitted (Slurm reuses no id it still
// lists; the same user's job under a recorded id would need the ids to
// wrap round, MaxJobId, while the record is active). It returns gone=true
// when Slurm no longer knows the id, and a non-empty mismatch naming the
// difference; err is a failed squeue.
func (d *Daemon) verify(ctx context.Context, rec backfillstore.ExtraJob) (gone bool, mismatch string, err error) {
	j, why, err := d.reReadJob(ctx, rec.ID, "acting on it")
	switch {
	case err != nil:
		return false, "", err
	case why == unknownJob:
		return true, "", nil
	case why != "":
		return false, why, nil
	}
	if compareOwner(owner{rec.User, rec.UID}, j) != ownerSame {
		return false, fmt.Sprintf("its owner is %q (uid %s), recorded %q (uid %q)", j.User, j.UID, rec.User, rec.UID), nil
	}
	return false, "", nil
}

// checkOwned runs verify and says whether the daemon may act on rec now:
// a job Slurm no longer knows, or one that is not what was submitted (a
// mismatch, logged once as an error), is not acted on.
func (d *Daemon) checkOwned(ctx context.Context, rec backfillstore.ExtraJob, action string) (ok, gone bool, err error) {
	gone, mismatch, err := d.verify(ctx, rec)
	if err != nil || gone {
		return false, gone, err
	}
	if mismatch != "" {
		why := "not " + action + ": Slurm's job " + rec.ID + " is not the extra job this daemon submitted (" + mismatch + ")"
		if d.noted[rec.ID] != why {
			d.noted[rec.ID] = why
			d.log.Named("actuator").Error(why, "extra_id", rec.ID, "job_id", rec.Parent, "node", rec.Node, "user", rec.User)
		}
		return false, false, nil
	}
	return true, false, nil
}

// cancel cancels recorded extra job rec (unless dry-run), after checking in
// Slurm that the job of that id is still the one submitted (checkOwned),
// and records why; ended marks the record ended at once (for jobs that
// never ran or whose parent is gone), also when Slurm no longer knows it.
func (d *Daemon) cancel(ctx context.Context, rec backfillstore.ExtraJob, reason string, ended bool) error {
	_, err := d.cancelled(ctx, rec, reason, ended)
	return err
}

// cancelled is cancel, also reporting whether the extra job is now
// recorded as ended (false in a dry run, when ended is false, or when the
// cancel failed and is retried next cycle).
func (d *Daemon) cancelled(ctx context.Context, rec backfillstore.ExtraJob, reason string, ended bool) (bool, error) {
	id := rec.ID
	log := d.log.Named("actuator").With("extra_id", id, "job_id", rec.Parent, "node", rec.Node)
	log.Info("cancelling extra job", "reason", reason, "dry_run", d.cfg.DryRun)
	if err := d.decide(ctx, "cancel", rec.Parent, id, rec.Node, 0, reason); err != nil {
		return false, err
	}
	if d.cfg.DryRun {
		return false, nil
	}
	ok, gone, err := d.checkOwned(ctx, rec, "cancelling")
	if err != nil {
		log.Error("cancel failed; retrying next cycle", "error", err)
		return false, nil
	}
	if ok {
		if err := d.act.Cancel(ctx, id); err != nil {
			log.Error("cancel failed; retrying next cycle", "error", err)
			return false, nil
		}
	}
	if !ended || (!ok && !gone) {
		return false, nil
	}
	if err := d.db.MarkEnded(ctx, id, d.now(), "cancelled: "+reason); err != nil && !errors.Is(err, backfillstore.ErrNoExtra) {
		return false, err
	}
	return true, nil
}

// shrink applies the planner's shrinks: SIGTERM once now + grace_period +
// 2·poll_interval reaches the deadline, scancel once the grace period is
// over or the deadline has come. With cycles every poll_interval the signal
// goes out in [deadline − grace − 2·poll, deadline − grace − poll), so the
// first cycle after the grace period, and with it the scancel, comes before
// the deadline. A pending extra job is cancelled at once.
func (d *Daemon) shrink(ctx context.Context, v *View, shrinks []planner.Shrink, live map[string]*lent, r *Report) error {
	grace, poll := d.cfg.GracePeriod.Duration, d.cfg.PollInterval.Duration
	for _, sh := range shrinks {
		l := live[sh.Extra]
		if l == nil {
			continue
		}
		deadline := time.Unix(sh.Deadline, 0)
		reason := sh.Reason
		if reason == "" {
			reason = fmt.Sprintf("reservation at %s needs node %s", time.Unix(sh.Reservation, 0).Format(time.RFC3339), sh.Node)
		}
		log := d.log.Named("actuator").With("extra_id", sh.Extra, "job_id", sh.Job, "node", sh.Node)
		switch {
		case l.rec.State == backfillstore.ExtraSignalled:
			if v.Now.Before(l.rec.Signalled.Add(grace)) && v.Now.Before(deadline) {
				continue
			}
			d.metrics.Shrinks.WithLabelValues("cancel").Inc()
			r.Cancelled = append(r.Cancelled, sh.Extra)
			if err := d.cancel(ctx, l.rec, "grace period over: "+reason, false); err != nil {
				return err
			}
		case l.pending:
			d.metrics.Shrinks.WithLabelValues("cancel").Inc()
			r.Cancelled = append(r.Cancelled, sh.Extra)
			if err := d.cancel(ctx, l.rec, "not started: "+reason, true); err != nil {
				return err
			}
		case v.Now.Add(grace + 2*poll).Before(deadline):
			log.Debug("shrink scheduled", "deadline", deadline, "signal_at", deadline.Add(-grace-2*poll))
		default:
			log.Info("shrinking: signalling extra job", "deadline", deadline, "reason", reason, "dry_run", d.cfg.DryRun)
			d.metrics.Shrinks.WithLabelValues("signal").Inc()
			if sh.Trade {
				d.metrics.Trades.Inc()
			}
			r.Signalled = append(r.Signalled, sh.Extra)
			if err := d.decide(ctx, "signal", sh.Job, sh.Extra, sh.Node, l.rec.GPUs, reason); err != nil {
				return err
			}
			if d.cfg.DryRun {
				continue
			}
			if ok, _, err := d.checkOwned(ctx, l.rec, "signalling"); err != nil || !ok {
				if err != nil {
					log.Error("signal failed; retrying next cycle", "error", err)
				}
				continue
			}
			if err := d.act.Signal(ctx, sh.Extra); err != nil {
				log.Error("signal failed; retrying next cycle", "error", err)
				continue
			}
			if err := d.db.MarkSignalled(ctx, sh.Extra, v.Now, reason); err != nil {
				return err
			}
		}
	}
	return nil
}

// splitTrades separates the shrinks that trade a job's extra jobs up
// (planner: tradeup.go; no reservation asks for them) from the others.
func splitTrades(all []planner.Shrink) (shrinks, trades []planner.Shrink) {
	for _, sh := range all {
		if sh.Trade {
			trades = append(trades, sh)
		} else {
			shrinks = append(shrinks, sh)
		}
	}
	return shrinks, trades
}

// tradesDue returns the trade shrinks whose job got its replacement
// extra jobs this cycle: as many GPUs submitted for it (r.Submitted from
// index submitted on; in a dry run, the grows planned and not withheld)
// as the trade ends. A trade whose grows were withheld (an admission
// changed the allocations) or refused by sbatch ends nothing: the job
// keeps its slow GPUs rather than losing them (helper 110's).
func tradesDue(trades []planner.Shrink, r *Report, live map[string]*lent, submitted int, dryRun bool) []planner.Shrink {
	if len(trades) == 0 {
		return nil
	}
	got := map[string]int{}
	if dryRun {
		for _, g := range r.Planned.Grows {
			got[g.Job] += g.GPUs
		}
	} else {
		for _, id := range r.Submitted[submitted:] {
			if l := live[id]; l != nil {
				got[l.rec.Parent] += l.rec.GPUs
			}
		}
	}
	need := map[string]int{}
	for _, sh := range trades {
		if l := live[sh.Extra]; l != nil {
			need[sh.Job] += l.rec.GPUs
		}
	}
	var due []planner.Shrink
	for _, sh := range trades {
		if got[sh.Job] >= need[sh.Job] && need[sh.Job] > 0 {
			due = append(due, sh)
		}
	}
	return due
}

// shrinkDue returns when the earliest of the shrinks needs a cycle: its
// signal time (deadline − grace_period − 2·poll_interval), or the end of the
// grace period of an extra job already signalled, or its deadline; zero
// when there is no shrink.
func (d *Daemon) shrinkDue(shrinks []planner.Shrink, live map[string]*lent) time.Time {
	grace, poll := d.cfg.GracePeriod.Duration, d.cfg.PollInterval.Duration
	var due time.Time
	for _, sh := range shrinks {
		l := live[sh.Extra]
		if l == nil {
			continue
		}
		deadline := time.Unix(sh.Deadline, 0)
		t := deadline.Add(-grace - 2*poll)
		if l.rec.State == backfillstore.ExtraSignalled {
			t = minTime(deadline, l.rec.Signalled.Add(grace))
		}
		if due.IsZero() || t.Before(due) {
			due = t
		}
	}
	return due
}

// grow submits the extra jobs of the planner's grows (see orders). A
// failed sbatch is classified by the planner (planner.SubmitFailure): one
// that Slurm answered counts as a failed lend of the job on the node
// (recordLend), and the job's further grows of the cycle that the retry
// rule now holds are skipped; one that says nothing of the request
// (slurmctld unreachable or overloaded, a timeout) is not counted and
// ends the cycle with an error, so the daemon backs off (Run).
func (d *Daemon) grow(ctx context.Context, v *View, grows []planner.Grow, rc reconciled, r *Report) error {
	todo, skipped := orders(v, grows)
	for _, s := range skipped {
		d.log.Debug("grow skipped", "why", s)
	}
	held := map[string]planner.LendVerdict{} // jobs refused in this cycle
	for _, o := range todo {
		e := o.job
		log := d.log.Named("actuator").With("job_id", e.Job.ID, "node", o.node, "gpus", o.gpus)
		if vd, ok := held[e.Job.ID]; ok && (vd.Held(v.Now.Unix()) || slices.Contains(vd.Nodes, o.node)) {
			log.Debug("grow skipped: an extra job of the job was refused in this cycle and it backs off")
			continue
		}
		spec := ExtraSpec{Parent: e.Job.ID, User: e.User, UID: e.Job.UID, Account: e.Account, Partition: d.cfg.Extra.Partition,
			QOS: d.cfg.Extra.QOS, Node: o.node, GPUType: o.gpuType, GPUs: o.gpus, TimeLimitMinutes: o.timeLimitMinute,
			WorkDir: e.WorkDir, Rendezvous: e.Rendezvous, Script: WorkerScript(d.cfg.Extra.WorkerCommand, e.Job.ID, e.Rendezvous)}
		detail := fmt.Sprintf("gpu:%s:%d for %d min (gap until %s)", o.gpuType, o.gpus, o.timeLimitMinute, o.end.Format(time.RFC3339))
		if err := d.decide(ctx, "grow", e.Job.ID, "", o.node, o.gpus, detail); err != nil {
			return err
		}
		if d.cfg.DryRun {
			log.Info("would grow (dry run)", "time_limit_min", o.timeLimitMinute)
			continue
		}
		lentFor := time.Duration(o.timeLimitMinute) * time.Minute
		intent := backfillstore.Intent{Parent: e.Job.ID, User: e.User, UID: e.Job.UID, Name: ExtraJobName(e.Job.ID), Comment: ExtraComment(e.Job.ID),
			Partition: d.cfg.Extra.Partition, Node: o.node, Lent: lentFor, GPUs: o.gpus, Time: d.now()}
		seq, err := d.db.RecordIntent(ctx, intent)
		if err != nil {
			return err
		}
		id, err := d.act.Submit(ctx, spec)
		if err != nil {
			if derr := d.db.DeleteIntent(ctx, seq); derr != nil {
				return derr
			}
			f := submitFailure(ctx, err)
			lf := lendFailure{job: e.Job.ID, node: o.node, gpus: o.gpus, outcome: f.Outcome(), reason: "sbatch", kind: "grow-failed",
				what: "submitting extra job failed", detail: err.Error()}
			if lf.outcome == planner.LendNeutral {
				log.Error("submitting extra job failed; Slurm did not answer the request (not counted against the job): "+
					"no more extra jobs in this cycle, backing off", "error", err)
				if derr := d.decide(ctx, "grow-failed", lf.job, "", lf.node, lf.gpus, err.Error()+" (not counted against the job)"); derr != nil {
					return derr
				}
				return fmt.Errorf("submitting an extra job for %s on %s, which Slurm did not answer: %w", lf.job, lf.node, err)
			}
			vd, rerr := d.recordLend(ctx, v, lf, rc.hist)
			if rerr != nil {
				return rerr
			}
			held[e.Job.ID] = vd
			continue
		}
		now := d.now()
		rec := backfillstore.ExtraJob{ID: id, Parent: e.Job.ID, User: e.User, UID: e.Job.UID, Partition: d.cfg.Extra.Partition,
			Node: o.node, GPUType: o.gpuType, GPUs: o.gpus, Submitted: now, End: now.Add(lentFor), Lent: lentFor,
			State: backfillstore.ExtraSubmitted, Name: intent.Name, Comment: intent.Comment}
		if err := d.db.RecordExtra(ctx, rec); err != nil {
			return fmt.Errorf("recording extra job %s (it runs; the next cycle adopts it from its submission intent): %w", id, err)
		}
		if err := d.db.DeleteIntent(ctx, seq); err != nil {
			return err
		}
		rc.live[id] = &lent{rec: rec, pending: true, end: rec.End}
		r.Submitted = append(r.Submitted, id)
		d.metrics.Grows.Inc()
		d.metrics.GPUsGranted.Add(float64(o.gpus))
		// read_at: when the cycle that decided this lend began to read Slurm
		log.Info("grew: extra job submitted", "extra_id", id, "time_limit_min", o.timeLimitMinute,
			"read_at", v.Now.Format(time.RFC3339Nano))
	}
	return nil
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool {
		if len(ids[a]) != len(ids[b]) {
			return len(ids[a]) < len(ids[b])
		}
		return ids[a] < ids[b]
	})
	return ids
}
