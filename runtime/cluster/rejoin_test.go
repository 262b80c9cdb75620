package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// A worker that has been connected longer than its JoinTimeout and is then
// dropped by the coordinator (as one silent past the heartbeat timeout
// under load is: its connection closed mid-run) rejoins while the job
// runs: the join deadline runs from the moment the coordinator was lost,
// not from the worker's start. The run keeps the fixed allocation's digest.
func TestADroppedWorkerRejoinsHoweverLongItWasConnected(t *testing.T) {
	spec, wl := setup(t)
	const steps = 100
	const joinTimeout = 100 * time.Millisecond
	ref, err := trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs})
	c, err := NewCoordinator(CoordinatorOptions{Spec: spec, Data: wl.Data(), StateDir: t.TempDir(), JoinTimeout: 10 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := auth.LoadSecret(c.TokenPath())
	if err != nil {
		t.Fatal(err)
	}
	workers := make(chan error, 2)
	for range 2 {
		go func() {
			workers <- RunWorker(context.Background(), WorkerOptions{Join: c.Addr(), Secret: secret, JobID: c.jobID, Threads: 1,
				JoinTimeout: joinTimeout, Logger: log.Named("worker")})
		}()
	}
	var admittedBy time.Time // both workers were admitted before the first step
	dropped := int64(-1)
	onStep := func(step, _ int64, _ int) {
		if admittedBy.IsZero() {
			admittedBy = time.Now()
		}
		if step != 2 {
			return
		}
		// The condition under test is the time the workers have been
		// connected: more than 3 join timeouts. Then the coordinator
		// drops rank 1.
		<-time.After(time.Until(admittedBy.Add(3 * joinTimeout)))
		dropped = step
		m := c.members[1]
		m.dead.Store(true)
		m.p.c.Close()
		// The job goes on; the dropped worker must come back while it
		// does, so the next step boundary admits it again.
		deadline := time.After(60 * time.Second)
		for len(c.joiners) == 0 {
			select {
			case err := <-workers:
				t.Errorf("a worker dropped after step %d gave up instead of rejoining: %v", step, err)
				return
			case <-deadline:
				t.Errorf("the worker dropped after step %d was not waiting for admission 60 s later", step)
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	sum, err := trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true,
		Executor: c, Schedule: schedule.Schedule{{Workers: 2}}, OnStep: onStep})
	if err != nil {
		t.Fatal(err)
	}
	if dropped < 0 {
		t.Fatal("no worker was dropped")
	}
	if t.Failed() {
		return
	}
	if sum.Digest != ref.Digest {
		t.Fatalf("digest %s after a worker was dropped and rejoined, %s on the fixed allocation", sum.Digest, ref.Digest)
	}
	if n := strings.Count(logs.String(), "coordinator: admitted:"); n != 3 {
		t.Fatalf("%d admissions, want 3 (the dropped worker again):\n%s", n, logs.String())
	}
	for range 2 {
		if err := <-workers; err != ErrLeft {
			t.Fatalf("a worker ended with %v, want ErrLeft when the job finished", err)
		}
	}
}

// The join deadline runs from the worker's start until it is first
// accepted, then from each loss of the coordinator; a loss is always
// followed by an attempt to rejoin, and the error says how long and since
// when the coordinator was unreachable.
func TestRejoinDeadlineRunsFromTheLoss(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	type end struct {
		at     time.Duration // after start
		joined bool
	}
	tests := []struct {
		name    string
		ends    []end
		wantErr string // of the last end; "" for none
	}{
		{"a worker never accepted gives up after the timeout from its start",
			[]end{{time.Second, false}, {5 * time.Second, false}}, "unreachable for 5s since the worker started (join timeout 5s)"},
		{"a worker never accepted retries within the timeout",
			[]end{{time.Second, false}, {4 * time.Second, false}}, ""},
		{"a worker connected for an hour rejoins after losing the coordinator",
			[]end{{time.Hour, true}}, ""},
		{"its deadline runs from the loss",
			[]end{{time.Hour, true}, {time.Hour + 4*time.Second, false}}, ""},
		{"and ends the timeout after the loss",
			[]end{{time.Hour, true}, {time.Hour + 4*time.Second, false}, {time.Hour + 5*time.Second, false}}, "unreachable for 5s since it was lost"},
		{"each loss restarts it",
			[]end{{time.Hour, true}, {time.Hour + 4*time.Second, false}, {2 * time.Hour, true}, {2*time.Hour + 4*time.Second, false}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rejoin{timeout: 5 * time.Second, since: start}
			var err error
			for _, e := range tc.ends {
				err = r.ended(start.Add(e.at), e.joined, "10.0.0.1:7000", errNeverJoined)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("the worker gave up: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrUnreachable) || !errors.Is(err, errNeverJoined)):
				t.Fatalf("ended = %v, want an error wrapping ErrUnreachable and its cause, saying %q", err, tc.wantErr)
			}
		})
	}
}
