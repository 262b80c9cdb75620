package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
)

func init() { register("cluster", clusterFigures) }

// lockstepRuns is how many times clusterFigures runs lockstepOverhead.
const lockstepRuns = 3

// clusterFigures measures the MNIST example on 2 physical workers
// in-process and as processes, in turns (multiproc_step_overhead_pct, the
// median of lockstepRuns runs of lockstepOverhead), and runs the real binary on a small job whose worker
// processes are killed and joined (crash_recovery_ms, join_ms from the
// coordinator's log).
func clusterFigures() ([]figure, error) {
	dir, err := os.MkdirTemp("", "easyscale-bench-cluster-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "easyscale")
	if out, err := exec.Command("go", "build", "-o", bin, "./runtime/cmd/easyscale").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building easyscale: %v\n%s", err, out)
	}
	// Each lockstep run starts its own worker processes, and runs differ
	// by more than their turns do (where the kernel puts the in-process
	// arm's threads, for one): the figures are the medians of three runs.
	var inprocs, procss, ratios []float64
	for r := range lockstepRuns {
		inproc, procs, ratio, err := lockstepOverhead(bin, filepath.Join(dir, fmt.Sprintf("run-%d", r)))
		if err != nil {
			return nil, err
		}
		inprocs, procss, ratios = append(inprocs, inproc), append(procss, procs), append(ratios, ratio)
	}
	inproc, procs, ratio := median(inprocs), median(procss), median(ratios)
	out, err := exec.Command(bin, "run", "--config", "tests/e2e/testdata/mnist-small.toml", "--steps", "40", "--no-eval", "--quiet",
		"--procs", "--workers", "0:3,15:4,25:5", "--kill-at", "8:1,18:2,30:0", "--state", filepath.Join(dir, "chaos")).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("fault run: %v\n%s", err, out)
	}
	recovery := logValues(out, "crash_recovery_ms")
	joins := logValues(out, "join_ms")
	if len(recovery) == 0 || len(joins) == 0 {
		return nil, fmt.Errorf("no crash_recovery_ms or join_ms in the log:\n%s", out)
	}
	return []figure{
		{"mnist_step_ms_inproc_2w", inproc * 1000, "ms"},
		{"mnist_step_ms_procs_2w", procs * 1000, "ms"},
		{"multiproc_step_overhead_pct", 100 * (ratio - 1), "%"},
		{"crash_recovery_ms", median(recovery), "ms"},
		{"join_ms", median(joins), "ms"},
	}, nil
}

func logValues(log []byte, key string) []float64 {
	var out []float64
	for _, m := range regexp.MustCompile(key+`=([0-9.]+)`).FindAllSubmatch(log, -1) {
		if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
