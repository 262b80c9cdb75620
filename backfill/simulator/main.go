package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/planner"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
	"github.com/easyscale/easyscale-slurm/internal/cmdline"
)

// usageText is printed by --help and after a bad flag; the flag list is
// appended.
const usageText = `Usage: easyscale-simulate --trace FILE --gpus TYPE:COUNT[,TYPE:COUNT...] --gpus-per-node N
                          (or --nodes FILE)
                          --policy rigid|elastic|elastic-capped --json OUT [--plot FILE]

Replays a job trace through a Slurm-like scheduler and the EasyScale planner.

The trace is a GPU-cluster job table (such as shared/traces/philly/philly_busy_week.csv,
or a Pollux workload), the scheduler FIFO + backfill as Slurm's; it writes the metrics
(mean and p95 JCT, queueing delay, GPU allocation, reservation delays, an allocation time
series) as JSON. Compare the policies by running it once per --policy on the same trace and
cluster.

--policy elastic is the policy easyscale-backfilld runs with its default configuration (its
limits, d1 jobs grown only on their own GPU type, each job capped at its declared maximum and
logical workers, shrinking running elastic jobs to admit queued ones as the daemon's default
[admit] enabled = true does); --shrink-to-admit=false measures gap filling alone. Optional
trace columns logical_workers, min_gpus, max_gpus and determinism say what a job declared;
without them a job asking for R GPUs runs ceil(R/2) to 2R GPUs with 2R logical workers, d1.

Jobs asking for 0 GPUs or more GPUs than the whole cluster (or their GPU type, or one type for
a d1 elastic job) can never start: they are skipped, counted as skipped_jobs in the JSON and
the summary, and left out of every metric.

The summary line goes to stdout, or to stderr with --json - (stdout is then exactly the JSON).
Exit status: 0 success, 1 unreadable trace, no job to replay or failed run, 2 bad flags.

Flags:
`

// Version is stamped at build time with -ldflags "-X
// .../backfill/simulator.Version=..." and printed by --version.
var Version = "dev"

// Main implements the easyscale-simulate command (see usageText for the
// contract). args excludes the program name. It writes the metrics as
// JSON to OUT ("-" for stdout) and a one-line summary to stdout (to stderr
// when OUT is "-"), and returns the exit status: 0 on success and for
// -h/--help (usage on stdout), 2 for bad flags (the message names the flag
// and the fix, then the usage, on stderr), 1 for any other failure.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("easyscale-simulate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	daemon := config.Default() // --policy elastic's defaults are easyscale-backfilld's
	tracePath := fs.String("trace", "", "job table to replay, common or Pollux layout (required)")
	gpus := fs.String("gpus", "", fmt.Sprintf("cluster GPUs as TYPE:COUNT[,TYPE:COUNT...], e.g. v100:2048,p100:768; at most %d in all (required unless --nodes)", MaxGPUs))
	perNode := fs.Int("gpus-per-node", defaultPerNode, fmt.Sprintf("GPUs per node: 1 to the cluster's GPUs, making at most %d nodes; lowered to a smaller cluster's GPUs when not given (the last node of a type may be smaller)", MaxNodes))
	nodesPath := fs.String("nodes", "", "cluster node by node instead of --gpus: a CSV node list with columns gpu and model, e.g. shared/traces/alibaba_v2023_openb/openb_node_list_all_node.csv; each model in lower case is a GPU type (V100M16: v100m16)")
	policy := fs.String("policy", "", "rigid, elastic or elastic-capped (required)")
	jsonOut := fs.String("json", "", "file for the metrics as JSON, - for stdout (required)")
	plotOut := fs.String("plot", "", "GPU-allocation step chart, FILE.svg or FILE.png (default: no chart)")
	maxJobs := fs.Int("max-jobs", 0, "replay only the first N jobs (default 0: all)")
	window := fs.String("window", "", "replay only jobs submitted in [START, END) seconds, e.g. 0:86400 (default: the whole trace)")
	cluster := fs.String("cluster", "", "replay only the jobs of this cluster, for a table whose cluster column names several (Microsoft ITP's itp_jobs.csv: cluster01 to cluster10); required there")
	speeds := fs.String("speeds", "", "relative speeds of the cluster's GPU types as TYPE:X[,TYPE:X...] (default: 1 for every type)")
	weights := fs.String("node-weights", WeightsFastestFirst.String(), "each node's Slurm Weight by its GPU type's speed (--speeds; without it every type is speed 1 and the weights are equal), which select/cons_tres allocates lowest first: fastest-first, equal (Slurm's default: free GPUs and node order decide, blind to speed) or slowest-first (slurm.conf(5)'s advice: less capable nodes first)")
	margin := fs.Int64("margin", DefaultLimits().MarginSeconds, "seconds a lent GPU is returned before a reserved start (the daemon's safety_margin)")
	maxLoss := fs.Float64("admit-max-loss", daemon.Admit.MaxLoss, "shrink-to-admit takes at most this fraction of the GPUs a job started with, never below its minimum (easyscale-backfilld: [admit] max_loss); in (0, 1]")
	admit := fs.Bool("shrink-to-admit", daemon.Admit.Enabled, "elastic policies: start a queued job that does not fit by shrinking running elastic jobs, as easyscale-backfilld does by default ([admit] enabled); =false: gap filling alone")
	small := fs.String("start-small", daemon.StartSmall.Rule, "elastic policies: when a waiting elastic job may start on fewer GPUs than it asked for (at least its minimum): off, before-reservation (it ends at that size before its reserved start) or ends-earlier (it ends earlier than by waiting, and no later than the running job that ends last); easyscale-backfilld: [start_small] rule, default ends-earlier")
	objective := fs.Bool("objective", daemon.Admit.Rule == config.AdmitObjective, "elastic policies: decide by the planner's one objective, the sum of expected completion times, as easyscale-backfilld's default configuration does ([admit] rule = \"objective\"; any waiting elastic job may start small); =false: the rules before issue 17 (shrink-to-admit longest time left first, start-small for the queue head only)")
	weigh := fs.Bool("weigh-start-small", DaemonDefaults().WeighCriticalDelay, "elastic policies with --start-small ends-earlier: a job starts small only when it saves itself more than the queued jobs it would delay lose past the end of every running job, as easyscale-backfilld always does; =false: not weighed")
	keepOff := fs.Bool("keep-off-pinned", daemon.KeepOffPinned, "elastic policies: keep a queued job that may run on several GPU types off the types that pinned jobs queued ahead of it need, while its other types hold it and serve it at least 0.75 as fast and it would still run when the first of them could start there, for at most its run time, as easyscale-backfilld does by default (keep_off_pinned); =false: never")
	shed := fs.Bool("shed-slow-nodes", daemon.ShedSlowNodes, "elastic policies: right after a d2 elastic job starts on a mix of GPU types, release the nodes that add nothing to its throughput, whose GPUs the best placement of its logical workers leaves idle (paying one rescale), as easyscale-backfilld does by default on Slurm 22.05 (shed_slow_nodes); =false: never")
	move := fs.Bool("move-to-faster", daemon.MoveToFaster, "elastic policies: requeue a long d2 job (its time left at least a tenth of the longest other running job's) onto GPUs of a faster type, idle or lent to extra jobs, that no queued job may use when its time left there plus --move-cost, times 1.1, is below its time left now (a job that grew weighed at the GPUs it holds with its extra jobs when the faster GPUs hold that many; it restarts on its own count), as easyscale-backfilld does by default (move_to_faster); =false: never")
	tradeUp := fs.Bool("trade-up", daemon.TradeUp, "elastic policies: end a running job's extra job on slower GPUs and lend it as many idle GPUs of a faster type, which no reservation needs for the lend, when its time left makes the speed-up pay two resizes (--rescale-cost) by 10 %, as easyscale-backfilld does by default (trade_up); =false: never")
	moveAfresh := fs.Bool("move-one-type-afresh", false, "elastic policies, with --move-to-faster: also move a d1 job that names no GPU type onto one faster type, where it starts over from step 0 (its work so far counts against the move), as if every such job ran with easyscale run --on-other-numerics=start-over (easyscale-backfilld moves such a job only when its runtime reports that it does: BENCHMARKS.md E59)")
	moveCost := fs.Float64("move-cost", daemon.MoveCost.Seconds(), "seconds a move to faster GPUs costs the job (easyscale-backfilld: move_cost: the requeue's cred_expire, the restart, steps redone)")
	drain := fs.Bool("drain-horizon", daemon.DrainHorizon, "elastic policies: let shrink-to-admit and start-small make a running job end as late as the cluster needs at the least to run the work of other users' running and queued jobs (their work over its speed-weighted GPUs), as easyscale-backfilld does by default (drain_horizon); =false: no later than the longest time left of another user's running job")
	admitHorizon := fs.String("admit-horizon", daemon.Admit.Horizon, "elastic policies with --objective: how shrink-to-admit counts a donor's end against the horizon: returned (it gets its GPUs back when the admitted job's run ends), kept (it runs to its end on the smaller allocation, the count used before 5 December 2026) or contested (kept for the longest running job on GPU types that another queued job besides the admitted one may use, returned for the others); easyscale-backfilld: [admit] horizon")
	admitAllowance := fs.Float64("admit-allowance", daemon.Admit.Allowance, "elastic policies with --objective: shrink-to-admit may make a job end past the horizon as long as, its GPUs counted as never given back, it ends within (1 + this) × its run time at the allocation it started on, from its start; in [0, 10], 0: never past the horizon (easyscale-backfilld: [admit] allowance, which estimates that run from the job's time limit and progress report: a trace's run times are exact)")
	rescaleCost := fs.Float64("rescale-cost", daemon.RescaleCost.Seconds(), "seconds of progress a job loses at each change of its GPU count (easyscale-backfilld: rescale_cost); 0: none")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageText+cmdline.FlagTable(fs)) }
	badFlags := func(err error) int { return cmdline.BadUsage(fs, err) }
	if code, ok := cmdline.ParseHelpTo(stdout, fs, args); !ok { // --help on stdout
		return code
	}
	if *version {
		fmt.Fprintln(stdout, Version)
		return 0
	}
	if fs.NArg() > 0 {
		return badFlags(fmt.Errorf("unexpected argument %q: every input is a flag", fs.Arg(0)))
	}
	var nodes []NodeSpec
	if *nodesPath != "" {
		if *gpus != "" || fs.Changed("gpus-per-node") {
			return badFlags(errors.New("--nodes: the node list gives the cluster: leave out --gpus and --gpus-per-node"))
		}
		var err error
		if nodes, err = ReadNodesFile(*nodesPath); err != nil {
			return badFlags(fmt.Errorf("--nodes: %w", err))
		}
		*gpus = formatGPUs(GroupNodes(nodes))
	}
	cfg, err := flagsToConfig(*tracePath, *gpus, *perNode, fs.Changed("gpus-per-node"), *policy, *jsonOut, *plotOut, *maxJobs, *speeds, *margin)
	if err != nil {
		return badFlags(err)
	}
	if nodes != nil {
		cfg.GPUs, cfg.GPUsPerNode, cfg.Nodes = nil, 0, nodes
	}
	cfg.ShrinkToAdmit = *admit
	if !(*maxLoss > 0 && *maxLoss <= 1) {
		return badFlags(fmt.Errorf("--admit-max-loss %v: use a fraction in (0, 1], e.g. 0.5", *maxLoss))
	}
	cfg.AdmitMaxLoss = *maxLoss
	cfg.Objective = *objective
	cfg.ShedSlowNodes = *shed
	cfg.WeighCriticalDelay = *weigh
	cfg.KeepOffPinned = *keepOff
	cfg.MoveToFaster = *move
	cfg.TradeUp = *tradeUp
	cfg.MoveOneTypeAfresh = *moveAfresh
	cfg.DrainHorizon = *drain
	switch *admitHorizon {
	case config.AdmitHorizonContested, config.AdmitHorizonReturned, config.AdmitHorizonKept:
		cfg.AdmitHorizon = *admitHorizon
	default:
		return badFlags(fmt.Errorf("--admit-horizon %q: use %q, %q or %q", *admitHorizon, config.AdmitHorizonContested, config.AdmitHorizonReturned, config.AdmitHorizonKept))
	}
	if !(*admitAllowance >= 0 && *admitAllowance <= 10) {
		return badFlags(fmt.Errorf("--admit-allowance %v: use 0 to 10, e.g. %v (0: never past the horizon)", *admitAllowance, planner.DefaultAdmitAllowance))
	}
	cfg.AdmitAllowance = *admitAllowance
	if !(*moveCost >= 0 && *moveCost <= 86400) {
		return badFlags(fmt.Errorf("--move-cost %v: use 0 to 86400 seconds, e.g. %.0f", *moveCost, planner.DefaultMoveCost))
	}
	cfg.MoveCost = *moveCost
	if !(*rescaleCost >= 0 && *rescaleCost <= 86400) {
		return badFlags(fmt.Errorf("--rescale-cost %v: use 0 to 86400 seconds, e.g. %d", *rescaleCost, DefaultRescaleCost))
	}
	cfg.RescaleCost = *rescaleCost
	if cfg.NodeWeights, err = ParseNodeWeights(*weights); err != nil {
		return badFlags(fmt.Errorf("--node-weights: %w", err))
	}
	if cfg.StartSmall, err = planner.ParseStartSmallRule(*small); err != nil {
		return badFlags(fmt.Errorf("--start-small: %w", err))
	}
	if warn := idleFlagsWarning(cfg, fs.Changed); warn != "" {
		fmt.Fprintf(stderr, "easyscale-simulate: warning: %s\n", warn)
	}
	lo, hi, err := parseWindow(*window)
	if err != nil {
		return badFlags(fmt.Errorf("--window: %w", err))
	}
	jobs, rep, err := trace.ReadFileReport(*tracePath)
	if err != nil {
		fmt.Fprintf(stderr, "easyscale-simulate: --trace: %v\n", err)
		return 1
	}
	for _, col := range slices.Sorted(maps.Keys(rep.Misspelt)) {
		fmt.Fprintf(stderr, "easyscale-simulate: warning: --trace %s: column %q is not one the simulator reads, so its cells are ignored: did you mean %q?\n",
			*tracePath, col, rep.Misspelt[col])
	}
	switch {
	case len(jobs) == 0 && rep.Skipped > 0:
		fmt.Fprintf(stderr, "easyscale-simulate: --trace %s: no jobs to replay: all %d rows have an empty duration_s (jobs that never ran, which the common layout leaves out): give each job its run time in seconds\n", *tracePath, rep.Skipped)
		return 1
	case len(jobs) == 0:
		fmt.Fprintf(stderr, "easyscale-simulate: --trace %s: no jobs to replay: the table has a header and no row\n", *tracePath)
		return 1
	}
	if rep.Skipped > 0 { // a new user saw 897 rows of a shared trace vanish unreported
		fmt.Fprintf(stderr, "easyscale-simulate: note: --trace %s: left out %d rows with an empty duration_s (jobs that never ran, which the common layout leaves out); replaying the other %d\n",
			*tracePath, rep.Skipped, len(jobs))
	}
	if jobs, err = ofCluster(jobs, *cluster); err != nil {
		fmt.Fprintf(stderr, "easyscale-simulate: --trace %s: %v\n", *tracePath, err)
		return 1
	}
	read := len(jobs)
	if jobs = selectJobs(jobs, lo, hi, *maxJobs); len(jobs) == 0 {
		fmt.Fprintf(stderr, "easyscale-simulate: --window %s: none of the trace's %d jobs was submitted in it: widen it, or leave it out for the whole trace\n", *window, read)
		return 1
	}
	clusterTypes := cfg.GPUs
	if nodes != nil {
		clusterTypes = GroupNodes(nodes)
	}
	if warn := unusedJobSpeeds(jobs, clusterTypes); warn != "" {
		fmt.Fprintf(stderr, "easyscale-simulate: warning: %s\n", warn)
	}
	res, err := Run(jobs, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "easyscale-simulate: %v\n", err)
		return 1
	}
	res.Input = &Input{Trace: *tracePath, GPUs: *gpus, GPUsPerNode: cfg.GPUsPerNode, Nodes: *nodesPath,
		Speeds: *speeds, Window: *window, MaxJobs: *maxJobs, Cluster: *cluster}
	if err := writeJSON(*jsonOut, res, stdout); err != nil {
		fmt.Fprintf(stderr, "easyscale-simulate: writing --json %s: %v\n", *jsonOut, err)
		return 1
	}
	if *plotOut != "" {
		if err := Plot(*plotOut, res); err != nil {
			fmt.Fprintf(stderr, "easyscale-simulate: writing --plot %s: %v\n", *plotOut, err)
			return 1
		}
	}
	summary := stdout
	if *jsonOut == "-" {
		summary = stderr
	}
	if res.Skipped > 0 {
		why := res.SkippedWhy[:min(3, len(res.SkippedWhy))]
		more := ""
		if len(res.SkippedWhy) > len(why) {
			more = fmt.Sprintf("; and %d more", len(res.SkippedWhy)-len(why))
		}
		fmt.Fprintf(stderr, "easyscale-simulate: skipped %d of %d jobs that can never start on this cluster: %s%s\n",
			res.Skipped, len(jobs), strings.Join(why, "; "), more)
	}
	fmt.Fprintf(summary, "policy=%s jobs=%d skipped_jobs=%d mean_jct_s=%.0f p95_jct_s=%.0f mean_queue_s=%.0f gpu_alloc_pct=%.1f makespan_s=%d max_reservation_delay_s=%d\n",
		res.Policy, res.Jobs, res.Skipped, res.MeanJCT, res.P95JCT, res.MeanQueue, res.GPUAllocPct, res.Makespan, res.MaxReservationDelay)
	return 0
}

// defaultPerNode is --gpus-per-node's default, lowered to the cluster's
// GPU count for a smaller cluster.
const defaultPerNode = 8

// maxMargin bounds --margin (2^40 s, the trace reader's bound on times), so
// planner arithmetic on times cannot overflow.
const maxMargin = 1 << 40

// flagsToConfig checks the flags in the order of the usage line and builds
// the Config; every error names its flag. Nothing is allocated per GPU.
func flagsToConfig(tracePath, gpus string, perNode int, perNodeGiven bool, policy, jsonOut, plotOut string, maxJobs int, speeds string, margin int64) (Config, error) {
	var cfg Config
	if tracePath == "" {
		return cfg, errors.New("--trace is required: give a job table such as shared/traces/philly/philly_busy_week.csv")
	}
	var err error
	if cfg.GPUs, err = ParseGPUs(gpus); err != nil {
		return cfg, fmt.Errorf("--gpus: %w", err)
	}
	total := 0
	for _, g := range cfg.GPUs {
		total += g.Count
	}
	if !perNodeGiven {
		perNode = min(perNode, total)
	}
	if perNode < 1 || perNode > total {
		return cfg, fmt.Errorf("--gpus-per-node %d: use 1 to the cluster's %d GPUs (--gpus), e.g. %d", perNode, total, min(defaultPerNode, total))
	}
	if n := NodeCount(cfg.GPUs, perNode); n > MaxNodes {
		return cfg, fmt.Errorf("--gpus-per-node %d: cuts the %d GPUs into %d nodes, more than the %d allowed: raise it", perNode, total, n, MaxNodes)
	}
	cfg.GPUsPerNode = perNode
	if policy == "" {
		return cfg, errors.New("--policy is required: use rigid, elastic or elastic-capped")
	}
	if cfg.Policy, err = ParsePolicy(policy); err != nil {
		return cfg, fmt.Errorf("--policy: %w", err)
	}
	if jsonOut == "" {
		return cfg, errors.New("--json is required: give a file for the metrics, or - for stdout")
	}
	if plotOut != "" && !strings.HasSuffix(plotOut, ".svg") && !strings.HasSuffix(plotOut, ".png") {
		return cfg, fmt.Errorf("--plot %s: name the file .svg or .png", plotOut)
	}
	if maxJobs < 0 {
		return cfg, fmt.Errorf("--max-jobs %d: use 0 (all jobs) or a positive count", maxJobs)
	}
	if cfg.Speeds, err = parseSpeeds(speeds, cfg.GPUs); err != nil {
		return cfg, fmt.Errorf("--speeds: %w", err)
	}
	if margin < 0 || margin > maxMargin {
		return cfg, fmt.Errorf("--margin %d: use seconds from 0 (lent GPUs returned at the reserved start itself) to %d, e.g. %d, the daemon's default safety_margin",
			margin, int64(maxMargin), DefaultLimits().MarginSeconds)
	}
	cfg.Limits = DefaultLimits()
	cfg.Limits.MarginSeconds = margin
	return cfg, nil
}

// formatGPUs writes groups as ParseGPUs reads them.
func formatGPUs(groups []GPUGroup) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.Type + ":" + strconv.Itoa(g.Count)
	}
	return strings.Join(parts, ",")
}

// ParseGPUs parses TYPE:COUNT[,TYPE:COUNT...] (e.g. "v100:64,p100:32").
// Each count is 1 to MaxGPUs, each type appears once, and the counts sum
// to at most MaxGPUs; the errors say which part breaks which rule.
func ParseGPUs(s string) ([]GPUGroup, error) {
	if s == "" {
		return nil, errors.New("required: give TYPE:COUNT[,TYPE:COUNT...], e.g. v100:2816")
	}
	var out []GPUGroup
	total := 0
	for _, part := range strings.Split(s, ",") {
		typ, count, ok := strings.Cut(part, ":")
		n, err := strconv.Atoi(count)
		if ok && typ != "" && (errors.Is(err, strconv.ErrRange) || (err == nil && n > MaxGPUs)) {
			return nil, fmt.Errorf("%q: at most %d GPUs per type", part, MaxGPUs)
		}
		if !ok || typ == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("%q: write TYPE:COUNT with a positive count, e.g. v100:64", part)
		}
		if slices.ContainsFunc(out, func(g GPUGroup) bool { return g.Type == typ }) {
			return nil, fmt.Errorf("%q: GPU type %s is listed twice", part, typ)
		}
		if total += n; total > MaxGPUs {
			return nil, fmt.Errorf("%q: more than %d GPUs in all", s, MaxGPUs)
		}
		out = append(out, GPUGroup{Type: typ, Count: n})
	}
	return out, nil
}

// parseSpeeds parses TYPE:X[,TYPE:X...] for the cluster's GPU types; a type
// the cluster does not have, or listed twice, is an error.
func parseSpeeds(s string, cluster []GPUGroup) (map[string]float64, error) {
	out := map[string]float64{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		typ, v, ok := strings.Cut(part, ":")
		x, err := strconv.ParseFloat(v, 64)
		if !ok || typ == "" || err != nil || !(x > 0) || x > 1e6 {
			return nil, fmt.Errorf("%q: write TYPE:SPEED with a positive speed relative to 1.0, e.g. a100:2", part)
		}
		if !slices.ContainsFunc(cluster, func(g GPUGroup) bool { return g.Type == typ }) {
			return nil, fmt.Errorf("%q: the cluster has no GPU type %s (--gpus gives %s; type names are case-sensitive)", part, typ, groupTypes(cluster))
		}
		if _, dup := out[typ]; dup {
			return nil, fmt.Errorf("%q: GPU type %s is listed twice", part, typ)
		}
		out[typ] = x
	}
	return out, nil
}

func parseWindow(s string) (int64, int64, error) {
	if s == "" {
		return 0, -1, nil
	}
	a, b, ok := strings.Cut(s, ":")
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || lo < 0 || hi <= lo {
		return 0, 0, fmt.Errorf("%q: write START:END in whole seconds with START < END, e.g. 0:86400", s)
	}
	return lo, hi, nil
}

// unusedJobSpeeds describes the jobs' per-job speeds (the trace's speeds
// column) for GPU types the cluster lacks, which the run cannot use: each
// such type with how many jobs name it and the first of them, or "" when
// every named type is the cluster's. A trace may be replayed on clusters
// with other types, so this is a warning, not an error; it catches a
// misspelt type, which would otherwise run silently at the site speed.
func unusedJobSpeeds(jobs []trace.Job, cluster []GPUGroup) string {
	type use struct {
		jobs  int
		first string
	}
	unknown := map[string]*use{}
	for _, j := range jobs {
		for t := range j.Speeds {
			if slices.ContainsFunc(cluster, func(g GPUGroup) bool { return g.Type == t }) {
				continue
			}
			if unknown[t] == nil {
				unknown[t] = &use{first: j.ID}
			}
			unknown[t].jobs++
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	types := slices.Sorted(maps.Keys(unknown))
	parts := make([]string, len(types))
	for i, t := range types {
		u := unknown[t]
		if u.jobs == 1 {
			parts[i] = fmt.Sprintf("%s (job %q)", t, u.first)
		} else {
			parts[i] = fmt.Sprintf("%s (%d jobs, first %q)", t, u.jobs, u.first)
		}
	}
	have := make([]string, len(cluster))
	for i, g := range cluster {
		have[i] = g.Type
	}
	return fmt.Sprintf("the trace's speeds column names GPU types the cluster lacks, so those speeds are unused: %s; the cluster has %s",
		strings.Join(parts, ", "), strings.Join(have, ", "))
}

// ofCluster keeps the jobs of cluster (the trace's cluster column). A
// table whose jobs name several clusters needs one: replayed together,
// their queues would mix on one simulated cluster (and the table, sorted
// by cluster first, is not sorted by submit time). cluster "" with one
// cluster or none keeps every job; a cluster the table does not name is
// an error listing those it does.
func ofCluster(jobs []trace.Job, cluster string) ([]trace.Job, error) {
	names := map[string]int{}
	for _, j := range jobs {
		if j.Cluster != "" {
			names[j.Cluster]++
		}
	}
	list := func() string {
		var parts []string
		for _, n := range slices.Sorted(maps.Keys(names)) {
			parts = append(parts, fmt.Sprintf("%s (%d jobs)", n, names[n]))
		}
		return strings.Join(parts, ", ")
	}
	switch {
	case cluster == "" && len(names) > 1:
		return nil, fmt.Errorf("the table holds the jobs of %d clusters, %s: replay one with --cluster NAME", len(names), list())
	case cluster == "":
		return jobs, nil
	case names[cluster] == 0 && len(names) == 0:
		return nil, fmt.Errorf("--cluster %s: the table has no cluster column: leave --cluster out", cluster)
	case names[cluster] == 0:
		return nil, fmt.Errorf("--cluster %s: no job of the table ran on it; it names %s", cluster, list())
	}
	return slices.DeleteFunc(jobs, func(j trace.Job) bool { return j.Cluster != cluster }), nil
}

// selectJobs keeps jobs submitted in [lo, hi) (hi < 0: no end), at most
// maxJobs of them (0: all).
func selectJobs(jobs []trace.Job, lo, hi int64, maxJobs int) []trace.Job {
	var out []trace.Job
	for _, j := range jobs {
		if j.Submit < lo || (hi >= 0 && j.Submit >= hi) {
			continue
		}
		out = append(out, j)
		if maxJobs > 0 && len(out) == maxJobs {
			break
		}
	}
	return out
}

func writeJSON(path string, res Result, stdout io.Writer) error {
	b, err := json.MarshalIndent(struct {
		Result
		Series []Sample `json:"gpu_alloc_series"`
	}{res, Downsample(res.Series, 1000)}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Downsample returns at most n samples of the step series: for each of n
// equal time bins, the time-weighted mean allocation, lent GPUs and
// waiting jobs (rounded down), stamped with the bin start.
func Downsample(series []Sample, n int) []Sample {
	if len(series) <= n || n < 1 {
		return series
	}
	t0, t1 := series[0].T, series[len(series)-1].T
	width := max((t1-t0+int64(n)-1)/int64(n), 1)
	out := make([]Sample, 0, n)
	i := 0
	for b := t0; b < t1; b += width {
		e := b + width
		var a, l, w float64
		for ; i < len(series); i++ {
			end := t1
			if i+1 < len(series) {
				end = series[i+1].T
			}
			lo, hi := max(series[i].T, b), min(end, e)
			if hi > lo {
				dt := float64(hi - lo)
				a += dt * float64(series[i].Allocated)
				l += dt * float64(series[i].Lent)
				w += dt * float64(series[i].Waiting)
			}
			if end > e {
				break
			}
		}
		span := float64(min(e, t1) - b)
		out = append(out, Sample{T: b, Allocated: int(a / span), Lent: int(l / span), Waiting: int(w / span)})
	}
	return out
}

// groupTypes lists the cluster's GPU types, "v100, p100", for messages.
func groupTypes(groups []GPUGroup) string {
	types := make([]string, len(groups))
	for i, g := range groups {
		types[i] = g.Type
	}
	return strings.Join(types, ", ")
}
