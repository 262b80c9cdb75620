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

	"github.com/google/renameio/v2"
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

// runCmd is `easyscale run`. It reads the command line (runFlags),
// validates it into a job (runFlags.job: exit 2 for what the user can fix,
// 1 for a workload that cannot be built), then runs the job in one of its
// modes: a Slurm task that is not the coordinator joins the coordinator
// (slurmRun.workerTask); every other mode trains here with the executor
// its flags choose (runJob.setup) and reports (runJob.train).
func runCmd(args []string, env Env) (code int) {
	fs, f := runFlagSet(env)
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if task, onSlurm, err := slurmjob.FromEnv(os.LookupEnv); err == nil && onSlurm && f.taskLog != "" {
		// the task's own copy of its log, on its node (tasklog.go)
		if tl, err := openTaskLog(f.taskLog, task); err != nil {
			fmt.Fprintf(env.Stderr, "easyscale run: --task-log: %v (going on without it)\n", err)
		} else {
			env.Stderr = tl.tee(env.Stderr)
			fs.SetOutput(env.Stderr)
			tl.start(task)
			defer func() { tl.exit(code) }()
		}
	}
	j, err := f.job(fs)
	if err != nil {
		return runFailed(env, err)
	}
	ctx, caught, stop := j.catchSignals()
	defer stop()
	task, onSlurm, err := slurmjob.FromEnv(os.LookupEnv)
	if err != nil {
		return runFailed(env, badRun(err))
	}
	if onSlurm && !f.procs && f.workers == "" && os.Getenv("EASYSCALE_NO_SLURM") == "" {
		// A task outlives its srun when the first node is lost (srun
		// ran there): its stdout and stderr, which srun forwarded, may
		// then be broken pipes, and a write to them must not end the
		// task (Go exits on SIGPIPE for fd 1 and 2) while it takes over
		// or trains on (docs/first-node-loss.md).
		signal.Ignore(syscall.SIGPIPE)
		// A coordinator that finds another one took its place stops
		// (slurmRun.watchSuperseded) through this context.
		var supersede context.CancelFunc
		ctx, supersede = context.WithCancel(ctx)
		defer supersede()
		j.slurm = &slurmRun{task: task, listen: f.listen, hb: f.hbTimeout, threads: f.threads, log: j.log, joinWait: 120 * time.Second,
			state: f.state, allowNFS: f.allowNFS, stop: runStop(j.spec, j.wl, f.steps), supersede: supersede}
		if !task.IsCoordinator() {
			var standby *cluster.StandbyCopy
			if code, standby = j.slurm.workerTask(ctx); standby == nil {
				return code
			}
			// This task took the lost coordinator's place: it trains on
			// as the coordinator, and then records the run's exit status
			// (code, as returned) and ends the job (takeover.go).
			j.slurm.standby = standby
			defer func() { j.slurm.endAfterTakeover(ctx, code) }()
		} else {
			// The step's exit status is the coordinator's: tasks that Slurm
			// kills when it shrinks the job make srun fail, so the batch script
			// reads this file (see examples/slurm/mnist.sbatch).
			defer func() { j.slurm.recordExit(code) }()
			if why, done := j.slurm.trainedByTakeover(); done {
				fmt.Fprintf(env.Stdout, "the training ended in the job's previous run, coordinated after a takeover (%s): nothing left to do\n", why)
				return 0
			}
		}
	}
	opts, finish, err := j.setup(ctx, env)
	if err != nil {
		return runFailed(env, err)
	}
	return j.train(ctx, env, opts, finish, caught)
}

// runFlags is easyscale run's command line.
type runFlags struct {
	config, workers, state, summary, listen, killAt, termAt string
	taskLog                                                 string
	onOtherNumerics                                         string // refuse | start-over
	steps                                                   int64
	stepsEnvErr                                             error // EASYSCALE_STEPS is not a count
	seed                                                    uint64
	threads                                                 int
	noEval, quiet, procs, cpuBind, allowNFS, noSelfCheck    bool
	hbTimeout                                               time.Duration
	log                                                     logFlags
}

// runFlagSet defines easyscale run's flags, with their environment
// defaults, on a new flag set.
func runFlagSet(env Env) (*pflag.FlagSet, *runFlags) {
	f := &runFlags{}
	fs := newFlagSet("run", "run --config FILE [--workers SCHEDULE] [--steps N] [--seed S] [--state DIR] [--summary FILE]", env)
	fs.StringVar(&f.config, "config", os.Getenv("EASYSCALE_CONFIG"), "job file (TOML), e.g. examples/mnist/job.toml (env EASYSCALE_CONFIG)")
	fs.StringVar(&f.workers, "workers", "", "physical workers per step: N, or STEP:N[@S1/S2/...],... e.g. 0:1,20:3,35:8 (default: one per logical worker)")
	envSteps, envStepsErr := envInt("EASYSCALE_STEPS")
	f.stepsEnvErr = envStepsErr
	fs.Int64Var(&f.steps, "steps", envSteps, "stop after this many steps (0: the job's horizon); the LR schedule still follows the horizon (env EASYSCALE_STEPS)")
	fs.Uint64Var(&f.seed, "seed", 0, "override the job file's seed (a different seed is a different job)")
	fs.StringVar(&f.state, "state", os.Getenv("EASYSCALE_STATE"), "state directory (SQLite ledger + checkpoints); rerunning with it resumes (env EASYSCALE_STATE)")
	fs.StringVar(&f.summary, "summary", os.Getenv("EASYSCALE_SUMMARY"), "write the JSON summary to this file (env EASYSCALE_SUMMARY)")
	fs.IntVar(&f.threads, "threads", 0, "cores to use in total (default: all)")
	fs.BoolVar(&f.noEval, "no-eval", false, "skip the test-set evaluation at the end (a job without a test set skips it anyway)")
	fs.BoolVar(&f.noSelfCheck, "no-self-check", false, "torch jobs: skip the consistency self-check before the first step (the summary says so)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress display")
	fs.BoolVar(&f.procs, "procs", false, "run the --workers schedule as real worker processes on this machine (else goroutines)")
	fs.BoolVar(&f.cpuBind, "cpu-bind", true, "with --procs: bind each worker process to its own share of this process's CPUs (false: let them float)")
	fs.StringVar(&f.listen, "listen", "", "with --procs or external workers: the coordinator's address (default 127.0.0.1:0)")
	fs.StringVar(&f.killAt, "kill-at", "", "fault injection: STEP:RANK[,...] SIGKILL that worker process mid-step once STEP steps are done, so in step STEP+1 as the ledger counts (a native job needs --procs; a torch job's workers are processes already)")
	fs.StringVar(&f.termAt, "term-at", "", "fault injection: STEP:RANK[,...] SIGTERM that worker process (a native job needs --procs; a torch job's workers are processes already)")
	fs.StringVar(&f.taskLog, "task-log", os.Getenv("EASYSCALE_TASK_LOG"), "as a Slurm task: also write the log to DIR/easyscale-JOBID.RANK.NODE.log on the task's node, with its exit status (its stderr goes through srun, which dies with the job's first node) (env EASYSCALE_TASK_LOG)")
	fs.StringVar(&f.onOtherNumerics, "on-other-numerics", envOr("EASYSCALE_ON_OTHER_NUMERICS", onOtherNumericsRefuse),
		"torch jobs resumed from a checkpoint computed with other numerics (another GPU type, CPU ISA or torch release): refuse (fail, the state untouched) or start-over (from step 0, bit-identical to a fixed run here; the state so far is kept under the state directory's superseded/) (env EASYSCALE_ON_OTHER_NUMERICS)")
	fs.BoolVar(&f.allowNFS, "allow-network-fs", false, "allow a --state directory on NFS/Lustre/GPFS (SQLite is unsafe there; use a node-local disk)")
	fs.DurationVar(&f.hbTimeout, "heartbeat-timeout", 5*time.Second, "a worker silent this long is declared lost")
	f.log.register(fs)
	return fs, f
}

// runJob is a validated easyscale run: the job, its workload (nil for a
// torch job), schedule and fault points, and the Slurm task it is when it
// runs on Slurm (nil otherwise).
type runJob struct {
	f            *runFlags
	spec         *jobspec.Spec
	wl           workload.Workload
	sched        schedule.Schedule
	torch        bool
	kills, terms []cluster.Fault
	log          hclog.Logger
	slurm        *slurmRun
}

// runError is an error with the exit status easyscale run returns for it.
type runError struct {
	code int
	err  error
}

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// badRun marks err as bad usage (exit 2): the command line, the job file
// or the environment needs fixing.
func badRun(err error) error { return &runError{code: cmdline.ExitUsage, err: err} }

// runFailed prints err as easyscale run's error and returns its exit
// status: a runError's, else 1.
func runFailed(env Env, err error) int {
	fmt.Fprintf(env.Stderr, "easyscale run: %v\n", err)
	var re *runError
	if errors.As(err, &re) {
		return re.code
	}
	return 1
}

// job validates the parsed flags and loads the job they name, in the
// order a user fixes them: the command line, the job file, the schedule,
// the engine's options, the fault points. Every error is bad usage
// (badRun) except a workload that cannot be built (exit 1).
func (f *runFlags) job(fs *pflag.FlagSet) (*runJob, error) {
	if fs.NArg() > 0 {
		return nil, badRun(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if f.stepsEnvErr != nil && !fs.Changed("steps") {
		return nil, badRun(f.stepsEnvErr)
	}
	if err := checkRunFlags(fs, f.workers, f.threads, f.steps); err != nil {
		return nil, badRun(err)
	}
	if err := checkOnOtherNumerics(fs, f.onOtherNumerics); err != nil {
		return nil, badRun(err)
	}
	if f.summary != "" {
		if err := checkWritableDir(filepath.Dir(f.summary)); err != nil {
			return nil, badRun(fmt.Errorf("--summary %s: %w", f.summary, err))
		}
	}
	if f.config == "" {
		return nil, badRun(errors.New("--config is required (e.g. --config examples/mnist/job.toml)"))
	}
	log, err := f.log.logger("easyscale", fs.Output())
	if err != nil {
		return nil, badRun(err)
	}
	j := &runJob{f: f, log: log}
	if j.spec, err = jobspec.Load(f.config); err != nil {
		return nil, badRun(err)
	}
	if fs.Changed("seed") {
		j.spec.Seed = f.seed
	}
	if f.workers != "" {
		if j.sched, err = schedule.Parse(f.workers); err == nil {
			err = j.sched.Validate(j.spec.LogicalWorkers)
		}
		if err != nil {
			return nil, badRun(err)
		}
	}
	j.torch = j.spec.Engine == jobspec.EngineTorch
	if j.torch {
		if f.procs {
			return nil, badRun(errors.New("engine \"torch\" runs every physical worker as a Python process already: drop --procs (--workers sets how many; --listen lets workers on other machines join)"))
		}
	} else if j.wl, err = workload.New(j.spec); err != nil {
		return nil, err
	}
	procs := f.procs || f.listen != "" || j.torch
	sched := faultSchedule(j.sched, j.spec.LogicalWorkers, f.procs || j.torch)
	if j.kills, j.terms, err = faultFlags(f.killAt, f.termAt, procs, sched, runStop(j.spec, j.wl, f.steps)); err != nil {
		return nil, badRun(err)
	}
	return j, nil
}

// catchSignals cancels ctx on the first SIGINT or SIGTERM (the trainer
// then checkpoints the last completed step and stops; caught holds the
// signal, for the exit status) and exits at once on a second one. stop
// ends the watch.
func (j *runJob) catchSignals() (ctx context.Context, caught *atomic.Int32, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	caught = new(atomic.Int32)
	go func() {
		select {
		case s := <-sigs:
			caught.Store(int32(s.(syscall.Signal)))
			j.log.Warn("signal: abandoning the step in progress, checkpointing the last completed step and stopping", "signal", s.String())
			cancel(fmt.Errorf("signal %s", s)) // the cause the trainer logs (a new user saw "context canceled")
		case <-ctx.Done():
			return
		}
		// A second signal means "now": the checkpoint files are written
		// through a rename, so an exit mid-write keeps the previous one.
		s := <-sigs
		j.log.Warn("second signal: exiting without waiting for the checkpoint", "signal", s.String())
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
	return ctx, caught, func() { signal.Stop(sigs); cancel(nil) }
}

// setup makes the trainer's options for the job's mode: a torch job gets
// its engine (setupTorch); then the coordinator of a Slurm job
// (slurmRun.coordinatorTask), or a native job with --procs or --listen
// (setupProcs), gets its executor; a native job without them trains in
// this process. finish, when not nil, is called with the summary.
func (j *runJob) setup(ctx context.Context, env Env) (opts trainer.Options, finish func(*trainer.Summary), err error) {
	f := j.f
	opts = trainer.Options{Spec: j.spec, Workload: j.wl, Schedule: j.sched, StopAfter: f.steps, StateDir: f.state,
		Threads: f.threads, SkipEval: f.noEval, Logger: j.log, AllowNetworkFS: f.allowNFS,
		StartOverOnOtherNumerics: f.onOtherNumerics == onOtherNumericsStartOver}
	if j.torch {
		if err := j.setupTorch(ctx, env, &opts); err != nil {
			return opts, nil, err
		}
	} else if opts.StartOverOnOtherNumerics {
		j.log.Warn("--on-other-numerics=start-over does nothing for a native job: its bits do not depend on where it runs")
	}
	switch {
	case j.slurm != nil:
		if finish, err = j.slurm.coordinatorTask(ctx, &opts); err != nil {
			return opts, nil, err
		}
	case !j.torch && (f.procs || f.listen != ""):
		if finish, err = j.setupProcs(ctx, &opts); err != nil {
			return opts, nil, err
		}
	}
	if !f.quiet && !f.log.json { // with --log-json, stderr carries JSON lines only
		opts.Progress, opts.ProgressIsTerminal = env.Stderr, env.StderrIsTerminal
	}
	return opts, finish, nil
}

// setupTorch starts the torch engine of the job (on Slurm, listening on
// this node's address) and, with --listen off Slurm, lets workers on
// other machines join it.
func (j *runJob) setupTorch(ctx context.Context, env Env, opts *trainer.Options) error {
	f := j.f
	listenAddr := f.listen
	if j.slurm != nil && listenAddr == "" {
		// Task 0's processes are reached on this node's Slurm address.
		listenAddr = net.JoinHostPort(j.slurm.nodeAddr(ctx), "0")
		j.slurm.listen = listenAddr
	}
	// The first allocation's processes start together (one on Slurm,
	// where the other tasks bring their own).
	workers := 1
	if j.slurm == nil {
		workers = faultSchedule(j.sched, j.spec.LogicalWorkers, f.listen == "").At(0).Workers
	}
	o := torchengine.Options{Spec: j.spec, Stderr: env.Stderr,
		HeartbeatTimeout: int(max(1, f.hbTimeout.Seconds())), KillAt: byStep(j.kills), TermAt: byStep(j.terms), Listen: listenAddr, Logger: j.log,
		NoSelfCheck: f.noSelfCheck, Workers: workers}
	if j.slurm != nil { // a standby on another node takes over should this one be lost
		o.Node, o.Standby = j.slurm.task.NodeName, true
		if j.slurm.standby == nil && j.slurm.task.NumNodes > 1 {
			// from the first step: the other nodes' tasks start Python
			// as this one does (a takeover's survivors rejoin later, and
			// it trains on without waiting for them)
			o.AwaitStandby = torchStandbyWait
		}
	}
	if j.slurm != nil && j.slurm.standby != nil {
		// This task took over: its spare Python process (started
		// while it was the standby) becomes the engine's first, and the
		// self-check, which the lost coordinator ran before this run's
		// first step, is not run again (docs/first-node-loss.md).
		if sp, ok := j.slurm.standby.Warm.(*torchengine.Spare); ok {
			o.Spare = sp
			j.slurm.standby.Warm = nil
		}
		o.CheckedBefore = "ran before this run's first step on the coordinator this standby took over from"
	}
	eng, err := torchengine.New(ctx, o)
	if err != nil {
		return err
	}
	opts.Engine = eng
	if f.listen == "" || j.slurm != nil {
		return nil
	}
	// Workers on other machines join this engine; this machine keeps
	// --workers processes (default one) of its own.
	ln, err := listenTorch(eng, &f.state, f.listen, j.log)
	if err != nil {
		eng.Close()
		return badRun(err)
	}
	opts.StateDir = f.state
	if opts.Schedule == nil {
		opts.Schedule = schedule.Schedule{{Workers: 1}}
	}
	j.log.Info("waiting for workers", "join", ln.Addr(), "token_file", ln.TokenPath(), "workers", opts.Schedule[0].Workers)
	return nil
}

// setupProcs hosts a native job's coordinator: --procs launches the
// schedule's workers here; --listen alone hosts the coordinator and one
// local worker, and waits for the others to join with `easyscale worker`.
func (j *runJob) setupProcs(ctx context.Context, opts *trainer.Options) (finish func(*trainer.Summary), err error) {
	f := j.f
	coord, err := newCoordinator(j.spec, j.wl.Data(), &f.state, f.listen, j.kills, j.terms, f.hbTimeout, f.threads, f.procs, f.cpuBind, j.log)
	if err != nil {
		return nil, badRun(err)
	}
	opts.Executor, opts.StateDir = coord, f.state
	if f.procs {
		return nil, nil
	}
	finish = startLocalWorker(ctx, coord, f.threads, j.log)
	if opts.Schedule == nil {
		opts.Schedule = schedule.Schedule{{Workers: 1}}
	}
	j.log.Info("waiting for workers", "join", coord.Addr(), "token_file", coord.TokenPath(), "workers", opts.Schedule[0].Workers)
	return finish, nil
}

// train runs the trainer and reports: the result line on stdout and the
// JSON summary (--summary). An interrupted run exits 128 plus the signal
// (130 for SIGINT, 143 for SIGTERM: stopped on request, resumable).
func (j *runJob) train(ctx context.Context, env Env, opts trainer.Options, finish func(*trainer.Summary), caught *atomic.Int32) int {
	files := data.Manifest(nil)
	if j.wl != nil {
		files = j.wl.Data()
	} else if opts.Engine != nil {
		files = opts.Engine.Data()
	}
	j.log.Info("starting", "job_name", j.spec.Name, "engine", engineName(j.spec), "job_id", j.spec.ShortID(), "data", files.Digest()[:19], "logical_workers", j.spec.LogicalWorkers,
		"micro_batch", j.spec.MicroBatch, "schedule", scheduleLabel(j.sched, j.spec.LogicalWorkers), "state", j.f.state)
	sum, err := trainer.Run(ctx, opts)
	if errors.Is(err, trainer.ErrInterrupted) {
		// No finish: it waits for the local worker, which may still be
		// computing the abandoned step.
		j.log.Warn("interrupted by a signal; the state is checkpointed", "error", err)
		return 128 + int(caught.Load())
	}
	if finish != nil {
		finish(sum)
	}
	if err != nil {
		j.log.Error("run failed", "error", err)
		// A job-file field checked only once the data set is read (the
		// warmup against an epochs horizon) is bad usage too.
		if fe := (*jobspec.FieldError)(nil); errors.As(err, &fe) {
			return 2
		}
		return 1
	}
	fmt.Fprintf(env.Stdout, "steps %d  digest %s  train_loss %.4f%s  reallocations %d%s%s\n",
		sum.Steps, sum.Digest, sum.TrainLoss, accuracyText(sum), sum.Reallocations, digestText(sum), selfCheckText(sum))
	out, _ := json.MarshalIndent(sum, "", "  ")
	if j.f.summary != "" {
		if err := writeFileAtomic(j.f.summary, append(out, '\n')); err != nil {
			j.log.Error("writing summary", "path", j.f.summary, "error", err)
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
		return nil, nil, errors.New("--kill-at and --term-at need worker processes: add --procs (a torch job has them without it)")
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

// selfCheckText says how the torch engine's self-check went, when it ran or was skipped.
func selfCheckText(s *trainer.Summary) string {
	if s.SelfCheck == "" {
		return ""
	}
	return "  self-check " + s.SelfCheck
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

// writeFileAtomic writes b to path (mode 0644) through an exclusively created
// temporary file in path's directory, renamed over path (google/renameio): a
// reader never sees half a file, and a link planted at any temporary name
// (PATH.tmp, which this wrote through before) is never followed.
func writeFileAtomic(path string, b []byte) error {
	if err := renameio.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
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
