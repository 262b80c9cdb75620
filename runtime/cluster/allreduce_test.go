package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// gatedRing is a ring whose all-reduce reports this rank's part at once and
// then returns only when finish is sent (or the ring is closed). closed is
// closed by Close.
type gatedRing struct {
	finish    chan error
	closed    chan struct{}
	closeOnce sync.Once
}

func newGatedRing() *gatedRing {
	return &gatedRing{finish: make(chan error), closed: make(chan struct{})}
}

func (g *gatedRing) AllReduceNotify(ctx context.Context, out []float32, local [][]float32, firstEST int, scale float32, contributed func()) error {
	if contributed != nil {
		contributed()
	}
	select {
	case err := <-g.finish:
		return err
	case <-g.closed:
		return errors.New("gated ring: closed")
	}
}

func (g *gatedRing) Close() error {
	g.closeOnce.Do(func() { close(g.closed) })
	return nil
}

// frameSession is a session with only what allReduce and connect use: the
// coordinator's frames come from msgs (unbuffered, so a send returns once
// the session took the frame).
func frameSession(r ring) *session {
	return &session{o: WorkerOptions{Logger: hclog.NewNullLogger(), IOTimeout: time.Hour}, ring: r, reduced: make([]float32, 4),
		msgs: make(chan frame), quit: make(chan struct{})}
}

const waitLimit = 10 * time.Second // for events that must come

// TestReleasedRankFinishesTheAllReduceItReported is the race a CI run
// lost: the coordinator commits a step on the last rank's answer and
// releases a leaving rank at that boundary, while the result may still be
// flowing through the leaving rank to the next (P-1 → 0 → … → P-2). The
// Bye must not close its ring until the all-reduce is done, for at most
// the I/O timeout, and the session's quit still ends it at once; an Abort
// closes it at once (another member was lost).
func TestReleasedRankFinishesTheAllReduceItReported(t *testing.T) {
	bye := frame{t: typeBye, b: []byte(`{"reason":"left on request"}`)}
	abort := frame{t: typeAbort, b: []byte(`{"step":7}`)}
	const (
		closesAtOnce = iota // the frame closes the ring
		finishes            // the ring stays open; the result then arrives
		quits               // the ring stays open; then the session must quit
		timesOut            // the ring stays open; the result never arrives
	)
	for _, tc := range []struct {
		name     string
		f        frame
		then     int
		want     error // errors.Is the all-reduce's error
		wantText string
	}{
		{"a bye after the report", bye, finishes, ErrLeft, ""},
		{"a bye, then the session quits", bye, quits, ErrLeft, ""},
		{"a bye, then no result within the I/O timeout", bye, timesOut, ErrLeft, ""},
		{"an abort after the report", abort, closesAtOnce, nil, "aborted by the coordinator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGatedRing()
			s := frameSession(g)
			if tc.then == timesOut {
				s.o.IOTimeout = 300 * time.Millisecond
			}
			reported := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- s.allReduce(context.Background(), 7, nil, 0, 1, func() error { close(reported); return nil })
			}()
			select {
			case <-reported:
			case <-time.After(waitLimit):
				t.Fatal("the rank never reported its part")
			}
			select {
			case s.msgs <- tc.f:
			case <-time.After(waitLimit):
				t.Fatal("the session did not take the coordinator's frame")
			}
			if tc.then == finishes || tc.then == quits {
				// The old code closed the ring as soon as it took the
				// Bye; give it that chance before the result arrives.
				select {
				case <-g.closed:
					t.Fatal("the ring was closed while the result was still to be forwarded")
				case err := <-done:
					t.Fatalf("the all-reduce ended (%v) before its result arrived", err)
				case <-time.After(200 * time.Millisecond):
				}
			}
			switch tc.then {
			case finishes:
				g.finish <- nil
			case quits:
				s.quitErr = ErrLeft
				close(s.quit)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(waitLimit):
				t.Fatal("the all-reduce did not return")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if tc.wantText != "" && (err == nil || !strings.Contains(err.Error(), tc.wantText)) {
				t.Fatalf("error %v, want one saying %q", err, tc.wantText)
			}
			select {
			case <-g.closed:
			default:
				t.Fatal("the ring was left open after the session ended the step")
			}
			if s.ring != nil {
				t.Fatal("the session still holds the closed ring")
			}
		})
	}
}
