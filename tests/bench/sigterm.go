package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

func init() { register("sigterm", sigtermFigures) }

// slowJob is examples/mnist/job.toml with the step made slow (micro_batch
// 2048, channels [16, 32]: tens of seconds per step on 2 cores) and a
// checkpoint after every step.
var slowJob = map[string]string{
	"micro_batch = 32":      "micro_batch = 2048",
	"channels = [8, 16]":    "channels = [16, 32]",
	"checkpoint_every = 50": "checkpoint_every = 1",
	"epochs = 1":            "epochs = 2",
	"warmup_steps = 20":     "warmup_steps = 0",
}

// sigtermFigures measures the time from SIGTERM to exit of `easyscale run`
// on a slow step, in process and as the coordinator of 2 worker
// processes: the signal is sent 3 s into step 1 (after step 0's
// checkpoint). EASYSCALE_BENCH_BIN selects a prebuilt binary (e.g. one of
// an older commit, for a before/after comparison).
func sigtermFigures() ([]figure, error) {
	dir, err := os.MkdirTemp("", "easyscale-bench-sigterm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := os.Getenv("EASYSCALE_BENCH_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "easyscale")
		if out, err := exec.Command("go", "build", "-o", bin, "./runtime/cmd/easyscale").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building easyscale: %v\n%s", err, out)
		}
	}
	b, err := os.ReadFile("examples/mnist/job.toml")
	if err != nil {
		return nil, err
	}
	job := string(b)
	for from, to := range slowJob {
		if !strings.Contains(job, from) {
			return nil, fmt.Errorf("examples/mnist/job.toml no longer has %q", from)
		}
		job = strings.Replace(job, from, to, 1)
	}
	cfg := filepath.Join(dir, "slow.toml")
	if err := os.WriteFile(cfg, []byte(job), 0o644); err != nil {
		return nil, err
	}
	var figs []figure
	for _, mode := range []struct {
		name  string
		extra []string
	}{{"inproc", nil}, {"procs_2w", []string{"--procs", "--workers", "2"}}} {
		exit, step, err := sigtermOnce(bin, cfg, filepath.Join(dir, mode.name), mode.extra)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mode.name, err)
		}
		figs = append(figs, figure{"sigterm_to_exit_s_" + mode.name, exit, "s"}, figure{"slow_step_s_" + mode.name, step, "s"})
	}
	return figs, nil
}

// sigtermOnce runs the slow job, sends SIGTERM 3 s after step 0's
// checkpoint appears, and returns the seconds until the process exited
// (it must exit 143) and how long step 0 took.
func sigtermOnce(bin, cfg, state string, extra []string) (exit, step float64, err error) {
	args := append([]string{"run", "--config", cfg, "--steps", "4", "--no-eval", "--quiet", "--log-level", "warn", "--state", state}, extra...)
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	first := filepath.Join(state, "checkpoints", "step-1.safetensors")
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(first); err == nil {
			break
		}
		select {
		case err := <-done:
			return 0, 0, fmt.Errorf("ended before its first step (%v):\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return 0, 0, fmt.Errorf("no first step within 10 minutes")
		}
	}
	time.Sleep(3 * time.Second) // well into step 1
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, 0, err
	}
	werr := <-done
	exit = time.Since(t0).Seconds()
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		return 0, 0, fmt.Errorf("exit %d (%v) after SIGTERM, want 143:\n%s", code, werr, out.String())
	}
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	l, err := db.Ledger(1, 1)
	if err != nil || len(l) != 1 {
		return 0, 0, fmt.Errorf("reading step 1 of the ledger: %v", err)
	}
	return exit, l[0].WallSeconds, nil
}
