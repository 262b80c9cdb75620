package cluster

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
)

// A worker whose coordinator is gone and whose job has ended (a requeued
// job that had already finished: its coordinator exits in 2 s) stops as
// soon as Ended says so, instead of retrying for JoinTimeout.
func TestWorkerStopsRejoiningOnceTheJobHasEnded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every dial is refused
	tests := []struct {
		name      string
		endsAfter int32 // Ended is true from this call on; 0: never
		want      error
	}{
		{"the job already ended at the first refusal", 1, ErrJobEnded},
		{"the job ends while the worker retries", 3, ErrJobEnded},
		{"without an end the worker retries until JoinTimeout", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			ended := func() bool { return tc.endsAfter > 0 && calls.Add(1) >= tc.endsAfter }
			start := time.Now()
			err := RunWorker(context.Background(), WorkerOptions{Join: addr, JobID: "j", Threads: 1,
				JoinTimeout: 3 * time.Second, Ended: ended})
			took := time.Since(start)
			switch {
			case tc.want != nil && (!errors.Is(err, tc.want) || took > 2*time.Second):
				t.Fatalf("RunWorker = %v after %v, want %v within 2 s", err, took, tc.want)
			case tc.want == nil && (errors.Is(err, ErrJobEnded) || took < 3*time.Second):
				t.Fatalf("RunWorker = %v after %v, want a join timeout after 3 s", err, took)
			}
		})
	}
}

// A coordinator that ends (a requeued job that had finished resumes at its
// last step and stops) drops the workers still waiting for admission, so
// they ask Ended at once instead of waiting for a step boundary that never
// comes.
func TestClosedCoordinatorDropsWorkersWaitingForAdmission(t *testing.T) {
	spec, wl := setup(t)
	c, err := NewCoordinator(CoordinatorOptions{Spec: spec, Data: wl.Data(), StateDir: t.TempDir(), JoinTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := auth.LoadSecret(c.TokenPath())
	if err != nil {
		t.Fatal(err)
	}
	var ended atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- RunWorker(context.Background(), WorkerOptions{Join: c.Addr(), Secret: secret, JobID: c.jobID, Threads: 1,
			JoinTimeout: 30 * time.Second, Ended: ended.Load})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.joiners) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker never queued for admission")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ended.Store(true)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrJobEnded) {
			t.Fatalf("RunWorker = %v, want ErrJobEnded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the worker still waits for admission 5 s after the coordinator closed")
	}
}
