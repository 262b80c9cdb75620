package torchengine

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer several processes' output goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor waits until line appears in b, failing the test past within.
func waitFor(t *testing.T, b *lockedBuffer, line string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(b.String(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("%q did not appear within %v:\n%s", line, within, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestASlowPeerIsWaitedForPastTheCollectiveBound: process 1 computes each
// step for 5 s (2 logical workers, 2.5 s a forward), longer than the 3 s
// bound on every collective. It heartbeats, so it is alive: its peer must
// wait for it, not fail the step, and the digests are the fixed run's.
func TestASlowPeerIsWaitedForPastTheCollectiveBound(t *testing.T) {
	want := train(t, map[int64][]int{0: {4}}, 2, nil)
	l, ctx := newLocal(t)
	l.group.TimeoutSeconds = 3
	l.EnvOf = func(rank int) []string {
		if rank == 1 {
			return []string{"TOYJOB_SLOW=0:2.5"}
		}
		return nil
	}
	if err := l.Resize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var got []string
	for step := range int64(2) {
		t0 := time.Now()
		res, err := l.Step(ctx, step, []int{2, 2}, nil)
		if err != nil {
			t.Fatalf("step %d with a slow but live peer: %v", step, err)
		}
		if took := time.Since(t0); took < 4*time.Second {
			t.Fatalf("step %d took %v: not past the 3 s collective bound, so the test shows nothing", step, took)
		} else {
			t.Logf("step %d: %v", step, took.Round(time.Millisecond))
		}
		got = append(got, res.Digest)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("digests\n got %v\nwant %v", got, want)
	}
}

// TestAMemberLostWhileTheGroupFormsIsNoticedAtOnce holds process 2 of 3
// before it arrives at the first rendezvous (the others wait for it there),
// SIGKILLs it, and wants the step to report it lost well within the
// heartbeat timeout (not at the 60 s bound of the group's setup); the step
// is then redone on the two survivors, which were not restarted, with the
// fixed run's digests.
func TestAMemberLostWhileTheGroupFormsIsNoticedAtOnce(t *testing.T) {
	want := train(t, map[int64][]int{0: {4}}, 2, nil)
	l, ctx := newLocal(t)
	l.group.TimeoutSeconds = 60
	var stderr lockedBuffer
	l.start.Stderr = &stderr
	l.EnvOf = func(rank int) []string {
		if rank == 2 {
			return []string{"TOYJOB_HOLD_GROUP=120"}
		}
		return nil
	}
	if err := l.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	survivors := []int{l.Processes()[0].Pid(), l.Processes()[1].Pid()}
	victim := l.Processes()[2].Pid() // read before Step runs: Processes is not safe beside it
	type stepped struct {
		res *StepResult
		err error
	}
	done := make(chan stepped, 1)
	go func() {
		res, err := l.Step(ctx, 0, []int{2, 1, 1}, nil)
		done <- stepped{res, err}
	}()
	waitFor(t, &stderr, "toyjob: holding rank 2 of 3 before the rendezvous", time.Minute)
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	var s stepped
	select {
	case s = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the step did not end within 90 s of the kill")
	}
	took := time.Since(t0)
	var lost *LostError
	if !errors.As(s.err, &lost) || !slices.Equal(lost.Ranks, []int{2}) {
		t.Fatalf("after the kill during the rendezvous: %v; want rank 2 lost", s.err)
	}
	t.Logf("kill during the rendezvous to the lost report: %v", took.Round(time.Millisecond))
	if hb := l.start.HeartbeatTimeout; took > hb {
		t.Fatalf("the lost member was reported %v after the kill, want within the %v heartbeat timeout", took, hb)
	}
	var got []string
	for step := range int64(2) {
		res, err := l.Step(ctx, step, []int{2, 2}, nil)
		if err != nil {
			t.Fatalf("step %d on the survivors: %v", step, err)
		}
		got = append(got, res.Digest)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("digests\n got %v\nwant %v", got, want)
	}
	if pids := []int{l.Processes()[0].Pid(), l.Processes()[1].Pid()}; !slices.Equal(pids, survivors) {
		t.Fatalf("processes %v after the redo, want the survivors %v (not restarted)", pids, survivors)
	}
}
