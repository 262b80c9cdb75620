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

	"github.com/hashicorp/go-hclog"
)

// DefaultMaxRelaunches is ProcLauncher.MaxRelaunches's default: how often a
// worker slot is started again when its process exits before admission.
const DefaultMaxRelaunches = 3

// ProcLauncher starts worker processes on this machine (`easyscale run
// --procs`): each runs `Command worker --join ADDR --token-file FILE` with
// its output in LogDir/worker-K.log, and dies with the coordinator
// (PR_SET_PDEATHSIG), like tasks of a Slurm step.
//
// A process that exits before the coordinator admitted it (killed while it
// loaded its data or waited for a step boundary) is started again in its
// slot, at most MaxRelaunches times, so a grow does not wait its whole join
// timeout for a worker that will never come (relaunch.go); one that left on
// request (SIGTERM, SIGINT, SIGHUP, or exit 0) is not, nor one that refused
// its command line or configuration (exit 2), which no retry cures. The coordinator
// reports admissions (Admitted) and releases (Released); OnTheWay counts
// the processes that may still join.
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
	// MaxRelaunches bounds how often one worker slot is started again
	// after its process exited before admission (0: DefaultMaxRelaunches;
	// negative: never).
	MaxRelaunches int
	// Logger receives the relaunches (nil: discarded).
	Logger hclog.Logger

	mu      sync.Mutex
	started int
	procs   []*launched
	busy    map[int]bool // CPUs given to running workers
	wg      sync.WaitGroup
	// join is the last Start's coordinator address, token file and
	// threads per worker, which relaunches reuse.
	join launchArgs
	// stopping is set by Wait: no process is started again after it.
	stopping bool
	// changed is closed (and replaced) whenever a process exits or is
	// started again, so a waiter re-counts OnTheWay.
	changed chan struct{}
}

// launchArgs are what a worker's command line is built from.
type launchArgs struct {
	addr, tokenFile string
	threads         int
}

// launched is one worker process and the state of its slot.
type launched struct {
	cmd *exec.Cmd
	// slot is K of worker-K.log; tries counts the starts of this slot
	// after the first.
	slot, tries int
	// admitted: the coordinator admitted it at least once; released: the
	// coordinator said goodbye to it (it exits on its own); exited: its
	// process has ended (reaped).
	admitted, released, exited bool
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
	l.mu.Lock()
	defer l.mu.Unlock()
	l.join = launchArgs{addr: addr, tokenFile: tokenFile, threads: max(1, l.Cores/max(1, worldSize))}
	for i := 0; i < count; i++ {
		k := l.started
		l.started++
		if err := l.spawn(k, 0); err != nil {
			return err
		}
	}
	return nil
}

// spawn starts the process of slot k (its tries-th start after the first)
// and a goroutine that reaps it. l.mu is held.
func (l *ProcLauncher) spawn(k, tries int) error {
	logf, err := os.OpenFile(filepath.Join(l.LogDir, fmt.Sprintf("worker-%d.log", k)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the log of worker %d: %w", k, err)
	}
	j := l.join
	args := append([]string{"worker", "--join", j.addr, "--token-file", j.tokenFile, "--threads", strconv.Itoa(j.threads)}, l.ExtraArgs...)
	cpus := l.takeCPUs(j.threads)
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
	p := &launched{cmd: cmd, slot: k, tries: tries}
	l.procs = append(l.procs, p)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := cmd.Wait()
		logf.Close()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.freeCPUs(cpus)
		p.exited = true
		l.relaunch(p, err)
		l.notify()
	}()
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

// Wait ends the launched workers: those the coordinator released (Released)
// get up to d to exit on their own, the others (joiners never admitted,
// workers still rejoining: none holds anything the coordinator needs) are
// killed at once, as are the released ones still running after d. No
// process is started again after Wait.
func (l *ProcLauncher) Wait(d time.Duration) {
	l.mu.Lock()
	l.stopping = true
	for _, p := range l.procs {
		if !p.released && !p.exited {
			p.cmd.Process.Kill()
		}
	}
	l.mu.Unlock()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		l.mu.Lock()
		for _, p := range l.procs {
			if !p.exited {
				p.cmd.Process.Kill()
			}
		}
		l.mu.Unlock()
		<-done
	}
}
