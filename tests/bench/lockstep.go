package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// lockstepSteps is how many steps each arm of lockstepOverhead trains; the
// first lockstepSkip of them (warm-up, and the arms' first steps, which
// overlap) are not measured.
const (
	lockstepSteps = 120
	lockstepSkip  = 6
)

// lockstepOverhead trains the MNIST example on 2 physical workers twice at
// once, in-process and as 2 worker processes of bin (the coordinator runs
// in this process, as `easyscale run --procs` does), taking one step each
// in turn: while one arm steps the other waits, so both see the machine in
// the same state to within a step. That matters on a shared VM, whose speed
// drifts by more than the overhead between runs a few seconds apart. It
// returns the median step times (seconds) of each arm from their ledgers,
// and the median ratio of adjacent steps (procs over in-process).
func lockstepOverhead(bin, dir string) (inproc, procs, ratio float64, err error) {
	spec, err := jobspec.Load("examples/mnist/job.toml")
	if err != nil {
		return 0, 0, 0, err
	}
	wl, err := workload.New(spec)
	if err != nil {
		return 0, 0, 0, err
	}
	threads := runtime.GOMAXPROCS(0)
	procDir := filepath.Join(dir, "lockstep-procs")
	if err := os.MkdirAll(procDir, 0o700); err != nil {
		return 0, 0, 0, err
	}
	coord, err := cluster.NewCoordinator(cluster.CoordinatorOptions{Spec: spec, Data: wl.Data(), StateDir: procDir,
		Launcher: &cluster.ProcLauncher{Command: bin, LogDir: filepath.Join(procDir, "workers"), Cores: threads}})
	if err != nil {
		return 0, 0, 0, err
	}
	turns := newTurns()
	arms := []struct {
		dir  string
		exec trainer.Executor
	}{{filepath.Join(dir, "lockstep-inproc"), nil}, {procDir, coord}}
	errs := make([]error, len(arms))
	var wg sync.WaitGroup
	for i, a := range arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer turns.finish(i)
			_, errs[i] = trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: lockstepSteps,
				StateDir: a.dir, Threads: threads, SkipEval: true, Executor: a.exec, Schedule: schedule.Schedule{{Workers: 2}},
				OnStep: func(step, stop int64, _ int) { turns.pass(i) }})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, 0, 0, fmt.Errorf("lockstep arm %d: %w", i, err)
		}
	}
	in, err := ledgerStepTimes(arms[0].dir, lockstepSkip)
	if err != nil {
		return 0, 0, 0, err
	}
	pr, err := ledgerStepTimes(arms[1].dir, lockstepSkip)
	if err != nil {
		return 0, 0, 0, err
	}
	var ratios []float64
	for k := range min(len(in), len(pr)) {
		ratios = append(ratios, pr[k]/in[k])
	}
	return median(in), median(pr), median(ratios), nil
}

// turns makes two goroutines alternate: pass(i) hands the turn to the
// other and waits until it comes back, unless the other has finished.
type turns struct {
	mu       sync.Mutex
	cond     *sync.Cond
	turn     int
	finished [2]bool
}

func newTurns() *turns {
	t := &turns{}
	t.cond = sync.NewCond(&t.mu)
	return t
}

func (t *turns) pass(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.turn = 1 - i
	t.cond.Broadcast()
	for t.turn != i && !t.finished[1-i] {
		t.cond.Wait()
	}
}

func (t *turns) finish(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished[i] = true
	t.turn = 1 - i
	t.cond.Broadcast()
}
