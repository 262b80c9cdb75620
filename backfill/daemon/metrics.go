package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the daemon's Prometheus series, all prefixed
// easyscale_backfill_. They live in their own registry (with the Go and
// process collectors), served at /metrics.
type Metrics struct {
	Registry *prometheus.Registry

	Cycles         *prometheus.CounterVec // result="ok"|"error"
	GapsFound      prometheus.Counter     // nodes with lendable idle GPUs, summed over cycles
	IdleGPUs       prometheus.Gauge       // lendable idle GPUs in the last snapshot
	GPUsLent       prometheus.Gauge       // GPUs held by live extra jobs now
	GPUsGranted    prometheus.Counter     // GPUs in extra jobs submitted, summed
	Grows          prometheus.Counter     // extra jobs submitted
	Shrinks        *prometheus.CounterVec // action="signal"|"cancel"|"admit"
	Trades         prometheus.Counter     // slow extra jobs signalled to trade their job up (trade_up)
	Reconciled     *prometheus.CounterVec // action="adopt"|"cancel"|"ended"
	ExtraEnds      *prometheus.CounterVec // state= final Slurm state of extra jobs
	PlanSeconds    prometheus.Histogram   // planner.Plan wall time
	CycleSeconds   prometheus.Histogram   // whole cycle wall time
	SlurmFailures  prometheus.Counter     // cycles that failed because Slurm did not answer
	LendFailures   *prometheus.CounterVec // reason="ended"|"sbatch"|"pending"|"changed": failed lends (see lendFailure)
	GrowthStops    prometheus.Counter     // times a job was stopped after retry.stop_after failures
	JobsNotGrown   prometheus.Gauge       // running elastic jobs stopped until their status changes
	JobsBackingOff prometheus.Gauge       // running elastic jobs waiting out a retry backoff (job-wide)
	Pruned         *prometheus.CounterVec // table="decisions"|"extras"|"admit_shrinks": rows deleted by retention
	Nudges         *prometheus.CounterVec // result="ok"|"failed"|"skipped": eligible waiting elastic jobs nudged (nudge.go)
	Sheds          *prometheus.CounterVec // result="ok"|"failed"|"skipped": running jobs' slow nodes released (shed.go)
	KeepOffs       *prometheus.CounterVec // result="keep-off"|"keep-off-lifted"|"failed": pending jobs' excluded nodes changed (keepoff.go)
	Moves          *prometheus.CounterVec // result="requeued"|"restored"|"failed"|"skipped": running jobs moved to faster GPUs (move.go)
}

// NewMetrics creates the series in a fresh registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "easyscale", Subsystem: "backfill", Name: name, Help: help}
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts(f(name, help)))
		r.MustRegister(c)
		return c
	}
	vec := func(name, help, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts(f(name, help)), []string{label})
		r.MustRegister(c)
		return c
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts(f(name, help)))
		r.MustRegister(g)
		return g
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		o := f(name, help)
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: o.Subsystem,
			Name: o.Name, Help: o.Help, Buckets: buckets})
		r.MustRegister(h)
		return h
	}
	m := &Metrics{
		Registry:    r,
		Cycles:      vec("cycles_total", "Daemon cycles by result.", "result"),
		GapsFound:   counter("gaps_found_total", "Nodes with lendable idle GPUs seen, summed over cycles."),
		IdleGPUs:    gauge("idle_gpus", "Lendable idle GPUs in the last snapshot."),
		GPUsLent:    gauge("gpus_lent", "GPUs held by live extra jobs."),
		GPUsGranted: counter("gpus_granted_total", "GPUs in submitted extra jobs."),
		Grows:       counter("grows_total", "Extra jobs submitted."),
		Shrinks: vec("shrinks_total", "Extra jobs ended, by action (signal, cancel, admit): for a reservation, an admission, "+
			"a trade up (also trades_total), a job over its maximum, or one not started by pending_timeout.", "action"),
		Trades: counter("trades_total",
			"Slow extra jobs signalled to trade their job up to idle faster GPUs (trade_up), once sbatch took their replacements."),
		Reconciled:    vec("reconciled_total", "Reconciliation actions (adopt, cancel, ended).", "action"),
		ExtraEnds:     vec("extra_ends_total", "Extra jobs seen ending, by final Slurm state.", "state"),
		PlanSeconds:   hist("planning_seconds", "Wall time of one planner.Plan call.", prometheus.ExponentialBuckets(1e-5, 4, 10)),
		CycleSeconds:  hist("cycle_seconds", "Wall time of one cycle (snapshot, plan, act).", prometheus.ExponentialBuckets(1e-3, 3, 10)),
		SlurmFailures: counter("slurm_failures_total", "Cycles that failed because Slurm did not answer."),
		LendFailures: vec("lend_failures_total",
			"Failed extra jobs, by reason: ended on their own well before their time limit while their job ran (ended), "+
				"refused by sbatch (sbatch), cancelled after pending_timeout (pending), cancelled because its owner changed it from "+
				"what was lent: partition or QOS, GPUs, nodes, requeue or time limit (changed).", "reason"),
		GrowthStops: counter("growth_stops_total",
			"Times an elastic job was no longer grown after retry.stop_after consecutive failed extra jobs."),
		JobsNotGrown: gauge("jobs_not_grown",
			"Running elastic jobs not grown because their extra jobs keep failing, until their status changes."),
		JobsBackingOff: gauge("jobs_backing_off",
			"Running elastic jobs waiting out the backoff after failed extra jobs."),
		Pruned: vec("pruned_rows_total", "Rows of state_db deleted by [retention], by table.", "table"),
		Nudges: vec("nudges_total",
			"Waiting elastic jobs whose begin time had passed, updated so that Slurm's scheduler runs (nudge_eligible), "+
				"by result: ok, failed (scontrol refused), skipped (the re-read job was no longer one to nudge).", "result"),
		Sheds: vec("sheds_total",
			"Running elastic d2 jobs whose nodes add nothing to their throughput were released (shed_slow_nodes), by result: "+
				"ok, failed (scontrol refused), skipped (the re-read job had changed).", "result"),
		KeepOffs: vec("keep_offs_total",
			"Pending elastic jobs whose excluded nodes were changed (keep_off_pinned), by result: keep-off (kept off the GPU types "+
				"waiting pinned jobs need), keep-off-lifted (those nodes taken out again), failed (scontrol refused).", "result"),
		Moves: vec("moves_total",
			"Running elastic jobs moved to faster GPUs (move_to_faster), by result: requeued (scontrol requeue, to restart without the "+
				"nodes they ran on), restored (the owner's excluded nodes put back), failed (requeue refused), skipped (changed since the snapshot).", "result"),
	}
	for _, result := range []string{"keep-off", "keep-off-lifted", "failed"} {
		m.KeepOffs.WithLabelValues(result)
	}
	for _, result := range []string{"requeued", "restored", "failed", "skipped"} {
		m.Moves.WithLabelValues(result)
	}
	for _, result := range []string{"ok", "failed", "skipped"} {
		m.Nudges.WithLabelValues(result)
		m.Sheds.WithLabelValues(result)
	}
	for _, reason := range []string{"ended", "sbatch", "pending", "changed"} {
		m.LendFailures.WithLabelValues(reason) // every reason exported from the start, at 0
	}
	return m
}
