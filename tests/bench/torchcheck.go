package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func init() { register("torchcheck", torchCheckFigures) }

// torchCheckFigures measures the torch engine's consistency self-check
// (issue 18, goal at most 5 % of a short job's wall time): `easyscale run`
// of examples/torch-ddp/job.toml (a stock DDP script made elastic, one
// epoch of MNIST, 468 steps) on 2 Python processes, the self-check's
// seconds against the run's. EASYSCALE_BENCH_BIN selects a prebuilt binary.
func torchCheckFigures() ([]figure, error) {
	dir, err := os.MkdirTemp("", "easyscale-bench-torchcheck-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin, err := easyscaleBinary(dir)
	if err != nil {
		return nil, err
	}
	sum := filepath.Join(dir, "summary.json")
	out, err := exec.Command(bin, "run", "--config", "examples/torch-ddp/job.toml", "--workers", "2", "--quiet",
		"--log-level", "warn", "--summary", sum).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("easyscale run of examples/torch-ddp: %v\n%s", err, out)
	}
	b, err := os.ReadFile(sum)
	if err != nil {
		return nil, err
	}
	var s struct {
		Wall      float64  `json:"wall_seconds"`
		SelfCheck string   `json:"self_check"`
		CheckS    *float64 `json:"self_check_s"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("summary %s: %w", sum, err)
	}
	if s.SelfCheck != "passed" || s.CheckS == nil || s.Wall <= 0 {
		return nil, fmt.Errorf("summary %s: self_check %q, want passed with its seconds", b, s.SelfCheck)
	}
	return []figure{
		{"torch_selfcheck_s", *s.CheckS, "s"},
		{"torch_selfcheck_pct", 100 * *s.CheckS / s.Wall, "%"},
	}, nil
}

// easyscaleBinary is $EASYSCALE_BENCH_BIN, else easyscale built into dir.
func easyscaleBinary(dir string) (string, error) {
	if bin := os.Getenv("EASYSCALE_BENCH_BIN"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(dir, "easyscale")
	if out, err := exec.Command("go", "build", "-o", bin, "./runtime/cmd/easyscale").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building easyscale: %v\n%s", err, out)
	}
	return bin, nil
}
