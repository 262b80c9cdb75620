package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

func runCmd(args []string, env Env) int {
	fs := newFlagSet("run", "run --config FILE [--workers SCHEDULE] [--steps N] [--seed S] [--state DIR] [--summary FILE]", env)
	config := fs.String("config", os.Getenv("EASYSCALE_CONFIG"), "job file (TOML), e.g. examples/mnist/job.toml (env EASYSCALE_CONFIG)")
	workers := fs.String("workers", "", "physical workers per step: N, or STEP:N[@S1/S2/...],... e.g. 0:1,20:3,35:8 (default: one per logical worker)")
	steps := fs.Int64("steps", envInt("EASYSCALE_STEPS"), "stop after this many steps (0: the job's horizon); the LR schedule still follows the horizon (env EASYSCALE_STEPS)")
	seed := fs.Uint64("seed", 0, "override the job file's seed (a different seed is a different job)")
	state := fs.String("state", os.Getenv("EASYSCALE_STATE"), "state directory (SQLite ledger + checkpoints); rerunning with it resumes (env EASYSCALE_STATE)")
	summary := fs.String("summary", os.Getenv("EASYSCALE_SUMMARY"), "write the JSON summary to this file (env EASYSCALE_SUMMARY)")
	threads := fs.Int("threads", 0, "cores to use in total (default: all)")
	noEval := fs.Bool("no-eval", false, "skip the test-set evaluation at the end")
	quiet := fs.Bool("quiet", false, "no progress display")
	procs := fs.Bool("procs", false, "run the --workers schedule as real worker processes on this machine (else goroutines)")
	listen := fs.String("listen", "", "with --procs or external workers: the coordinator's address (default 127.0.0.1:0)")
	killAt := fs.String("kill-at", "", "fault injection: STEP:RANK[,...] SIGKILL that worker process mid-step (needs --procs)")
	termAt := fs.String("term-at", "", "fault injection: STEP:RANK[,...] SIGTERM that worker process (needs --procs)")
	allowNFS := fs.Bool("allow-network-fs", false, "allow a --state directory on NFS/Lustre/GPFS (SQLite is unsafe there; use a node-local disk)")
	hbTimeout := fs.Duration("heartbeat-timeout", 5*time.Second, "a worker silent this long is declared lost")
	var lf logFlags
	lf.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "easyscale run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *config == "" {
		fmt.Fprintln(env.Stderr, "easyscale run: --config is required (e.g. --config examples/mnist/job.toml)")
		return 2
	}
	log, err := lf.logger("easyscale", env.Stderr)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
		return 2
	}
	spec, err := jobspec.Load(*config)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
		return 2
	}
	if fs.Changed("seed") {
		spec.Seed = *seed
	}
	var sched schedule.Schedule
	if *workers != "" {
		if sched, err = schedule.Parse(*workers); err == nil {
			err = sched.Validate(spec.LogicalWorkers)
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
			return 2
		}
	}
	if *steps < 0 {
		fmt.Fprintf(env.Stderr, "easyscale run: --steps %d must not be negative\n", *steps)
		return 2
	}
	wl, err := workload.New(spec)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	task, onSlurm, err := slurmjob.FromEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
		return 2
	}
	onSlurm = onSlurm && !*procs && *workers == "" && os.Getenv("EASYSCALE_NO_SLURM") == ""
	var sr *slurmRun
	if onSlurm {
		sr = &slurmRun{task: task, listen: *listen, hb: *hbTimeout, threads: *threads, log: log, joinWait: 120 * time.Second}
		if !task.IsCoordinator() {
			return sr.workerTask(ctx)
		}
	}
	opts := trainer.Options{Spec: spec, Workload: wl, Schedule: sched, StopAfter: *steps, StateDir: *state,
		Threads: *threads, SkipEval: *noEval, Logger: log, AllowNetworkFS: *allowNFS}
	var finish func(*trainer.Summary)
	if onSlurm {
		if finish, err = sr.coordinatorTask(ctx, &opts); err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
			return 1
		}
	} else if *procs {
		coord, err := newCoordinator(spec, state, *listen, *killAt, *termAt, *hbTimeout, *threads, log)
		if err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
			return 2
		}
		opts.Executor, opts.StateDir = coord, *state
	} else if *killAt != "" || *termAt != "" {
		fmt.Fprintln(env.Stderr, "easyscale run: --kill-at and --term-at need --procs")
		return 2
	}
	if !*quiet {
		opts.Progress, opts.ProgressIsTerminal = env.Stderr, env.StderrIsTerminal
	}
	log.Info("starting", "job", spec.Name, "job_id", spec.ID()[:19], "logical_workers", spec.LogicalWorkers,
		"micro_batch", spec.MicroBatch, "schedule", scheduleLabel(sched, spec.LogicalWorkers), "state", *state)
	sum, err := trainer.Run(ctx, opts)
	if finish != nil {
		finish(sum)
	}
	if errors.Is(err, trainer.ErrInterrupted) {
		log.Warn("interrupted by a signal; the state is checkpointed", "error", err)
		return 143 // 128+SIGTERM: stopped on request, resumable
	}
	if err != nil {
		log.Error("run failed", "error", err)
		return 1
	}
	out, _ := json.MarshalIndent(sum, "", "  ")
	if *summary != "" {
		if err := writeFileAtomic(*summary, append(out, '\n')); err != nil {
			log.Error("writing summary", "path", *summary, "error", err)
			return 1
		}
	}
	fmt.Fprintf(env.Stdout, "steps %d  digest %s  train_loss %.4f%s  reallocations %d\n",
		sum.Steps, sum.Digest, sum.TrainLoss, accuracyText(sum), sum.Reallocations)
	return 0
}

func accuracyText(s *trainer.Summary) string {
	if s.TestAccuracy == nil {
		return ""
	}
	return fmt.Sprintf("  test_accuracy %.4f", *s.TestAccuracy)
}

func scheduleLabel(s schedule.Schedule, n int) string {
	if s == nil {
		return fmt.Sprintf("%d (one per logical worker)", n)
	}
	return s.String()
}

func envInt(key string) int64 {
	var v int64
	if s := os.Getenv(key); s != "" {
		if _, err := fmt.Sscan(s, &v); err != nil {
			return -1 // reported as a negative --steps
		}
	}
	return v
}

// writeFileAtomic writes b to path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s: %w", tmp, err)
	}
	return nil
}
