package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// slurmRun is `easyscale run` as a task of `srun`: task 0 hosts the
// coordinator and a worker, the other tasks are workers. It returns the
// process exit code, or -1 when the summary is for the caller to print.
type slurmRun struct {
	task     *slurmjob.Task
	listen   string
	hb       time.Duration
	threads  int
	log      hclog.Logger
	runner   slurmcli.Runner
	joinWait time.Duration
	// state and allowNFS are --state and --allow-network-fs, which a
	// standby that takes over opens as the coordinator would.
	state    string
	allowNFS bool
	// standby is the committed state this worker task took over from
	// (nil: task 0, or no takeover), takeoverAt when it lost the
	// coordinator (takeover.go).
	standby    *cluster.StandbyCopy
	takeoverAt time.Time
	// stop is the step the run stops at (runStop): a state directory
	// with its checkpoint holds a finished training, which a standby
	// does not take over (claimTakeover). endGrace is how long such a
	// standby waits for the coordinator's exit status (0: defaultEndGrace).
	stop     int64
	endGrace time.Duration
	// lockGrace is how long a standby that lost the coordinator waits
	// for the state database's writer lock while the coordinator does not
	// answer (openToTakeOver); 0: defaultLockGrace.
	lockGrace time.Duration
	// supersede stops this task's run when it coordinates and another
	// task took its place (watchSuperseded); superseded is then set, and
	// the run records no exit status.
	supersede  context.CancelFunc
	superseded atomic.Bool

	runOnce sync.Once
	run     slurmjob.Run // rendezvousRun's answer
}

// rendezvousRun is the run of the job this task belongs to, which its
// rendezvous files are stamped with: its start is SLURM_JOB_START_TIME, or
// where Slurm does not set it the StartTime squeue reports
// (jobStart). It is asked once and kept.
func (s *slurmRun) rendezvousRun(ctx context.Context) slurmjob.Run {
	s.runOnce.Do(func() {
		s.run = s.task.Run()
		if s.run.Start == 0 {
			s.run.Start = s.jobStart(ctx)
		}
	})
	return s.run
}

// jobStart asks Slurm when this run of the job started (squeue's
// StartTime, in Unix seconds), trying up to 5 times 2 s apart. It returns
// 0, and logs why, when Slurm cannot say: the rendezvous files are then
// read without checking that they are this job's.
func (s *slurmRun) jobStart(ctx context.Context) int64 {
	var err error
	for try := range 5 {
		if try > 0 {
			select {
			case <-ctx.Done():
				err = fmt.Errorf("%w (after %v)", ctx.Err(), err)
			case <-time.After(2 * time.Second):
			}
			if ctx.Err() != nil {
				break
			}
		}
		var job slurmcli.Job
		if job, err = s.runner.Job(ctx, s.task.JobID); err != nil {
			continue
		}
		start, ok, perr := job.Start(time.Local)
		if perr == nil && ok {
			return start.Unix()
		}
		if err = perr; err == nil {
			err = fmt.Errorf("squeue shows job %s without a start time", s.task.JobID)
		}
		break
	}
	s.log.Warn("cannot tell this job's rendezvous files from those of an earlier job with its id: Slurm did not say when it started",
		"slurm_job_id", s.task.JobID, "error", err)
	return 0
}

// workerTask joins the coordinator of the job as one of its workers. It
// returns the process exit code, or, when this task was the coordinator's
// standby and took its place (takeover.go), the copy it resumes from:
// the caller then runs the job as its coordinator.
func (s *slurmRun) workerTask(ctx context.Context) (int, *cluster.StandbyCopy) {
	dir, run := s.task.Rendezvous, s.rendezvousRun(ctx)
	wctx, cancel := context.WithTimeout(ctx, s.joinWait)
	addr, err := slurmjob.WaitCoordinator(wctx, dir, run, time.Now().Add(-30*time.Second))
	cancel()
	if errors.Is(err, slurmjob.ErrEnded) {
		s.log.Info("the job's coordinator has ended; nothing to do", "slurm_job_id", s.task.JobID, "restart", run.Restart, "detail", err)
		return 0, nil
	}
	if err != nil {
		s.log.Error("no coordinator to join", "error", err)
		// The batch host may have died before task 0 published its address
		// (a tester killed it 0.2 s after the start: the survivors exited 1
		// and the job stayed RUNNING, idle, until its time limit). Once
		// Slurm declares it down, requeue as for a coordinator lost later.
		if s.requeueOrphan(ctx, 2*time.Second, 30*time.Second, false) {
			return 0, nil
		}
		return 1, nil
	}
	secret, err := auth.LoadSecret(filepath.Join(s.task.Rendezvous, cluster.TokenFile))
	if err != nil {
		s.log.Error("reading the job token", "error", err)
		return 1, nil
	}
	id, err := os.ReadFile(filepath.Join(s.task.Rendezvous, cluster.JobIDFile))
	if err != nil {
		s.log.Error("reading the job id", "error", err)
		return 1, nil
	}
	ended := func() bool { _, ok := slurmjob.Ended(dir, run); return ok }
	locate := func() string { a, _ := slurmjob.CoordinatorAddr(dir, run); return a }
	cp, err := s.takeoverWorker(ctx, func() error {
		return cluster.RunWorker(ctx, cluster.WorkerOptions{Join: addr, Secret: secret, JobID: trimLine(id), Threads: s.threads, Ended: ended, Logger: s.log,
			Node: s.task.NodeName, Takeover: true, Locate: locate,
			Torch: torchengine.Worker(torchengine.WorkerOptions{HeartbeatTimeout: s.hb})})
	})
	if cp != nil {
		return 0, cp
	}
	if errors.Is(err, cluster.ErrLeft) || errors.Is(err, cluster.ErrJobEnded) {
		return 0, nil
	}
	s.log.Error("worker stopped", "error", err)
	if errors.Is(err, cluster.ErrUnreachable) && s.requeueOrphan(ctx, 2*time.Second, 30*time.Second, false) {
		return 0, nil
	}
	return 1, nil
}

func trimLine(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return string(b)
}

// coordinatorTask sets up the coordinator executor and its local worker
// for opts; the caller runs the trainer with the returned options and then
// calls finish.
func (s *slurmRun) coordinatorTask(ctx context.Context, opts *trainer.Options) (finish func(*trainer.Summary), err error) {
	t := s.task
	// Nothing of the job's (its secret, environment, interpreter) goes
	// into a directory another user could change, nor is anything moved
	// in one.
	if err := os.MkdirAll(filepath.Dir(t.Rendezvous), 0o700); err != nil {
		return nil, fmt.Errorf("creating the rendezvous directory's parent %s (set EASYSCALE_RENDEZVOUS_DIR to a directory every node can write): %w", filepath.Dir(t.Rendezvous), err)
	}
	if err := slurmjob.CheckPrivateParent(filepath.Dir(t.Rendezvous)); err != nil {
		return nil, err
	}
	if s.standby != nil {
		// a standby taking over: the directory is this run's
	} else if moved, err := slurmjob.RetireStale(t.Rendezvous, t.RestartCount, time.Now()); err != nil {
		return nil, err
	} else if moved != "" {
		s.log.Warn("the rendezvous directory belonged to an earlier job with this id; moved it aside", "moved_to", moved)
	}
	if err := os.MkdirAll(t.Rendezvous, 0o700); err != nil {
		return nil, fmt.Errorf("creating the rendezvous directory %s (set EASYSCALE_RENDEZVOUS_DIR to a directory every node can write): %w", t.Rendezvous, err)
	}
	if err := slurmjob.CheckPrivateDir(t.Rendezvous); err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(t.Rendezvous, "state")
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	listen := s.listen
	if listen == "" {
		listen = net.JoinHostPort(s.nodeAddr(ctx), "0")
	}
	if eng, ok := opts.Engine.(*torchengine.Engine); ok {
		return s.torchCoordinatorTask(ctx, opts, eng, listen)
	}
	// An elastic job starts on the tasks that joined within the join
	// wait when they make its minimum; the others join at step boundaries.
	req := s.request(opts.Spec)
	workers, min := t.NTasks, t.MinTasks(req.MinNodes)
	if s.standby != nil {
		// the survivors: every worker but those of the lost node, and on
		// with any that rejoined within the join wait
		workers, min = s.standby.Survivors(), 1
	}
	coord, err := cluster.NewCoordinator(cluster.CoordinatorOptions{Spec: opts.Spec, Data: opts.Workload.Data(), StateDir: opts.StateDir, TokenDir: t.Rendezvous,
		Listen: listen, HeartbeatTimeout: s.hb, JoinTimeout: s.joinWait, MinWorkers: min, Standby: true, Node: t.NodeName, Logger: s.log})
	if err != nil {
		return nil, err
	}
	// Before the address: an extra job joins once it reads the address,
	// and its worker runs on the job's environment from the file.
	if err := slurmjob.PublishEnvironment(t.Rendezvous, os.Environ()); err != nil {
		coord.Close()
		return nil, err
	}
	if err := slurmjob.PublishCoordinator(t.Rendezvous, coord.Addr(), s.rendezvousRun(ctx)); err != nil {
		coord.Close()
		return nil, err
	}
	secret, err := auth.LoadSecret(coord.TokenPath())
	if err != nil {
		coord.Close()
		return nil, err
	}
	local := make(chan error, 1)
	var ended atomic.Bool // the trainer returned: the local worker must not wait for admission
	go func() {
		local <- cluster.RunWorker(ctx, cluster.WorkerOptions{Join: coord.Addr(), Secret: secret, JobID: coord.JobID(),
			Threads: s.threads, Ended: ended.Load, Node: t.NodeName, Logger: s.log.Named("worker")})
	}()
	opts.Executor = coord
	opts.Schedule = schedule.Schedule{{Workers: workers}}
	if s.standby != nil {
		s.recordTakeover(s.standby.Step)
		s.log.Info("took over as the coordinator", "slurm_job_id", t.JobID, "step", s.standby.Step, "workers", workers,
			"since_loss_ms", time.Since(s.takeoverAt).Milliseconds())
	}
	status := &slurmjob.Status{JobID: t.JobID, Request: req, Runner: s.runner, Log: s.log}
	opts.OnStep = func(step, stop int64, workers int) {
		status.Update(step, stop, workers, false)
		if step == stop {
			s.recordTrained(ctx, step)
		}
	}
	stopWatch := s.watchSuperseded(ctx, time.Second)
	s.log.Info("coordinating on Slurm", "slurm_job_id", t.JobID, "tasks", t.NTasks, "addr", coord.Addr(), "rendezvous", t.Rendezvous, "state", opts.StateDir)
	return func(sum *trainer.Summary) {
		stopWatch()
		if sum != nil {
			status.Update(sum.Steps, sum.Steps, 0, true)
		}
		ended.Store(true)
		select {
		case <-local:
		case <-time.After(5 * time.Second):
		}
	}, nil
}

// torchStandbyWait bounds how long a torch job's coordinator on several
// nodes waits before its first step for a worker on another node, its
// standby (torchengine.Options.AwaitStandby): a Python start with torch
// and the job's load, 6–40 s on the lab under load.
const torchStandbyWait = 60 * time.Second

// torchCoordinatorTask makes task 0 the coordinator of a torch job: its
// own Python process trains from the first step, which waits for a
// worker on another node (torchStandbyWait), and the other tasks' workers
// join at step boundaries as they come up (and leave when Slurm kills them
// on a shrink), through the engine's listener in the rendezvous directory.
func (s *slurmRun) torchCoordinatorTask(ctx context.Context, opts *trainer.Options, eng *torchengine.Engine, listen string) (func(*trainer.Summary), error) {
	t := s.task
	ln, err := eng.Listen(cluster.ListenerOptions{StateDir: opts.StateDir, TokenDir: t.Rendezvous, Listen: listen, JoinTimeout: s.joinWait, Logger: s.log})
	if err != nil {
		return nil, err
	}
	// Before the address: an extra job joins once it reads the address,
	// and its worker runs on the job's environment and interpreter from
	// these files.
	if err := slurmjob.PublishEnvironment(t.Rendezvous, os.Environ()); err != nil {
		return nil, err
	}
	if err := slurmjob.PublishPython(t.Rendezvous, eng.Python()); err != nil {
		return nil, err
	}
	if err := slurmjob.PublishCoordinator(t.Rendezvous, ln.Addr(), s.rendezvousRun(ctx)); err != nil {
		return nil, err
	}
	opts.Schedule = schedule.Schedule{{Workers: 1}}
	if s.standby != nil {
		s.recordTakeover(s.standby.Step)
		s.log.Info("took over as the coordinator", "slurm_job_id", t.JobID, "step", s.standby.Step, "engine", "torch",
			"since_loss_ms", time.Since(s.takeoverAt).Milliseconds())
	}
	req := s.request(opts.Spec)
	status := &slurmjob.Status{JobID: t.JobID, Request: req, Runner: s.runner, Log: s.log,
		StartsOver: opts.StartOverOnOtherNumerics}
	opts.OnStep = func(step, stop int64, workers int) {
		status.Update(step, stop, workers, false)
		if step == stop {
			s.recordTrained(ctx, step)
		}
	}
	stopWatch := s.watchSuperseded(ctx, time.Second)
	s.log.Info("coordinating on Slurm", "slurm_job_id", t.JobID, "tasks", t.NTasks, "engine", "torch", "addr", ln.Addr(), "rendezvous", t.Rendezvous, "state", opts.StateDir)
	return func(sum *trainer.Summary) {
		stopWatch()
		if sum != nil {
			status.Update(sum.Steps, sum.Steps, 0, true)
		}
	}, nil
}

// request is the job's elastic request from the environment twins the
// SPANK plugin or easyscale-sbatch set (EASYSCALE_ELASTIC, ...), with the
// job file's logical workers and [speeds] when those are unset.
func (s *slurmRun) request(spec *jobspec.Spec) elastic.Request {
	req, err := elastic.FromEnv(os.LookupEnv).Request()
	if err != nil {
		s.log.Warn("ignoring a malformed elastic request in the environment", "error", err)
		req = elastic.Request{}
	}
	if req.LogicalWorkers == 0 {
		req.LogicalWorkers = spec.LogicalWorkers
	}
	if len(req.Speeds) == 0 && len(spec.Speeds) > 0 {
		req.Speeds = spec.Speeds
	}
	return req
}

// nodeAddr is this node's address as Slurm knows it (NodeAddr), so
// workers on other nodes can reach the coordinator; loopback when Slurm
// cannot say.
func (s *slurmRun) nodeAddr(ctx context.Context) string {
	if s.task.NodeName != "" {
		nodes, err := s.runner.ShowNodes(ctx)
		if err == nil {
			for _, n := range nodes {
				if n.Name == s.task.NodeName && n.Address != "" {
					if ips, err := net.DefaultResolver.LookupHost(ctx, n.Address); err == nil && len(ips) > 0 {
						return ips[0]
					}
				}
			}
		} else {
			s.log.Warn("asking Slurm for this node's address", "error", err)
		}
	}
	s.log.Warn("listening on loopback: workers on other nodes cannot join; pass --listen ADDR")
	return "127.0.0.1"
}

// recordExit writes the coordinator's exit status to the rendezvous
// directory's exit-code files, which also tell the run's workers that it
// has ended.
func (s *slurmRun) recordExit(code int) {
	if s.superseded.Load() {
		s.log.Warn("not recording an exit status: another task coordinates this run", "slurm_job_id", s.task.JobID, "exit_status", code)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := slurmjob.RecordExit(s.task.Rendezvous, s.rendezvousRun(ctx), code); err != nil {
		s.log.Warn("recording the exit status", "rendezvous", s.task.Rendezvous, "error", err)
	}
}
