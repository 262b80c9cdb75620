package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// leaveGraceOption maps --leave-grace to WorkerOptions.LeaveGrace, where
// 0 means the default and a negative value "at once".
func leaveGraceOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// workerCmd is `easyscale worker`: a physical worker process that joins a
// coordinator and runs the logical workers it is given.
func workerCmd(args []string, env Env) int {
	fs := newFlagSet("worker", "worker --join HOST:PORT --token-file FILE [flags]", env)
	join := fs.String("join", os.Getenv("EASYSCALE_JOIN"), "coordinator address HOST:PORT (env EASYSCALE_JOIN)")
	tokenFile := fs.String("token-file", os.Getenv("EASYSCALE_TOKEN_FILE"), "the job's token file, DIR/token of the coordinator's state directory (env EASYSCALE_TOKEN_FILE)")
	jobID := fs.String("job-id", os.Getenv("EASYSCALE_JOB_ID"), "job id to authenticate as (default: the job-id file next to the token file)")
	listen := fs.String("listen", "", "address of this worker's all-reduce endpoint (default: the interface that reaches the coordinator, any port)")
	dataDir := fs.String("data-dir", os.Getenv("EASYSCALE_DATA_DIR"), "dataset folder on this machine (default: the coordinator's data.dir, else auto-locate)")
	threads := fs.Int("threads", 0, "cores to compute on, and the process's GOMAXPROCS (default: all)")
	cpuList := fs.String("cpus", "", "bind this worker to these CPUs, e.g. 0-3,8 (Linux; easyscale run --procs gives each worker it starts its own)")
	ioTimeout := fs.Duration("io-timeout", 10*time.Second, "network I/O stall that counts as a failure")
	joinTimeout := fs.Duration("join-timeout", 60*time.Second, "how long to keep trying to reach the coordinator, at start and from each loss of it")
	leaveGrace := fs.Duration("leave-grace", cluster.DefaultLeaveGrace, "after SIGTERM, how long to wait for the step boundary before abandoning the step in progress and leaving (keep it under Slurm's KillWait)")
	hbTimeout := fs.Duration("heartbeat-timeout", 5*time.Second, "torch jobs: the Python process silent this long is declared hung")
	var lf logFlags
	lf.register(fs)
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if *join == "" || *tokenFile == "" {
		fmt.Fprintln(env.Stderr, "easyscale worker: --join and --token-file are required")
		return 2
	}
	if err := runOnJobEnvironment(filepath.Dir(*tokenFile)); err != nil {
		fmt.Fprintf(env.Stderr, "easyscale worker: %v\n", err)
		return 2
	}
	if fs.Changed("threads") && *threads < 1 {
		fmt.Fprintf(env.Stderr, "easyscale worker: --threads %d: give a positive number of cores, or leave the flag out to use all\n", *threads)
		return 2
	}
	if *cpuList != "" {
		cpus, err := cluster.ParseCPUList(*cpuList)
		if err == nil {
			err = cluster.BindCPUs(cpus) // re-executes this command bound to cpus
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "easyscale worker: --cpus: %v\n", err)
			return 2
		}
	}
	if fs.Changed("threads") {
		// The worker computes on that many cores; more Ps would let the
		// Go runtime's idle-time GC workers and spinning threads take
		// cores the job's other workers compute on (easyscale run --procs
		// starts them side by side on one machine).
		runtime.GOMAXPROCS(*threads)
	}
	if *leaveGrace < 0 || *leaveGrace > time.Hour {
		fmt.Fprintf(env.Stderr, "easyscale worker: --leave-grace %v: use a duration between 0s and 1h, e.g. 5s\n", *leaveGrace)
		return 2
	}
	if err := trainer.CheckFaultEnv(); err != nil {
		fmt.Fprintf(env.Stderr, "easyscale worker: %v\n", err)
		return 2
	}
	if _, _, err := net.SplitHostPort(*join); err != nil {
		fmt.Fprintf(env.Stderr, "easyscale worker: --join %q: want HOST:PORT (%v)\n", *join, err)
		return 2
	}
	log, err := lf.logger("easyscale-worker", env.Stderr)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale worker: %v\n", err)
		return 2
	}
	if *cpuList != "" { // the CPUs the kernel granted, which may be fewer than asked
		log.Info("bound to CPUs", "cpus", cluster.FormatCPUList(cluster.AllowedCPUs()), "asked", *cpuList)
	}
	secret, err := auth.LoadSecret(*tokenFile)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale worker: %v\n", err)
		return 2
	}
	if *jobID == "" {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(*tokenFile), cluster.JobIDFile))
		if err != nil {
			fmt.Fprintf(env.Stderr, "easyscale worker: no --job-id and no job-id file next to the token: %v\n", err)
			return 2
		}
		*jobID = strings.TrimSpace(string(b))
	}
	// A torch job under Slurm publishes its interpreter next to the token
	// (an extra job of easyscale-backfilld from an earlier version ran on
	// the daemon's environment, without the job's EASYSCALE_PYTHON).
	python, err := slurmjob.JobPython(filepath.Dir(*tokenFile))
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale worker: %v\n", err)
		return 2
	}
	err = cluster.RunWorker(context.Background(), cluster.WorkerOptions{Join: *join, Secret: secret, JobID: *jobID,
		RingListen: *listen, DataDir: *dataDir, Threads: *threads, IOTimeout: *ioTimeout, JoinTimeout: *joinTimeout, LeaveGrace: leaveGraceOption(*leaveGrace), Logger: log,
		Torch: torchengine.Worker(torchengine.WorkerOptions{HeartbeatTimeout: *hbTimeout, Python: python})})
	if errors.Is(err, cluster.ErrLeft) {
		log.Info("left the job")
		return 0
	}
	log.Error("worker stopped", "error", err)
	return 1
}
