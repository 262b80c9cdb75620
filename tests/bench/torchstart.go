package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

func init() { register("torchstart", torchStartFigures) }

const (
	// torchStartWorkers is the number of Python processes of torch_start_s.
	torchStartWorkers = 8
	// torchStartRounds alternations of a run's start and its peer.
	torchStartRounds = 3
	// readyLine is what the torch engine logs once its first process group
	// has formed (runtime/torchengine Engine.New's OnGroup).
	readyLine = "python workers ready"
)

// torchStartFigures measures the torch engine's start-up (issue 18 item 5):
// torch_start_s is the wall time from the exec of `easyscale run --config
// examples/torch-mnist/job.toml --workers 8 --steps 1` to its log line
// "python workers ready" (8 Python processes started, torch imported, the
// job and MNIST loaded, admitted by their numerics, in their gloo group:
// the first step can start; the self-check comes after it). Its peer,
// torch_start_import8_s, is 8 `python3 -c 'import torch'` started together,
// from their start to the last one's exit: the part no engine can avoid.
// The two alternate torchStartRounds times; each figure is its minimum and
// torch_start_vs_import8_ratio their ratio.
func torchStartFigures() ([]figure, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "easyscale-bench-torchstart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin, err := easyscaleBinary(dir)
	if err != nil {
		return nil, err
	}
	py, _, err := torchengine.Python(ctx)
	if err != nil {
		return nil, fmt.Errorf("the torchstart suite needs PyTorch: %w", err)
	}
	var runs, peers []time.Duration
	for range torchStartRounds {
		r, err := runToReady(ctx, bin)
		if err != nil {
			return nil, err
		}
		p, err := importTogether(ctx, py, torchStartWorkers)
		if err != nil {
			return nil, err
		}
		runs, peers = append(runs, r), append(peers, p)
	}
	r, p := slices.Min(runs), slices.Min(peers)
	return []figure{
		{"torch_start_s", r.Seconds(), "s"},
		{"torch_start_import8_s", p.Seconds(), "s"},
		{"torch_start_vs_import8_ratio", r.Seconds() / p.Seconds(), "x"},
	}, nil
}

// runToReady runs one step of the MNIST example on torchStartWorkers
// processes and returns the time from its exec to the ready line; the run
// must then end cleanly.
func runToReady(ctx context.Context, bin string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, "run", "--config", "examples/torch-mnist/job.toml", "--workers",
		fmt.Sprint(torchStartWorkers), "--steps", "1", "--no-eval", "--quiet")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting easyscale run: %w", err)
	}
	var ready time.Duration
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if ready == 0 && strings.Contains(sc.Text(), readyLine) {
			ready = time.Since(t0)
		}
		log.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("easyscale run of examples/torch-mnist on %d processes: %w\n%s", torchStartWorkers, err, log.String())
	}
	if ready == 0 {
		return 0, fmt.Errorf("easyscale run logged no %q line:\n%s", readyLine, log.String())
	}
	return ready, nil
}

// importTogether starts n `py -c 'import torch'` at once and returns the
// time until the last one has exited.
func importTogether(ctx context.Context, py string, n int) (time.Duration, error) {
	t0 := time.Now()
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, py, "-c", "import torch")
		cmds[i].Env = append(os.Environ(), torchengine.PinnedEnv...)
		if err := cmds[i].Start(); err != nil {
			return 0, fmt.Errorf("starting %s -c 'import torch': %w", py, err)
		}
	}
	var err error
	for _, c := range cmds {
		err = errors.Join(err, c.Wait())
	}
	if err != nil {
		return 0, fmt.Errorf("%s -c 'import torch': %w", py, err)
	}
	return time.Since(t0), nil
}
