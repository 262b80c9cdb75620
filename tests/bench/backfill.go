package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/simulator"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

func init() { register("backfill", backfillSuite) }

// tracesDir is where the job tables live: $EASYSCALE_TRACES, else
// ../shared/traces from the repository root.
func tracesDir() string {
	if d := os.Getenv("EASYSCALE_TRACES"); d != "" {
		return d
	}
	return filepath.Join("..", "shared", "traces")
}

// readTrace reads the job table at path (under tracesDir); its error says
// how to point the suite at the traces.
func readTrace(path ...string) ([]trace.Job, error) {
	jobs, err := trace.ReadFile(filepath.Join(append([]string{tracesDir()}, path...)...))
	if err != nil && os.Getenv("EASYSCALE_TRACES") == "" {
		return nil, fmt.Errorf("%w (set EASYSCALE_TRACES to the shared/traces folder, e.g. EASYSCALE_TRACES=/work/shared/traces; "+
			"the default ../shared/traces resolves only from a checkout next to shared/, such as /work/main)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (EASYSCALE_TRACES=%s: is it the shared/traces folder, holding philly/?)", err, os.Getenv("EASYSCALE_TRACES"))
	}
	return jobs, nil
}

// busyWeekGPUs is the cluster for the busy-week figures: 64 nodes of 8 GPUs,
// about two thirds of the week's mean demand (795 GPUs), so jobs queue.
const busyWeekGPUs = 512

func backfillSuite() ([]figure, error) {
	var figs []figure
	ms, err := planMS10k()
	if err != nil {
		return nil, err
	}
	figs = append(figs, figure{"plan_ms_10k", ms, "ms"})
	// One daemon cycle with 10,000 queued jobs (issue 17: < 1 s), over the
	// daemon tests' fake Slurm: backfill/daemon BenchmarkCycle10kQueued, and
	// BenchmarkCycle10kQueuedUnplanned with none of them planned by Slurm yet,
	// BenchmarkCycle10kQueuedKeepOff with half of them pinned to a type and
	// half elastic (keep_off_pinned's worst case).
	cycle, err := goBench("./backfill/daemon", "^BenchmarkCycle10kQueued(Unplanned|KeepOff)?$", "5x")
	if err != nil {
		return nil, err
	}
	figs = append(figs, figure{"backfill_cycle_ms_10k", cycle["BenchmarkCycle10kQueued"] / 1e6, "ms"},
		figure{"backfill_cycle_ms_10k_unplanned", cycle["BenchmarkCycle10kQueuedUnplanned"] / 1e6, "ms"},
		figure{"backfill_cycle_ms_10k_keepoff", cycle["BenchmarkCycle10kQueuedKeepOff"] / 1e6, "ms"})
	philly, err := readTrace("philly", "philly_jobs.csv")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := simulator.Run(philly, simulator.Config{GPUs: []simulator.GPUGroup{{Type: "v100", Count: 2816}}, GPUsPerNode: 8,
		Policy: simulator.Elastic}); err != nil {
		return nil, err
	}
	figs = append(figs, figure{"simulate_philly_s", time.Since(start).Seconds(), "s"})
	week, err := readTrace("philly", "philly_busy_week.csv")
	if err != nil {
		return nil, err
	}
	// The daemon's default policy (simulator.DaemonDefaults: its limits,
	// shrink-to-admit by the one objective, start-small ends-earlier, 30 s
	// per rescale). elastic_gap_only is the daemon with [admit] enabled =
	// false; capped the same defaults with the per-job cap.
	run := func(gpus int, p simulator.Policy, admit bool) (simulator.Result, error) {
		cfg := simulator.Config{Policy: p}
		if p != simulator.Rigid {
			cfg = simulator.DaemonDefaults()
			cfg.Policy, cfg.ShrinkToAdmit = p, admit
		}
		cfg.GPUs, cfg.GPUsPerNode = []simulator.GPUGroup{{Type: "v100", Count: gpus}}, 8
		return simulator.Run(week, cfg)
	}
	res := map[string]simulator.Result{}
	for _, c := range []struct {
		name  string
		gpus  int
		p     simulator.Policy
		admit bool
	}{
		{"rigid", busyWeekGPUs, simulator.Rigid, false}, {"elastic", busyWeekGPUs, simulator.Elastic, true},
		{"gap", busyWeekGPUs, simulator.Elastic, false}, {"capped", busyWeekGPUs, simulator.ElasticCapped, true},
		{"rigid896", 896, simulator.Rigid, false}, {"elastic896", 896, simulator.Elastic, true},
	} {
		r, err := run(c.gpus, c.p, c.admit)
		if err != nil {
			return nil, err
		}
		res[c.name] = r
	}
	rigid, el := res["rigid"], res["elastic"]
	figs = append(figs,
		figure{"elastic_vs_rigid_jct_ratio", res["elastic896"].MeanJCT / res["rigid896"].MeanJCT, "ratio"},
		figure{"philly896_vs_lower_bound", res["elastic896"].JCTOverLowerBound, "ratio"},
		figure{"philly896_rigid_vs_lower_bound", res["rigid896"].JCTOverLowerBound, "ratio"},
		figure{"elastic_max_reservation_delay_s", float64(res["elastic896"].MaxReservationDelay), "s"},
		figure{"rigid_mean_queue_s_896", res["rigid896"].MeanQueue, "s"},
		figure{"elastic_vs_rigid_jct_ratio_512", el.MeanJCT / rigid.MeanJCT, "ratio"},
		figure{"elastic_gap_only_vs_rigid_jct_ratio_512", res["gap"].MeanJCT / rigid.MeanJCT, "ratio"},
		figure{"elastic_capped_vs_rigid_jct_ratio_512", res["capped"].MeanJCT / rigid.MeanJCT, "ratio"},
		figure{"elastic_gpu_alloc_pct_512", el.GPUAllocPct, "%"},
		figure{"elastic_gpu_alloc_while_waiting_pct_512", el.GPUAllocWaitingPct, "%"},
		figure{"rigid_gpu_alloc_pct_512", rigid.GPUAllocPct, "%"},
		figure{"elastic_max_reservation_delay_s_512", float64(el.MaxReservationDelay), "s"})
	return figs, nil
}

// planMS10k times one planning cycle (median of 5) on a synthetic snapshot:
// 10,000 GPUs of 3 types on 8-GPU nodes, 2,000 running jobs (three quarters
// elastic, half of those d1: grown only on their own type) holding 8,000 of
// them, 10,000 pending jobs of which 1,000 carry a reservation, the daemon's
// default limits with a 2 h maximum lend.
func planMS10k() (float64, error) {
	r := rand.New(rand.NewPCG(10, 10))
	types := []string{"a100", "v100", "t4"}
	s := planner.Snapshot{Now: 100000, Speeds: map[string]float64{"a100": 2, "v100": 1, "t4": 0.5},
		Limits: simulator.DefaultLimits()}
	s.Limits.MaxLendSeconds = 7200
	for i := range 1250 {
		s.Nodes = append(s.Nodes, planner.Node{Name: "n" + strconv.Itoa(i), GPUType: types[i%3], Total: 8, Idle: 8})
	}
	for j := range 2000 {
		g := []int{1, 2, 4, 4, 8}[r.IntN(5)]
		ni := (j * 5) % 1250
		for s.Nodes[ni].Idle < g {
			ni = (ni + 1) % 1250
		}
		s.Nodes[ni].Idle -= g
		job := planner.RunningJob{ID: "r" + strconv.Itoa(j), User: "u" + strconv.Itoa(j%50), Elastic: j%4 != 0,
			Base: []planner.NodeGPUs{{Node: s.Nodes[ni].Name, GPUs: g}}, End: s.Now + int64(r.IntN(50000))}
		if job.Elastic {
			job.MinGPUs, job.MaxGPUs, job.Model = max(1, g/2), 2*g, planner.DefaultModel(2*g, g)
			job.GPUTypes = planner.AllowedTypes(j%2 == 0, []string{s.Nodes[ni].GPUType}) // half d1, half d2
		}
		s.Running = append(s.Running, job)
	}
	for p := range 10000 {
		pj := planner.PendingJob{ID: "p" + strconv.Itoa(p)}
		if p%10 == 0 {
			pj.PlannedStart = s.Now + int64(r.IntN(20000))
			pj.PlannedNodes = []planner.NodeGPUs{{Node: s.Nodes[r.IntN(1250)].Name, GPUs: 1 + r.IntN(8)}}
		}
		s.Pending = append(s.Pending, pj)
	}
	var times []float64
	for range 5 {
		start := time.Now()
		if _, err := planner.Plan(s); err != nil {
			return 0, fmt.Errorf("planning the 10k snapshot: %w", err)
		}
		times = append(times, float64(time.Since(start).Microseconds())/1000)
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}
