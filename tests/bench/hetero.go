package main

import (
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/simulator"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

func init() { register("hetero", heteroSuite) }

// speedProfiles are per-job throughputs on the three types of the mixed
// cluster, relative to a V100 (1.0), since the traces' durations were
// measured on the data-centre GPUs of their clusters. The first one is the
// EasyScale paper's per-type figure for its workload (V100 3.1, P100 2.4,
// T4 1; arXiv 2208.14228, §6) scaled to the V100; the others bracket it,
// as the speed-up of a newer generation depends on the model
// (compute-bound convolutions gain more than embedding- or memory-bound
// models). A job's profile is chosen by a hash of its id, so every policy
// sees the same job.
var speedProfiles = []map[string]float64{
	{"v100": 1, "p100": 2.4 / 3.1, "t4": 1 / 3.1},
	{"v100": 1, "p100": 0.7, "t4": 0.25},
	{"v100": 1, "p100": 0.86, "t4": 0.45},
	{"v100": 1, "p100": 2.4 / 3.1, "t4": 1 / 3.1},
	{"v100": 1, "p100": 0.88, "t4": 0.62},
}

// clusterSpeeds is the site's speed table of the mixed cluster (the
// paper's figures scaled to the V100), for jobs that declare none.
var clusterSpeeds = map[string]float64{"v100": 1, "p100": 2.4 / 3.1, "t4": 1 / 3.1}

// mixedCluster is half V100, a quarter P100, a quarter T4 of total GPUs,
// in nodes of 8 (total a multiple of 32).
func mixedCluster(total int) []simulator.GPUGroup {
	return []simulator.GPUGroup{{Type: "v100", Count: total / 2}, {Type: "p100", Count: total / 4}, {Type: "t4", Count: total / 4}}
}

// jobHash is a stable hash of a job id in [0, 1). $EASYSCALE_HETERO_SEED,
// when set, is mixed into every hash: another draw of the jobs' speed
// profiles, d1 shares and pinned types, to judge a rule over several
// draws of the same traces rather than one (BENCHMARKS.md, issue 17).
func jobHash(id, salt string) float64 {
	h := fnv.New64a()
	if seed := os.Getenv("EASYSCALE_HETERO_SEED"); seed != "" {
		salt = seed + "/" + salt
	}
	h.Write([]byte(salt + "/" + id))
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// heteroJobs turns a trace into the heterogeneous evaluation's workload:
// each job gets its own speeds (speedProfiles); a d1Share of the jobs
// (by hash) are d1 and pinned to one GPU type (chosen by hash in
// proportion to the type's GPUs, among the types that can hold the job),
// the rest d2 and untyped ($EASYSCALE_HETERO_UNPINNED=1: the d1 jobs name
// no type either, and may start on any one type, as the jobs of a trace
// without the optional columns do; BENCHMARKS.md E58). paperRange gives EasyScale's job range
// (logical workers = requested GPUs, minimum 1: a job may shrink to one
// GPU and grow back to its request); otherwise the trace defaults
// (ceil(R/2) to 2R GPUs, 2R logical workers).
func heteroJobs(base []trace.Job, groups []simulator.GPUGroup, d1Share float64, paperRange bool) []trace.Job {
	unpinned := os.Getenv("EASYSCALE_HETERO_UNPINNED") == "1"
	total := 0
	for _, g := range groups {
		total += g.Count
	}
	out := make([]trace.Job, 0, len(base))
	for _, j := range base {
		if j.GPUs < 1 || j.GPUs > total {
			continue
		}
		j.Speeds = speedProfiles[int(jobHash(j.ID, "speeds")*float64(len(speedProfiles)))]
		j.GPUType, j.Determinism = "", "d2"
		if jobHash(j.ID, "d1") < d1Share {
			j.Determinism = "d1"
		}
		if j.Determinism == "d1" && !unpinned {
			fit := 0
			for _, g := range groups {
				if g.Count >= j.GPUs {
					fit += g.Count
				}
			}
			pick := jobHash(j.ID, "type") * float64(fit)
			for _, g := range groups {
				if g.Count < j.GPUs {
					continue
				}
				if pick < float64(g.Count) {
					j.GPUType = g.Type
					break
				}
				pick -= float64(g.Count)
			}
		}
		j.LogicalWorkers, j.MinGPUs, j.MaxGPUs = 0, 0, 0
		if paperRange {
			j.LogicalWorkers, j.MinGPUs, j.MaxGPUs = j.GPUs, 1, j.GPUs
		}
		out = append(out, j)
	}
	return out
}

// heteroCase is one trace and cluster of the heterogeneous evaluation.
type heteroCase struct {
	name    string
	jobs    []trace.Job
	groups  []simulator.GPUGroup
	perNode int
}

// heteroCases reads the evaluation's traces: the eight Pollux workloads on
// 64 GPUs (the Pollux default cluster size, as the 32 V100 + 16
// P100 + 16 T4), the Philly busy week on 512 and 896 GPUs.
// heteroHorizon checks $EASYSCALE_HETERO_HORIZON, the admit.horizon the
// elastic policy runs with when set (heteroConfig).
func heteroHorizon() error {
	switch v := os.Getenv("EASYSCALE_HETERO_HORIZON"); v {
	case "", planner.HorizonContested, planner.HorizonReturned, planner.HorizonKept:
		return nil
	default:
		return fmt.Errorf("EASYSCALE_HETERO_HORIZON=%q: want %s, %s or %s", v, planner.HorizonContested, planner.HorizonReturned, planner.HorizonKept)
	}
}

func heteroCases() ([]heteroCase, error) {
	if err := heteroHorizon(); err != nil {
		return nil, err
	}
	var cs []heteroCase
	for w := 1; w <= 8; w++ {
		jobs, err := readTrace("pollux_workloads", "workload-"+strconv.Itoa(w)+".csv")
		if err != nil {
			return nil, err
		}
		cs = append(cs, heteroCase{"pollux" + strconv.Itoa(w) + "@64", jobs, mixedCluster(64), 8})
	}
	week, err := readTrace("philly", "philly_busy_week.csv")
	if err != nil {
		return nil, err
	}
	cs = append(cs, heteroCase{"philly-week@512", week, mixedCluster(512), 8}, heteroCase{"philly-week@896", week, mixedCluster(896), 8})
	return cs, nil
}

// heteroRun is one simulation of the matrix.
type heteroRun struct {
	c      heteroCase
	d1     float64
	paper  bool
	policy string
	res    simulator.Result
	wall   time.Duration
}

func heteroConfig(c heteroCase, policy string) simulator.Config {
	cfg := simulator.Config{GPUs: c.groups, GPUsPerNode: c.perNode, Speeds: clusterSpeeds, RescaleCost: heteroRescaleCost()}
	switch policy {
	case "rigid":
		cfg.Policy = simulator.Rigid
	case "legacy":
		cfg.Policy, cfg.ShrinkToAdmit = simulator.Elastic, true
	case "elastic": // the daemon's default configuration
		d := simulator.DaemonDefaults()
		d.GPUs, d.GPUsPerNode, d.Speeds, d.RescaleCost = cfg.GPUs, cfg.GPUsPerNode, cfg.Speeds, cfg.RescaleCost
		// the daemon's default sheds (E31); $EASYSCALE_HETERO_SHED=0 runs it without
		if os.Getenv("EASYSCALE_HETERO_SHED") == "0" {
			d.ShedSlowNodes = false
		}
		// start-small weighed against the long jobs it delays (E36)
		if v := os.Getenv("EASYSCALE_HETERO_WEIGH"); v != "" {
			d.WeighCriticalDelay = v == "1"
		}
		// keep_off_pinned, the default (E38); $EASYSCALE_HETERO_KEEPOFF=0 runs it without
		if v := os.Getenv("EASYSCALE_HETERO_KEEPOFF"); v != "" {
			d.KeepOffPinned = v == "1"
		}
		// an experiment the daemon cannot apply as is (BENCHMARKS.md, E32)
		d.HoldForFast = os.Getenv("EASYSCALE_HETERO_HOLD") == "1"
		// a running d2 job moved to idle faster GPUs (E40)
		if v := os.Getenv("EASYSCALE_HETERO_MOVE"); v != "" {
			d.MoveToFaster = v == "1"
		}
		// a d1 job that names no type moved to a faster one, starting over (E59)
		d.MoveOneTypeAfresh = os.Getenv("EASYSCALE_HETERO_MOVE_D1") == "1"
		// the horizon raised to the work bound (drain_horizon, E41)
		if v := os.Getenv("EASYSCALE_HETERO_DRAIN"); v != "" {
			d.DrainHorizon = v == "1"
		}
		// admit.max_loss other than the default's
		if v, err := strconv.ParseFloat(os.Getenv("EASYSCALE_HETERO_MAXLOSS"), 64); err == nil && v > 0 && v <= 1 {
			d.AdmitMaxLoss = v
		}
		// admit.horizon other than the default's (E56): contested, returned or kept
		if v := os.Getenv("EASYSCALE_HETERO_HORIZON"); v != "" {
			d.AdmitHorizon = v // checked by heteroHorizon
		}
		// the start-small peer bound's factor (E67); 0 turns the bound off
		if v, err := strconv.ParseFloat(os.Getenv("EASYSCALE_HETERO_PEER"), 64); err == nil && v >= 0 {
			planner.StartSmallPeerFactor = v
			if v == 0 {
				planner.StartSmallPeerFactor = math.Inf(1)
			}
		}
		// admit.allowance (E69); the daemon's default when unset
		if v, err := strconv.ParseFloat(os.Getenv("EASYSCALE_HETERO_ALLOWANCE"), 64); err == nil && v >= 0 {
			d.AdmitAllowance = v
		}
		gapOnly := os.Getenv("EASYSCALE_HETERO_GAPONLY") == "1"
		if gapOnly || os.Getenv("EASYSCALE_HETERO_NOADMIT") == "1" {
			d.ShrinkToAdmit = false
		}
		if gapOnly || os.Getenv("EASYSCALE_HETERO_NOSMALL") == "1" {
			d.StartSmall = planner.StartSmallOff
		}
		cfg = d
	}
	// the site's node weights, rigid and elastic alike (E44): fastest-first
	// unless $EASYSCALE_HETERO_WEIGHTS names another
	if v := os.Getenv("EASYSCALE_HETERO_WEIGHTS"); v != "" {
		w, err := simulator.ParseNodeWeights(v)
		if err != nil {
			// a misspelt weighting must not yield the default's figures under another label
			fmt.Fprintf(os.Stderr, "bench: $EASYSCALE_HETERO_WEIGHTS: %v\n", err)
			os.Exit(2)
		}
		cfg.NodeWeights = w
	}
	return cfg
}

// heteroRescaleCost is the rescale cost of the matrix's elastic runs:
// simulator.DefaultRescaleCost, or $EASYSCALE_HETERO_RESCALE seconds (the
// sensitivity runs of BENCHMARKS.md judge a rule over several).
func heteroRescaleCost() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("EASYSCALE_HETERO_RESCALE"), 64); err == nil && v >= 0 {
		return v
	}
	return simulator.DefaultRescaleCost
}

// heteroSuite runs the heterogeneous matrix (traces × d1 share × job
// range × policy) and prints the worst elastic/rigid ratios of the
// objective policy. Policies: rigid; legacy, the daemon's default before
// issue 17 (shrink-to-admit longest time left first, gap filling); elastic,
// the daemon's default now: the planner's one objective with start-small
// (ends-earlier) for any waiting job (easyscale-simulate --policy
// elastic). Every elastic run pays
// simulator.DefaultRescaleCost per rescale. The table goes to stderr (and
// to $EASYSCALE_HETERO_TABLE when set); $EASYSCALE_HETERO_ONLY=PREFIX
// keeps the cases whose name starts so (e.g. pollux);
// $EASYSCALE_HETERO_SHED=0 runs elastic without simulator.Config.ShedSlowNodes
// (the daemon's default before E31); $EASYSCALE_HETERO_WEIGH=1 (or 0) with
// (or without) simulator.Config.WeighCriticalDelay; $EASYSCALE_HETERO_HOLD=1
// with simulator.Config.HoldForFast (an experiment the daemon cannot apply
// as is); $EASYSCALE_HETERO_RESCALE=S sets the elastic runs' rescale cost
// to S seconds; $EASYSCALE_HETERO_SEED=D draws the jobs' speeds, d1 choices
// and pinned types anew (jobHash). $EASYSCALE_HETERO_NOADMIT=1 turns the
// elastic runs' shrink-to-admit off, $EASYSCALE_HETERO_NOSMALL=1 their
// start-small, $EASYSCALE_HETERO_GAPONLY=1 both (gap filling alone:
// BENCHMARKS.md, E33). $EASYSCALE_HETERO_UNPINNED=1 leaves the d1 jobs
// untyped (heteroJobs; E58), $EASYSCALE_HETERO_MOVE_D1=1 runs elastic
// with simulator.Config.MoveOneTypeAfresh (E59).
func heteroSuite() ([]figure, error) {
	cases, err := heteroCases()
	if err != nil {
		return nil, err
	}
	var runs []heteroRun
	for _, c := range cases {
		if o := os.Getenv("EASYSCALE_HETERO_ONLY"); o != "" && !strings.HasPrefix(c.name, o) {
			continue
		}
		for _, d1 := range []float64{0, 0.4, 1} {
			for _, paper := range []bool{true, false} {
				jobs := heteroJobs(c.jobs, c.groups, d1, paper)
				for _, p := range []string{"rigid", "legacy", "elastic"} {
					start := time.Now()
					res, err := simulator.Run(jobs, heteroConfig(c, p))
					if err != nil {
						return nil, fmt.Errorf("%s d1=%v paper=%v %s: %w", c.name, d1, paper, p, err)
					}
					runs = append(runs, heteroRun{c, d1, paper, p, res, time.Since(start)})
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| trace@GPUs | d1 | range | policy | mean JCT | p95 JCT | mean queue | makespan | rescales/job | LB ratio | JCT/rigid | makespan/rigid | wall s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	worstJCT, worstMS := 0.0, 0.0
	for i, r := range runs {
		rigid := runs[i-i%3].res
		rng := "default"
		if r.paper {
			rng = "paper"
		}
		lb := 0.0
		if r.res.LowerBoundMeanJCT > 0 {
			lb = r.res.MeanJCT / r.res.LowerBoundMeanJCT
		}
		jr, mr := r.res.MeanJCT/rigid.MeanJCT, float64(r.res.Makespan)/float64(rigid.Makespan)
		fmt.Fprintf(&b, "| %s | %.0f %% | %s | %s | %.0f | %.0f | %.0f | %d | %.2f | %.2f | %.3f | %.3f | %.1f |\n", r.c.name, 100*r.d1, rng, r.policy,
			r.res.MeanJCT, r.res.P95JCT, r.res.MeanQueue, r.res.Makespan, r.res.MeanRescales, lb, jr, mr, r.wall.Seconds())
		if r.policy == "elastic" {
			worstJCT, worstMS = max(worstJCT, jr), max(worstMS, mr)
		}
	}
	fmt.Fprint(os.Stderr, b.String())
	if p := os.Getenv("EASYSCALE_HETERO_TABLE"); p != "" {
		if err := os.WriteFile(filepath.Clean(p), []byte(b.String()), 0o644); err != nil {
			return nil, fmt.Errorf("writing the hetero table: %w", err)
		}
	}
	return []figure{{"hetero_elastic_vs_rigid_jct_worst", worstJCT, "ratio"}, {"hetero_elastic_vs_rigid_makespan_worst", worstMS, "ratio"}}, nil
}
