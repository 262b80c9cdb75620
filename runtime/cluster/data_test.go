package cluster

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/data/datatest"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// TestJoinerWithOtherTrainingDataIsRefused: a worker whose data directory
// holds a copy with one training label changed asks to join mid-run. It is
// refused with an error naming the file, and does not retry; the run goes
// on with the other workers and ends with the in-process run's digest.
func TestJoinerWithOtherTrainingDataIsRefused(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	spec, wl := setup(t)
	bad := datatest.MNISTWithOneLabelChanged(t)
	const steps = 8
	ref, c, logs := referenceAndCoordinator(t, spec, wl, steps)
	w1, w2 := startWorker(t, c), startWorker(t, c)
	secret, err := auth.LoadSecret(c.TokenPath())
	if err != nil {
		t.Fatal(err)
	}
	var refused error
	onStep := func(step, _ int64, _ int) {
		if step != 3 {
			return
		}
		done := make(chan error, 1)
		go func() {
			done <- RunWorker(context.Background(), WorkerOptions{Join: c.Addr(), Secret: secret, JobID: c.jobID, DataDir: bad,
				Threads: 1, JoinTimeout: 5 * time.Second})
		}()
		select {
		case refused = <-done:
		case <-time.After(30 * time.Second):
			refused = errors.New("the worker with other data neither joined nor stopped within 30 s")
		}
	}
	sum, err := trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true,
		Executor: c, Schedule: schedule.Schedule{{Workers: 2}}, OnStep: onStep})
	if err != nil {
		t.Fatal(err)
	}
	var re *RefusedError
	if !errors.As(refused, &re) || re.File != data.TrainLabelsFile ||
		!strings.Contains(refused.Error(), filepath.Join(bad, data.TrainLabelsFile)) {
		t.Fatalf("the worker with other data ended with %v; want a RefusedError naming %s in %s", refused, data.TrainLabelsFile, bad)
	}
	if !strings.Contains(logs.String(), "refused a joiner: its training data differ") || !strings.Contains(logs.String(), "file="+data.TrainLabelsFile) {
		t.Fatalf("the coordinator did not log the refusal naming the file:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "admitted"); n != 2 {
		t.Fatalf("%d workers admitted, want 2:\n%s", n, logs.String())
	}
	if sum.Digest != ref {
		t.Fatalf("digest %s after the refusal, in-process run %s", sum.Digest, ref)
	}
	for _, w := range []chan error{w1, w2} {
		if err := <-w; err != ErrLeft {
			t.Fatalf("a worker ended with %v, want ErrLeft after the job finished", err)
		}
	}
}
