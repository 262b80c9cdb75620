package cluster

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// TestAJoinerBeyondTheLogicalWorkersWaitsForAPlace runs the job on as
// many workers as it has logical workers (4) and starts a fifth after
// step 3, as when Slurm starts a replacement extra job before the one it
// replaces has left (trading up): the fifth waits for a place instead of
// failing the job at the next boundary, and is admitted once a member is
// gone (one is stopped after step 6). The run keeps its fixed run's
// digest.
func TestAJoinerBeyondTheLogicalWorkersWaitsForAPlace(t *testing.T) {
	spec, wl := setup(t)
	const steps = 10
	ref, c, logs := referenceAndCoordinator(t, spec, wl, steps)
	stopCtx, stopOne := context.WithCancel(context.Background())
	defer stopOne()
	secret, err := auth.LoadSecret(c.TokenPath())
	if err != nil {
		t.Fatal(err)
	}
	// A worker that loses the coordinator when the stopped one breaks the
	// ring rejoins; one still trying when the job ends is told so.
	var ended atomic.Bool
	start := func(ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() {
			done <- RunWorker(ctx, WorkerOptions{Join: c.Addr(), Secret: secret, JobID: c.jobID, Threads: 1, JoinTimeout: 5 * time.Second, Ended: ended.Load})
		}()
		return done
	}
	start(stopCtx)
	workers := []chan error{start(context.Background()), start(context.Background()), start(context.Background())}
	var extra chan error
	sizes := map[int64]int{}
	onStep := func(step, _ int64, world int) {
		sizes[step] = world
		if step == 6 {
			stopOne()
		}
		if step != 3 {
			return
		}
		extra = start(context.Background())
		for deadline := time.Now().Add(10 * time.Second); len(c.joiners) == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("the fifth worker was not waiting for admission 10 s after it started")
				return
			}
		}
	}
	sum, err := trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true,
		Executor: c, Schedule: schedule.Schedule{{Workers: 4}}, OnStep: onStep})
	ended.Store(true)
	if err != nil {
		t.Fatalf("the job failed with a fifth worker waiting: %v", err)
	}
	if sum.Digest != ref {
		t.Fatalf("digest %s, fixed run %s", sum.Digest, ref)
	}
	for step, world := range sizes {
		if world > spec.LogicalWorkers {
			t.Errorf("step %d ran on %d workers, more than the %d logical workers", step, world, spec.LogicalWorkers)
		}
	}
	if !regexp.MustCompile(`coordinator: admitted: .* step=([7-9]|10) `).MatchString(logs.String()) {
		t.Fatalf("the fifth worker was not admitted once the stopped one was gone:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "workers wait for admission: each of the job's logical workers has a worker") {
		t.Fatalf("no log line says why the fifth waited:\n%s", logs.String())
	}
	if extra == nil {
		t.Fatal("the fifth worker never started")
	}
	for i, w := range append(workers, extra) {
		select {
		case err := <-w:
			if err != ErrLeft && err != ErrJobEnded {
				t.Fatalf("worker %d ended with %v, want ErrLeft or ErrJobEnded after the job finished:\n%s", i, err, logs.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("worker %d still running 20 s after the job finished", i)
		}
	}
}
