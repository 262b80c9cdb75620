package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func init() { register("trainer", trainerFigures) }

// mnistStepsPerEpoch is 60,000 samples / (8 logical workers × 32) rounded
// down (drop-last), the MNIST example's epoch.
const mnistStepsPerEpoch = 234

// trainerFigures measures the EST runtime on the MNIST example with
// go benchmarks: est_switch_overhead_pct, the step time of 8 ESTs on one
// physical worker (one core) and rescale_ms.
//
// est_switch_overhead_pct comes from BenchmarkStepSwitch, which runs an EST
// step and a plain step of the same job on the same network in every
// iteration and reports the median ratio of the 600 pairs by the process
// CPU clock.
func trainerFigures() ([]figure, error) {
	r, err := goBench("./runtime/trainer", "^Benchmark(Step|Rescale)$", "20x")
	if err != nil {
		return nil, err
	}
	est, rescale := r["BenchmarkStep/est"], r["BenchmarkRescale"]
	if est == 0 || rescale == 0 {
		return nil, fmt.Errorf("trainer benchmarks missing from output: %v", r)
	}
	switchPct, err := switchOverhead()
	if err != nil {
		return nil, err
	}
	return []figure{
		{"est_switch_overhead_pct", switchPct, "%"},
		{"mnist_step_ms_1worker", est / 1e6, "ms"},
		{"mnist_epoch_s_1core", est * mnistStepsPerEpoch / 1e9, "s"},
		{"rescale_ms", rescale / 1e6, "ms"},
	}, nil
}

// switchOverhead runs BenchmarkStepSwitch once for 600 iterations on one
// thread (a median of 600 pairs: about ±0.2 % between runs on this VM) and
// returns its est-overhead-% metric (per cent).
func switchOverhead() (float64, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkStepSwitch$", "-benchtime", "600x",
		"-count", "1", "-cpu", "1", "./runtime/trainer")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("go test -bench BenchmarkStepSwitch: %w\n%s", err, out)
	}
	runs, err := parseBenchRuns(bytes.NewReader(out))
	if err != nil {
		return 0, err
	}
	var pct []float64
	for _, m := range runs["BenchmarkStepSwitch"] {
		if v, ok := m["est-overhead-%"]; ok {
			pct = append(pct, v)
		}
	}
	if len(pct) == 0 {
		return 0, fmt.Errorf("BenchmarkStepSwitch reported no est-overhead-%%:\n%s", out)
	}
	return median(pct), nil
}

func init() { register("trainer_epoch", epochFigures) }

// epochFigures trains the MNIST example for one whole epoch (234 steps, 8
// logical workers, 2 physical workers on all cores) with the real binary
// and reports its wall time and the resulting test accuracy.
func epochFigures() ([]figure, error) {
	dir, err := os.MkdirTemp("", "easyscale-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sum := filepath.Join(dir, "summary.json")
	cmd := exec.Command("go", "run", "./runtime/cmd/easyscale", "run", "--config", "examples/mnist/job.toml",
		"--workers", "2", "--quiet", "--log-level", "warn", "--summary", sum)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("training one MNIST epoch: %w", err)
	}
	b, err := os.ReadFile(sum)
	if err != nil {
		return nil, err
	}
	var s struct {
		Wall float64  `json:"wall_seconds"`
		Acc  *float64 `json:"test_accuracy"`
		SPS  float64  `json:"samples_per_second"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Acc == nil {
		return nil, fmt.Errorf("reading %s: %v", sum, err)
	}
	return []figure{
		{"mnist_epoch_s", s.Wall, "s"},
		{"mnist_samples_per_s", s.SPS, "samples/s"},
		{"mnist_test_accuracy_1epoch", 100 * *s.Acc, "%"},
	}, nil
}
