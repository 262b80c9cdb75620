package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// Main implements `easyscale simulate`:
//
//	simulate --trace FILE --gpus TYPE:COUNT[,TYPE:COUNT...] --gpus-per-node N
//	         --policy rigid|elastic|elastic-capped --json OUT [--plot FILE.svg|png]
//	         [--max-jobs N] [--window START:END] [--speeds TYPE:X,...] [--margin S]
//
// args excludes the program and subcommand names. It writes the metrics as
// JSON to OUT ("-" for stdout) and a one-line summary to stdout, and returns
// the exit status: 0 on success, 2 for bad flags (the message names the flag
// and the fix), 1 for any other failure.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("simulate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	tracePath := fs.String("trace", "", "job table to replay (shared/traces layouts)")
	gpus := fs.String("gpus", "", "cluster GPUs as TYPE:COUNT[,TYPE:COUNT...], e.g. v100:2048,p100:768")
	perNode := fs.Int("gpus-per-node", 8, "GPUs per node")
	policy := fs.String("policy", "", "rigid, elastic or elastic-capped")
	jsonOut := fs.String("json", "", "file for the metrics as JSON (- for stdout)")
	plotOut := fs.String("plot", "", "optional GPU-allocation plot, .svg or .png")
	maxJobs := fs.Int("max-jobs", 0, "replay only the first N jobs (0: all)")
	window := fs.String("window", "", "replay only jobs submitted in [START, END) seconds, e.g. 0:86400")
	speeds := fs.String("speeds", "", "relative GPU speeds as TYPE:X[,TYPE:X...] (default 1 for every type)")
	margin := fs.Int64("margin", 60, "seconds a lent GPU is returned before a reserved start")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "simulate: %v (flags: --trace --gpus --gpus-per-node --policy --json --plot --max-jobs --window --speeds --margin)\n", err)
		return 2
	}
	cfg, err := flagsToConfig(*tracePath, *gpus, *perNode, *policy, *jsonOut, *plotOut, *maxJobs, *speeds, *margin)
	if err != nil {
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		return 2
	}
	lo, hi, err := parseWindow(*window)
	if err != nil {
		fmt.Fprintf(stderr, "simulate: --window: %v\n", err)
		return 2
	}
	jobs, err := trace.ReadFile(*tracePath)
	if err != nil {
		fmt.Fprintf(stderr, "simulate: --trace: %v\n", err)
		return 1
	}
	jobs = selectJobs(jobs, lo, hi, *maxJobs)
	res, err := Run(jobs, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		return 1
	}
	if err := writeJSON(*jsonOut, res, stdout); err != nil {
		fmt.Fprintf(stderr, "simulate: writing --json %s: %v\n", *jsonOut, err)
		return 1
	}
	if *plotOut != "" {
		if err := Plot(*plotOut, res); err != nil {
			fmt.Fprintf(stderr, "simulate: writing --plot %s: %v\n", *plotOut, err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "policy=%s jobs=%d mean_jct_s=%.0f p95_jct_s=%.0f mean_queue_s=%.0f gpu_alloc_pct=%.1f makespan_s=%d max_reservation_delay_s=%d\n",
		res.Policy, res.Jobs, res.MeanJCT, res.P95JCT, res.MeanQueue, res.GPUAllocPct, res.Makespan, res.MaxReservationDelay)
	return 0
}

func flagsToConfig(tracePath, gpus string, perNode int, policy, jsonOut, plotOut string, maxJobs int, speeds string, margin int64) (Config, error) {
	var cfg Config
	if tracePath == "" {
		return cfg, errors.New("--trace is required: give a job table such as shared/traces/philly/philly_busy_week.csv")
	}
	if jsonOut == "" {
		return cfg, errors.New("--json is required: give a file for the metrics, or - for stdout")
	}
	p, err := ParsePolicy(policy)
	if err != nil {
		return cfg, fmt.Errorf("--policy: %w", err)
	}
	cfg.Policy = p
	if cfg.GPUs, err = ParseGPUs(gpus); err != nil {
		return cfg, fmt.Errorf("--gpus: %w", err)
	}
	if perNode < 1 {
		return cfg, fmt.Errorf("--gpus-per-node %d: use a positive GPU count, e.g. 8", perNode)
	}
	cfg.GPUsPerNode = perNode
	if maxJobs < 0 {
		return cfg, fmt.Errorf("--max-jobs %d: use 0 (all jobs) or a positive count", maxJobs)
	}
	if margin < 0 {
		return cfg, fmt.Errorf("--margin %d: use 0 or more seconds", margin)
	}
	cfg.Limits = planner.Limits{MarginSeconds: margin}
	if cfg.Speeds, err = parseSpeeds(speeds); err != nil {
		return cfg, fmt.Errorf("--speeds: %w", err)
	}
	if plotOut != "" && !strings.HasSuffix(plotOut, ".svg") && !strings.HasSuffix(plotOut, ".png") {
		return cfg, fmt.Errorf("--plot %s: name the file .svg or .png", plotOut)
	}
	return cfg, nil
}

// ParseGPUs parses TYPE:COUNT[,TYPE:COUNT...] (e.g. "v100:64,p100:32").
func ParseGPUs(s string) ([]GPUGroup, error) {
	if s == "" {
		return nil, errors.New("required: give TYPE:COUNT[,TYPE:COUNT...], e.g. v100:2816")
	}
	var out []GPUGroup
	for _, part := range strings.Split(s, ",") {
		typ, count, ok := strings.Cut(part, ":")
		n, err := strconv.Atoi(count)
		if !ok || typ == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("%q: write TYPE:COUNT with a positive count, e.g. v100:64", part)
		}
		out = append(out, GPUGroup{Type: typ, Count: n})
	}
	return out, nil
}

func parseSpeeds(s string) (map[string]float64, error) {
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
