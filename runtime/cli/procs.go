package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// newCoordinator builds the process executor of `run --procs`. A missing
// --state gets a fresh temporary directory (the token lives there).
func newCoordinator(spec *jobspec.Spec, files data.Manifest, state *string, listen string, kills, terms []cluster.Fault, hb time.Duration, threads int, launch, bind bool, log hclog.Logger) (*cluster.Coordinator, error) {
	if hb < 100*time.Millisecond || hb > time.Hour {
		return nil, fmt.Errorf("--heartbeat-timeout %v: use a duration between 100ms and 1h, e.g. 5s", hb)
	}
	var err error
	if *state == "" {
		if *state, err = os.MkdirTemp("", "easyscale-state-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(*state, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start workers: %w", err)
	}
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	var launcher *cluster.ProcLauncher
	if launch {
		launcher = &cluster.ProcLauncher{Command: self, LogDir: filepath.Join(*state, "workers"), Cores: threads, BindCores: bind, Logger: log.Named("launcher").With("job_id", spec.ShortID())}
		if spec.Data.Dir != "" {
			launcher.ExtraArgs = []string{"--data-dir", spec.Data.Dir}
		}
	}
	return cluster.NewCoordinator(cluster.CoordinatorOptions{Spec: spec, Data: files, StateDir: *state, Listen: listen,
		HeartbeatTimeout: hb, Launcher: launcher, KillAt: kills, TermAt: terms, Logger: log})
}

// startLocalWorker runs one worker of the job in this process (as task 0
// does on Slurm); finish waits briefly for it after the run.
func startLocalWorker(ctx context.Context, coord *cluster.Coordinator, threads int, log hclog.Logger) func(*trainer.Summary) {
	secret, err := auth.LoadSecret(coord.TokenPath())
	done := make(chan error, 1)
	if err != nil {
		log.Error("reading the job token for the local worker", "error", err)
		close(done)
		return func(*trainer.Summary) {}
	}
	go func() {
		done <- cluster.RunWorker(ctx, cluster.WorkerOptions{Join: coord.Addr(), Secret: secret, JobID: coord.JobID(),
			Threads: threads, Logger: log.Named("worker")})
	}()
	return func(*trainer.Summary) {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
}

// checkFaults refuses fault-injection points that can never fire: a step
// at or past stop (the run's last step is stop-1) or a rank the schedule
// does not have at that step. Workers that join or leave on their own
// (SIGTERM, --listen joiners) change the ranks later; only the schedule
// is known here.
func checkFaults(flag string, faults []cluster.Fault, sched schedule.Schedule, stop int64) error {
	for _, f := range faults {
		if f.Step >= stop {
			return fmt.Errorf("%s %d:%d: step %d never runs, the run's steps are 0-%d (--steps or the job's horizon); pick a step below %d", flag, f.Step, f.Rank, f.Step, stop-1, stop)
		}
		if w := sched.At(f.Step).Workers; f.Rank >= w {
			return fmt.Errorf("%s %d:%d: rank %d does not exist at step %d, which runs on %d workers (ranks 0-%d); pick a rank below %d or change --workers", flag, f.Step, f.Rank, f.Rank, f.Step, w, w-1, w)
		}
	}
	return nil
}

// parseFaults reads STEP:RANK[,STEP:RANK...].
func parseFaults(flag, s string) ([]cluster.Fault, error) {
	if s == "" {
		return nil, nil
	}
	var out []cluster.Fault
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(part), ":")
		step, err1 := strconv.ParseInt(a, 10, 64)
		rank, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || step < 0 || rank < 0 {
			return nil, fmt.Errorf("%s %q: want STEP:RANK[,STEP:RANK...], e.g. 12:1", flag, part)
		}
		out = append(out, cluster.Fault{Step: step, Rank: rank})
	}
	return out, nil
}
