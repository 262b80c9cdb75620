package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ProcLauncher starts worker processes on this machine (`easyscale run
// --procs`): each runs `Command worker --join ADDR --token-file FILE` with
// its output in LogDir/worker-K.log, and dies with the coordinator
// (PR_SET_PDEATHSIG), like tasks of a Slurm step.
type ProcLauncher struct {
	// Command is the easyscale binary (os.Executable()).
	Command string
	// ExtraArgs are appended to every worker's command line.
	ExtraArgs []string
	// LogDir receives the workers' logs.
	LogDir string
	// Cores is the machine's core budget, split evenly over the workers.
	Cores int
	// BindCores gives each worker its own CPUs out of those this process
	// may run on (its affinity: all, or the Slurm job's), as many as its
	// share of Cores, passed as `worker --cpus` (Slurm's --cpu-bind=cores
	// does the same for the tasks of a step). Workers left to float share
	// cores by the kernel's choice: two of them woken together often run
	// on one core for milliseconds while another is idle. A worker is not
	// bound when too few CPUs are free.
	BindCores bool

	mu      sync.Mutex
	started int
	procs   []*exec.Cmd
	busy    map[int]bool // CPUs given to running workers
	wg      sync.WaitGroup
}

// Start launches count worker processes for a job of world size
// worldSize, joining addr with the token file tokenFile.
func (l *ProcLauncher) Start(count int, addr, tokenFile string, worldSize int) error {
	if count <= 0 {
		return nil
	}
	if err := os.MkdirAll(l.LogDir, 0o700); err != nil {
		return fmt.Errorf("creating the worker log directory: %w", err)
	}
	threads := max(1, l.Cores/max(1, worldSize))
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < count; i++ {
		k := l.started
		l.started++
		logf, err := os.OpenFile(filepath.Join(l.LogDir, fmt.Sprintf("worker-%d.log", k)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("opening the log of worker %d: %w", k, err)
		}
		args := append([]string{"worker", "--join", addr, "--token-file", tokenFile, "--threads", strconv.Itoa(threads)}, l.ExtraArgs...)
		cpus := l.takeCPUs(threads)
		if cpus != nil {
			args = append(args, "--cpus", FormatCPUList(cpus))
		}
		cmd := exec.Command(l.Command, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			l.freeCPUs(cpus)
			return fmt.Errorf("starting worker %d (%s): %w", k, l.Command, err)
		}
		l.procs = append(l.procs, cmd)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			cmd.Wait()
			logf.Close()
			l.mu.Lock()
			l.freeCPUs(cpus)
			l.mu.Unlock()
		}()
	}
	return nil
}

// takeCPUs picks n CPUs no running worker has, in increasing order, or
// nil when BindCores is off or fewer are free. l.mu is held.
func (l *ProcLauncher) takeCPUs(n int) []int {
	if !l.BindCores {
		return nil
	}
	if l.busy == nil {
		l.busy = map[int]bool{}
	}
	var cpus []int
	for _, c := range AllowedCPUs() {
		if len(cpus) < n && !l.busy[c] {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < n {
		return nil
	}
	for _, c := range cpus {
		l.busy[c] = true
	}
	return cpus
}

// freeCPUs returns a worker's CPUs. l.mu is held.
func (l *ProcLauncher) freeCPUs(cpus []int) {
	for _, c := range cpus {
		delete(l.busy, c)
	}
}

// Wait waits up to d for every launched worker to exit, then kills the rest.
func (l *ProcLauncher) Wait(d time.Duration) {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		l.mu.Lock()
		for _, p := range l.procs {
			if p.Process != nil {
				p.Process.Kill()
			}
		}
		l.mu.Unlock()
		<-done
	}
}
