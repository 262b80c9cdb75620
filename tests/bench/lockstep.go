package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// lockstepBlock is how many steps an arm of lockstepOverhead takes per
// turn, and lockstepSteps how many it trains in all. The first block
// (warm-up, and the arms' first steps, which overlap) is not measured.
const (
	lockstepBlock = 8
	lockstepSteps = 40 * lockstepBlock
)

// lockstepOverhead trains the MNIST example on 2 physical workers twice at
// once, in-process and as 2 worker processes of bin (the coordinator runs
// in this process, as `easyscale run --procs` does), taking turns of
// lockstepBlock steps: while one arm steps the other waits, so both see
// the machine in the same state to within a turn. That matters on a
// shared VM, whose speed drifts by more than the overhead between runs a
// few seconds apart. A turn's time per step is taken from the end of its
// second step to the end of its last, by the wall clock at each step's
// end: the worker processes compute a step before the coordinator asks
// for it (runtime/cluster's guess), so the first step of a turn was partly
// computed in the other arm's turn, and that arm's first step shared the
// cores with it; for the same reason a step's ledger time no longer
// measures what it costs. It returns the median time per step (seconds)
// of each arm's turns, and the median ratio of adjacent turns (procs over
// in-process).
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
		Launcher: &cluster.ProcLauncher{Command: bin, LogDir: filepath.Join(procDir, "workers"), Cores: threads, BindCores: true}})
	if err != nil {
		return 0, 0, 0, err
	}
	turns := newTurns()
	ends := [2][]time.Time{} // each arm's step end times, by step
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
				OnStep: func(step, stop int64, _ int) {
					ends[i] = append(ends[i], time.Now())
					if step%lockstepBlock == 0 {
						turns.pass(i)
					}
				}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, 0, 0, fmt.Errorf("lockstep arm %d: %w", i, err)
		}
	}
	in, pr := turnStepTimes(ends[0]), turnStepTimes(ends[1])
	if len(in) == 0 || len(pr) == 0 {
		return 0, 0, 0, fmt.Errorf("lockstep: %d and %d steps, too few to measure a turn", len(ends[0]), len(ends[1]))
	}
	var ratios []float64
	for k := range min(len(in), len(pr)) {
		ratios = append(ratios, pr[k]/in[k])
	}
	return median(in), median(pr), median(ratios), nil
}

// turnStepTimes returns, for every turn of lockstepBlock steps after the
// first, its time per step (seconds) from the end of its second step to
// the end of its last; ends[k] is when step k+1 ended.
func turnStepTimes(ends []time.Time) []float64 {
	var out []float64
	for b := 1; (b+1)*lockstepBlock <= len(ends); b++ {
		from, to := ends[b*lockstepBlock+1], ends[(b+1)*lockstepBlock-1]
		out = append(out, to.Sub(from).Seconds()/float64(lockstepBlock-2))
	}
	return out
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
