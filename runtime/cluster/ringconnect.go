package cluster

import (
	"context"
	"fmt"
	"time"
)

// useRing makes s.ring step m's ring: the current one when m names it,
// else a new one built by connect (the old one closed first). connectMs is
// how long building it took (0 when kept); over and err are connect's.
func (s *session) useRing(ctx context.Context, m *stepMsg) (connectMs float64, over bool, err error) {
	if m.RingID == s.ringID {
		return 0, false, nil
	}
	if s.ring != nil {
		s.ring.Close()
		s.ring = nil
	}
	t0 := time.Now()
	r, over, err := s.connect(ctx, m)
	if over || err != nil {
		return 0, over, err
	}
	s.ring, s.ringID, s.ringSize = r, m.RingID, len(m.Ring)
	return float64(time.Since(t0).Microseconds()) / 1000, false, nil
}

// connect builds step m's all-reduce ring while serving the coordinator, as
// allReduce does for the reduction itself: an Abort (another member was
// lost, possibly the one this rank is dialing or waiting for), a Bye, a
// lost connection or the session's quit ends the connection attempt at
// once instead of after the ring's connect timeout. over reports that the
// session ends with err (a Bye, quit, or a lost coordinator connection);
// otherwise a non-nil err is the step's failure, to be reported.
func (s *session) connect(ctx context.Context, m *stepMsg) (r ring, over bool, err error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type built struct {
		r   ring
		err error
	}
	done := make(chan built, 1)
	go func() {
		r, err := s.o.connectRing(cctx, m.Rank, m.Ring, s.ln, m.RingID)
		done <- built{r, err}
	}()
	var stop error // why the attempt was cancelled
	stopOver := false
	msgs, quit := s.msgs, s.quit
	for {
		select {
		case b := <-done:
			if stop != nil {
				if b.err == nil { // built just as it was cancelled
					b.r.Close()
				}
				return nil, stopOver, stop
			}
			if b.err != nil {
				return nil, false, fmt.Errorf("connecting the ring: %w", b.err)
			}
			return b.r, false, nil
		case <-quit:
			stop, stopOver, quit, msgs = s.quitErr, true, nil, nil
			cancel()
		case f, ok := <-msgs:
			switch kind, err := classify(f, ok); kind {
			case frameLost:
				stop, stopOver = err, true
			case frameHeartbeat:
				continue
			case frameAbort:
				stop = fmt.Errorf("connecting the ring of step %d: aborted by the coordinator (a worker was lost)", m.Step)
			case frameBye:
				stop, stopOver = s.bye(f.b), true
			default:
				stop, stopOver = fmt.Errorf("unexpected %v message while connecting the ring of step %d", f.t, m.Step), true
			}
			quit, msgs = nil, nil
			cancel()
		}
	}
}
