package cluster

import (
	"context"
	"fmt"
	"time"
)

// allReduce runs the ring's all-reduce while serving the coordinator: an
// Abort (another member was lost) closes the ring, so a step blocked on a
// dead or cut-off neighbour ends at once instead of after the ring's I/O
// timeout. Any failure leaves the ring closed. When report is not nil it
// is called once this rank's part is sent; after it, the next step's
// frames may arrive before the result, and are stashed. A report error
// (wrapping errReporting) fails the all-reduce. Once it fails, the frames
// that follow are left for the session's loop (the redo's step message
// among them). A Bye closes the ring at once only before this rank's
// report; after it (the coordinator committed the step on the last rank's
// answer and released this one) the ranks after this one may still need
// the result it forwards (P-1 → 0 → … → P-2), so the all-reduce may finish
// first, for at most the I/O timeout (the transfer is all that is left),
// and the session's quit still ends it at once.
func (s *session) allReduce(ctx context.Context, step int64, local [][]float32, first int, scale float32, report func() error) error {
	done := make(chan error, 1)
	r := s.ring
	sent := make(chan struct{}, 1)
	var contributed func()
	if report != nil {
		contributed = func() { sent <- struct{}{} }
	}
	go func() { done <- r.AllReduceNotify(ctx, s.reduced, local, first, scale, contributed) }()
	var stopErr error
	quit, msgs := s.quit, s.msgs
	reported := false
	var released <-chan time.Time // the bound after a Bye; nil until then
	for {
		select {
		case <-released:
			released = nil
			r.Close() // AllReduce returns promptly
			continue
		case <-sent:
			reported = true
			if err := report(); err != nil {
				stopErr = fmt.Errorf("%w: %w", errReporting, err)
				r.Close() // AllReduce returns promptly
			}
			continue
		case <-quit:
			stopErr, quit = s.quitErr, nil
			r.Close() // AllReduce returns promptly
		case err := <-done:
			if err == nil && stopErr == nil {
				return nil
			}
			r.Close()
			s.ring, s.ringID = nil, 0
			if stopErr != nil {
				return stopErr
			}
			return fmt.Errorf("all-reduce: %w", err)
		case f, ok := <-msgs:
			kind, err := classify(f, ok)
			switch {
			case kind == frameLost:
				stopErr = err
			case kind == frameAbort:
				stopErr = fmt.Errorf("step %d aborted by the coordinator (a worker was lost)", step)
			case kind == frameBye && reported:
				// Released after its step was committed, which the
				// coordinator does on the last rank's answer: the
				// result may still be flowing through this rank to
				// the next (P-1 → 0 → … → P-2), so closing the ring
				// now would leave a neighbour without it. Finish the
				// all-reduce, then leave.
				stopErr, msgs = s.bye(f.b), nil
				released = time.After(s.o.IOTimeout)
				continue
			case kind == frameBye:
				stopErr = s.bye(f.b)
			case kind == frameHeartbeat:
				continue
			case reported && (f.t == typeStep || f.t == typeBuffers || f.t == typeStandby):
				s.stash = append(s.stash, f) // the next step, sent on this rank's report
				continue
			default:
				stopErr = fmt.Errorf("unexpected %v message during the all-reduce", f.t)
			}
			msgs = nil
			r.Close() // AllReduce returns promptly
		}
	}
}
