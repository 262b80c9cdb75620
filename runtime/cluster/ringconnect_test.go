package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestConnectingTheRingServesTheCoordinator checks that a rank connecting
// the step's ring (dialing a member that may be gone, or waiting for one)
// ends the attempt at once on an Abort, a Bye, its quit or a lost
// coordinator connection, instead of after the ring's connect timeout: a
// CI run spent 30 s there after the coordinator had already aborted the
// step (TestAnAbortWhileConnectingLeavesTheRedoForTheLoop checks what the
// loop gets next).
func TestConnectingTheRingServesTheCoordinator(t *testing.T) {
	for _, tc := range []struct {
		name     string
		act      func(s *session)
		wantOver bool
		want     error
		wantText string
	}{
		{"abort", func(s *session) { s.msgs <- frame{t: typeAbort, b: []byte(`{"step":3}`)} }, false, nil, "aborted by the coordinator"},
		{"bye", func(s *session) { s.msgs <- frame{t: typeBye, b: []byte(`{"reason":"left on request"}`)} }, true, ErrLeft, ""},
		{"quit", func(s *session) { s.quitErr = ErrLeft; close(s.quit) }, true, ErrLeft, ""},
		{"connection gone", func(s *session) { close(s.msgs) }, true, nil, "the connection is gone"},
		{"read error", func(s *session) { s.msgs <- frame{err: errors.New("reset by peer")} }, true, nil, "reset by peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := frameSession(nil)
			cancelled := make(chan struct{})
			s.o.connectRing = func(ctx context.Context, rank int, members []ringMember, ln net.Listener, epoch int64) (ring, error) {
				<-ctx.Done() // a member that never answers
				close(cancelled)
				var none *gatedRing
				return none, ctx.Err() // a typed nil, as a failed collective.Connect gives
			}
			type res struct {
				r    ring
				over bool
				err  error
			}
			done := make(chan res, 1)
			go func() {
				r, over, err := s.connect(context.Background(), &stepMsg{Step: 3, Rank: 1, RingID: 9})
				done <- res{r, over, err}
			}()
			s.msgs <- frame{t: typeHeartbeat} // served, not an end
			tc.act(s)
			var got res
			select {
			case got = <-done:
			case <-time.After(waitLimit):
				t.Fatal("connecting the ring did not end")
			}
			select {
			case <-cancelled:
			default:
				t.Fatal("the ring connection was not cancelled")
			}
			if got.r != nil || got.over != tc.wantOver {
				t.Fatalf("ring %v over %v, want none and over %v (err %v)", got.r, got.over, tc.wantOver, got.err)
			}
			if tc.want != nil && !errors.Is(got.err, tc.want) {
				t.Fatalf("error %v, want %v", got.err, tc.want)
			}
			if tc.wantText != "" && (got.err == nil || !strings.Contains(got.err.Error(), tc.wantText)) {
				t.Fatalf("error %v, want one saying %q", got.err, tc.wantText)
			}
		})
	}
	t.Run("built", func(t *testing.T) {
		s := frameSession(nil)
		g := newGatedRing()
		ready := make(chan struct{})
		s.o.connectRing = func(ctx context.Context, rank int, members []ringMember, ln net.Listener, epoch int64) (ring, error) {
			<-ready
			return g, nil
		}
		done := make(chan error, 1)
		var got ring
		go func() {
			r, over, err := s.connect(context.Background(), &stepMsg{Step: 3})
			if over && err == nil {
				err = errors.New("over without an error")
			}
			got = r
			done <- err
		}()
		s.msgs <- frame{t: typeHeartbeat}
		close(ready)
		select {
		case err := <-done:
			if err != nil || got != ring(g) {
				t.Fatalf("connect returned %v, %v; want the built ring", got, err)
			}
		case <-time.After(waitLimit):
			t.Fatal("connect did not return the built ring")
		}
	})
}

// TestAnAbortWhileConnectingLeavesTheRedoForTheLoop checks that connect takes
// only the Abort that ends it: the redo's frames behind it (a second Abort
// from failStep, then the redo's step message) reach the session's loop in
// order.
func TestAnAbortWhileConnectingLeavesTheRedoForTheLoop(t *testing.T) {
	s := frameSession(nil)
	s.msgs = make(chan frame, 3)
	s.o.connectRing = func(ctx context.Context, rank int, members []ringMember, ln net.Listener, epoch int64) (ring, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.msgs <- frame{t: typeAbort, b: []byte(`{"step":3}`)}
	s.msgs <- frame{t: typeAbort, b: []byte(`{"step":3}`)}
	s.msgs <- frame{t: typeStep, b: []byte(`{"step":3}`)}
	_, over, err := s.connect(context.Background(), &stepMsg{Step: 3, RingID: 9})
	if over || err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("connect: over %v, error %v; want the step's failure", over, err)
	}
	for _, want := range []frame{{t: typeAbort}, {t: typeStep}} {
		f, err := s.next()
		if err != nil || f.t != want.t {
			t.Fatalf("the loop got %v (%v), want %v", f.t, err, want.t)
		}
	}
}

// TestUseRingKeepsOrReplacesTheRing drives the step's ring choice: the
// current ring when the step names it, a new one otherwise (the old closed
// first), and none after an Abort while connecting.
func TestUseRingKeepsOrReplacesTheRing(t *testing.T) {
	old, built := newGatedRing(), newGatedRing()
	s := frameSession(old)
	s.ringID, s.ringSize = 4, 2
	calls := 0
	block := false
	s.o.connectRing = func(ctx context.Context, rank int, members []ringMember, ln net.Listener, epoch int64) (ring, error) {
		calls++
		if block {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return built, nil
	}
	if _, over, err := s.useRing(context.Background(), &stepMsg{Step: 1, RingID: 4}); over || err != nil || calls != 0 || s.ring != ring(old) {
		t.Fatalf("same ring id: over %v, error %v, %d connects, ring %v; want the current ring kept", over, err, calls, s.ring)
	}
	m := &stepMsg{Step: 2, RingID: 5, Ring: make([]ringMember, 3)}
	if _, over, err := s.useRing(context.Background(), m); over || err != nil || calls != 1 || s.ring != ring(built) || s.ringID != 5 || s.ringSize != 3 {
		t.Fatalf("new ring id: over %v, error %v, %d connects, ring %v id %d size %d; want the built ring", over, err, calls, s.ring, s.ringID, s.ringSize)
	}
	select {
	case <-old.closed:
	default:
		t.Fatal("the old ring was left open")
	}
	block = true
	done := make(chan error, 1)
	go func() {
		_, _, err := s.useRing(context.Background(), &stepMsg{Step: 3, RingID: 6})
		done <- err
	}()
	s.msgs <- frame{t: typeAbort, b: []byte(`{"step":3}`)}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "aborted") {
			t.Fatalf("error %v, want the abort", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("an Abort did not end the ring connection")
	}
	if s.ring != nil {
		t.Fatal("the session holds a ring after a failed connection")
	}
}
