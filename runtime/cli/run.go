package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

func runCmd(args []string, env Env) (code int) {
	fs := newFlagSet("run", "run --config FILE [--workers SCHEDULE] [--steps N] [--seed S] [--state DIR] [--summary FILE]", env)
	config := fs.String("config", os.Getenv("EASYSCALE_CONFIG"), "job file (TOML), e.g. examples/mnist/job.toml (env EASYSCALE_CONFIG)")
	workers := fs.String("workers", "", "physical workers per step: N, or STEP:N[@S1/S2/...],... e.g. 0:1,20:3,35:8 (default: one per logical worker)")
	envSteps, envStepsErr := envInt("EASYSCALE_STEPS")
	steps := fs.Int64("steps", envSteps, "stop after this many steps (0: the job's horizon); the LR schedule still follows the horizon (env EASYSCALE_STEPS)")
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
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "easyscale run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if envStepsErr != nil && !fs.Changed("steps") {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", envStepsErr)
		return 2
	}
	if err := checkRunFlags(fs, *workers, *threads, *steps); err != nil {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
		return 2
	}
	if *summary != "" {
		if err := checkWritableDir(filepath.Dir(*summary)); err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: --summary %s: %v\n", *summary, err)
			return 2
		}
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
	torch := spec.Engine == jobspec.EngineTorch
	var wl workload.Workload
	if torch {
		if *procs {
			fmt.Fprintln(env.Stderr, "easyscale run: engine \"torch\" runs every physical worker as a Python process already: drop --procs (--workers sets how many; --listen lets workers on other machines join)")
			return 2
		}
	} else if wl, err = workload.New(spec); err != nil {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
		return 1
	}
	kills, terms, err := faultFlags(*killAt, *termAt, *procs || *listen != "" || torch, faultSchedule(sched, spec.LogicalWorkers, *procs || torch), runStop(spec, wl, *steps))
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var caught atomic.Int32 // the signal that stopped the run, for the exit code
	go func() {
		select {
		case s := <-sigs:
			caught.Store(int32(s.(syscall.Signal)))
			log.Warn("signal: abandoning the step in progress, checkpointing the last completed step and stopping", "signal", s.String())
			cancel()
		case <-ctx.Done():
			return
		}
		// A second signal means "now": the checkpoint files are written
		// through a rename, so an exit mid-write keeps the previous one.
		s := <-sigs
		log.Warn("second signal: exiting without waiting for the checkpoint", "signal", s.String())
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
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
		// The step's exit status is the coordinator's: tasks that Slurm
		// kills when it shrinks the job make srun fail, so the batch script
		// reads this file (see examples/slurm/mnist.sbatch).
		defer func() { sr.recordExit(code) }()
	}
	opts := trainer.Options{Spec: spec, Workload: wl, Schedule: sched, StopAfter: *steps, StateDir: *state,
		Threads: *threads, SkipEval: *noEval, Logger: log, AllowNetworkFS: *allowNFS}
	if torch {
		listenAddr := *listen
		if onSlurm && listenAddr == "" {
			// Task 0's processes are reached on this node's Slurm address.
			listenAddr = net.JoinHostPort(sr.nodeAddr(ctx), "0")
			sr.listen = listenAddr
		}
		eng, err := torchengine.New(ctx, torchengine.Options{Spec: spec, Stderr: env.Stderr,
			HeartbeatTimeout: int(max(1, hbTimeout.Seconds())), KillAt: byStep(kills), TermAt: byStep(terms), Listen: listenAddr, Logger: log})
		if err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
			return 1
		}
		opts.Engine = eng
		if *listen != "" && !onSlurm {
			// Workers on other machines join this engine; this machine
			// keeps --workers processes (default one) of its own.
			ln, err := listenTorch(eng, state, *listen, log)
			if err != nil {
				eng.Close()
				fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
				return 2
			}
			opts.StateDir = *state
			if opts.Schedule == nil {
				opts.Schedule = schedule.Schedule{{Workers: 1}}
			}
			log.Info("waiting for workers", "join", ln.Addr(), "token_file", ln.TokenPath(), "workers", opts.Schedule[0].Workers)
		}
	}
	var finish func(*trainer.Summary)
	if onSlurm {
		if finish, err = sr.coordinatorTask(ctx, &opts); err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
			return 1
		}
	} else if !torch && (*procs || *listen != "") {
		// --procs launches the schedule's workers here; --listen alone
		// hosts the coordinator and one local worker, and waits for the
		// others to join with `easyscale worker`.
		coord, err := newCoordinator(spec, wl.Data(), state, *listen, kills, terms, *hbTimeout, *threads, *procs, log)
		if err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
			return 2
		}
		opts.Executor, opts.StateDir = coord, *state
		if !*procs {
			finish = startLocalWorker(ctx, coord, *threads, log)
			if opts.Schedule == nil {
				opts.Schedule = schedule.Schedule{{Workers: 1}}
			}
			log.Info("waiting for workers", "join", coord.Addr(), "token_file", coord.TokenPath(), "workers", opts.Schedule[0].Workers)
		}
	}
	if !*quiet && !lf.json { // with --log-json, stderr carries JSON lines only
		opts.Progress, opts.ProgressIsTerminal = env.Stderr, env.StderrIsTerminal
	}
	files := data.Manifest(nil)
	if wl != nil {
		files = wl.Data()
	} else if opts.Engine != nil {
		files = opts.Engine.Data()
	}
	log.Info("starting", "job_name", spec.Name, "engine", engineName(spec), "job_id", spec.ShortID(), "data", files.Digest()[:19], "logical_workers", spec.LogicalWorkers,
		"micro_batch", spec.MicroBatch, "schedule", scheduleLabel(sched, spec.LogicalWorkers), "state", *state)
	sum, err := trainer.Run(ctx, opts)
	if errors.Is(err, trainer.ErrInterrupted) {
		// No finish: it waits for the local worker, which may still be
		// computing the abandoned step.
		log.Warn("interrupted by a signal; the state is checkpointed", "error", err)
		return 128 + int(caught.Load()) // 130 for SIGINT, 143 for SIGTERM: stopped on request, resumable
	}
	if finish != nil {
		finish(sum)
	}
	if err != nil {
		log.Error("run failed", "error", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "steps %d  digest %s  train_loss %.4f%s  reallocations %d%s\n",
		sum.Steps, sum.Digest, sum.TrainLoss, accuracyText(sum), sum.Reallocations, digestText(sum))
	out, _ := json.MarshalIndent(sum, "", "  ")
	if *summary != "" {
		if err := writeFileAtomic(*summary, append(out, '\n')); err != nil {
			log.Error("writing summary", "path", *summary, "error", err)
			return 1
		}
	}
	return 0
}

// checkRunFlags refuses flag values that would otherwise silently mean
// something else: an explicitly empty --workers (the default), an
// explicitly empty --kill-at or --term-at (no fault at all), a --threads
// below 1 (all cores), a negative --steps.
func checkRunFlags(fs *pflag.FlagSet, workers string, threads int, steps int64) error {
	if fs.Changed("workers") && strings.TrimSpace(workers) == "" {
		return errors.New("--workers is empty: give N or STEP:N[,STEP:N...], e.g. --workers 0:2,20:4, or leave the flag out for one worker per logical worker")
	}
	for _, name := range []string{"kill-at", "term-at"} {
		if f := fs.Lookup(name); f != nil && f.Changed && f.Value.String() == "" {
			return fmt.Errorf("--%s is empty: it would inject no fault; give STEP:RANK[,STEP:RANK...], e.g. 12:1, or leave the flag out", name)
		}
	}
	if fs.Changed("threads") && threads < 1 {
		return fmt.Errorf("--threads %d: give a positive number of cores, or leave the flag out to use all %d", threads, runtime.NumCPU())
	}
	if steps < 0 {
		return fmt.Errorf("--steps %d must not be negative: give the number of steps to stop after, or 0 (or no flag) for the job's horizon", steps)
	}
	return trainer.CheckFaultEnv()
}

// faultFlags parses --kill-at and --term-at and refuses points that need
// worker processes (procs: --procs or --listen) without them, or that can
// never fire on sched before stop.
func faultFlags(killAt, termAt string, procs bool, sched schedule.Schedule, stop int64) (kills, terms []cluster.Fault, err error) {
	if kills, err = parseFaults("--kill-at", killAt); err != nil {
		return nil, nil, err
	}
	if terms, err = parseFaults("--term-at", termAt); err != nil {
		return nil, nil, err
	}
	if len(kills)+len(terms) == 0 {
		return nil, nil, nil
	}
	if !procs {
		return nil, nil, errors.New("--kill-at and --term-at need worker processes: add --procs")
	}
	if err := checkFaults("--kill-at", kills, sched, stop); err != nil {
		return nil, nil, err
	}
	return kills, terms, checkFaults("--term-at", terms, sched, stop)
}

// faultSchedule is the schedule the run's worker processes follow: sched,
// or by default one worker per logical worker with --procs and one local
// worker with --listen alone.
func faultSchedule(sched schedule.Schedule, logical int, procs bool) schedule.Schedule {
	switch {
	case sched != nil:
		return sched
	case procs:
		return schedule.Schedule{{Workers: logical}}
	}
	return schedule.Schedule{{Workers: 1}}
}

// runStop is the step the run stops at: steps when positive and below the
// job's horizon, else the horizon (math.MaxInt64 when the horizon cannot
// be computed here; the trainer then reports why).
func runStop(spec *jobspec.Spec, wl workload.Workload, steps int64) int64 {
	stop := int64(math.MaxInt64)
	if wl == nil { // a torch job: the horizon is its steps
		stop = int64(spec.Steps)
	} else if s, err := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed); err == nil {
		if h, err := spec.Horizon(s.StepsPerEpoch(spec.MicroBatch)); err == nil && s.StepsPerEpoch(spec.MicroBatch) > 0 {
			stop = h
		}
	}
	if steps > 0 && steps < stop {
		stop = steps
	}
	return stop
}

// digestText says the ledger's digest interval when it is not every step.
func digestText(s *trainer.Summary) string {
	if s.DigestEvery <= 1 {
		return ""
	}
	cost := ""
	if s.DigestCostPct != nil {
		cost = fmt.Sprintf(", hashing %.1f %% of a step", *s.DigestCostPct)
	}
	return fmt.Sprintf("  ledger digest every %d steps (%d hashed%s)", s.DigestEvery, s.HashedSteps, cost)
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

// envInt reads an integer environment variable (0 when unset).
func envInt(key string) (int64, error) {
	s := os.Getenv(key)
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("environment variable %s=%q is not a non-negative integer", key, s)
	}
	return v, nil
}

// checkWritableDir fails unless dir exists and this process may create
// files in it, so a bad --summary path is refused before training.
func checkWritableDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("its directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	return nil
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

// byStep groups fault points by step (the torch engine's form).
func byStep(faults []cluster.Fault) map[int64][]int {
	out := map[int64][]int{}
	for _, f := range faults {
		out[f.Step] = append(out[f.Step], f.Rank)
	}
	return out
}

func engineName(spec *jobspec.Spec) string {
	if spec.Engine == "" {
		return jobspec.EngineNative
	}
	return spec.Engine
}

// listenTorch lets workers on other machines join a torch job: the token
// goes into the state directory (a fresh temporary one without --state).
func listenTorch(eng *torchengine.Engine, state *string, listen string, log hclog.Logger) (*cluster.Listener, error) {
	if *state == "" {
		dir, err := os.MkdirTemp("", "easyscale-state-")
		if err != nil {
			return nil, err
		}
		*state = dir
	}
	if err := os.MkdirAll(*state, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	return eng.Listen(cluster.ListenerOptions{StateDir: *state, Listen: listen, Logger: log})
}
