package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// commit applies the previous step's update when m carries it, and checks
// that the replica is then at m's step. An update applied ahead
// (applyAhead) stands when m commits that step at the same rate (kept
// reports it), and is undone otherwise.
func (s *session) commit(m *stepMsg) (kept bool, err error) {
	c := m.Commit
	if s.ahead >= 0 {
		ahead := s.ahead
		s.ahead = -1
		if c != nil && c.Step == ahead && math.Float32bits(c.LR) == math.Float32bits(s.aheadLR) {
			c, kept = nil, true
			s.at = ahead + 1
		} else if err := s.rep.CopyFrom(s.backup); err != nil {
			return false, fmt.Errorf("step %d: undoing the update of step %d applied ahead: %w", m.Step, ahead, err)
		}
	}
	if c != nil {
		if s.at >= 0 && c.Step != s.at {
			return false, fmt.Errorf("step %d: the coordinator commits step %d, this replica is at step %d", m.Step, c.Step, s.at)
		}
		if s.reducedAt != c.Step {
			return false, fmt.Errorf("step %d: the coordinator commits step %d, whose all-reduce result never reached this worker (it had reported its part): rejoining", m.Step, c.Step)
		}
		s.rep.Apply(s.reduced, c.LR)
		s.at = c.Step + 1
	}
	if s.at >= 0 && m.Step != s.at {
		return false, fmt.Errorf("step %d asked of a replica at step %d (a commit was lost)", m.Step, s.at)
	}
	s.at = m.Step
	return kept, nil
}

// applyAhead applies step's update, whose all-reduce result is in
// s.reduced, at the rate the coordinator will commit it
// (trainer.LearningRate), keeping the replica as it was in s.backup: the
// worker is idle until the next step's message, which would otherwise
// start with this update. commit keeps it or undoes it.
func (s *session) applyAhead(step int64) {
	if s.backup == nil || s.reducedAt != step {
		return
	}
	if err := s.backup.CopyFrom(s.rep); err != nil {
		return // the commit applies it then
	}
	s.ahead, s.aheadLR = step, trainer.LearningRate(s.spec, s.horizon, step)
	s.rep.Apply(s.reduced, s.aheadLR)
}

// step applies the previous step's commit, computes this worker's ESTs,
// joins the all-reduce and answers; the ring's last rank returns the
// reduced gradient with its answer.
func (s *session) step(ctx context.Context, m *stepMsg) error {
	g := s.guess // the step this worker may have started on its own
	s.guess = nil
	adopted := false
	drop := func() { // the guess ends after the logical worker it computes
		if g != nil && !adopted {
			g.stopSoon()
			s.stale, g = g, nil // startGuess waits for it to end
		}
	}
	defer drop()
	kept, err := s.commit(m)
	if err != nil {
		return err
	}
	if err := s.keepStandby(m.Step); err != nil {
		return err
	}
	ests, bufs, err := s.receiveContexts(m.ESTs)
	if err != nil {
		return fmt.Errorf("step %d: %w", m.Step, err)
	}
	if m.TermSelf {
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
	connectMs, over, err := s.useRing(ctx, m)
	if over {
		return err
	} else if err != nil {
		return s.stepFailed(m, err)
	}
	for len(s.grads) < len(ests) {
		s.grads = append(s.grads, make([]float32, s.rep.NumParams()))
	}
	local := s.grads[:len(ests)]
	var computed <-chan struct{}
	adopted = kept && !m.KillSelf && !m.TermSelf && g.matches(m, s.ringID, bufs)
	if adopted { // the step this worker started on its own
		ests, computed, local = g.ests, g.done, g.local
		s.grads, s.guessGrads = s.guessGrads, s.grads
	} else {
		drop()
		computed = s.compute(s.rep, m.Step, ests, local, m.ESTs, m.KillSelf, nil)
	}
	if over, err := s.awaitCompute(m.Step, computed); over {
		return err
	} else if err != nil {
		return s.stepFailed(m, err)
	}
	if adopted {
		copy(m.ESTs, g.results)
	}
	scale := float32(1) / float32(s.spec.LogicalWorkers)
	done := stepDoneMsg{Step: m.Step, Attempt: m.Attempt, ESTs: m.ESTs, RingConnectMs: connectMs}
	last := m.Rank == s.ringSize-1
	// A rank other than the last reports as soon as its part of the
	// all-reduce is sent: the coordinator needs only the last rank's
	// answer (which carries the result) after the all-reduce, and this
	// rank needs the result only for the next step's commit.
	reported := false
	var report func() error
	if !last {
		report = func() error {
			reported = true
			gatherBuffers(bufs, ests)
			if err := s.p.send(typeStepDone, done, typeBuffers, bufs); err != nil {
				return fmt.Errorf("step %d: reporting: %w", m.Step, err)
			}
			return nil
		}
	}
	s.reducedAt = -1
	if err := s.allReduce(ctx, m.Step, local, m.FirstEST, scale, report); err != nil {
		if errors.Is(err, ErrLeft) || (reported && errors.Is(err, errReporting)) {
			return err
		}
		return s.stepFailed(m, err)
	}
	s.reducedAt = m.Step
	if !reported {
		gatherBuffers(bufs, ests)
		if last {
			done.Grad = true
			bufs = append(bufs, s.reduced...)
		}
		if err := s.p.send(typeStepDone, done, typeBuffers, bufs); err != nil {
			return fmt.Errorf("step %d: reporting: %w", m.Step, err)
		}
	}
	s.applyAhead(m.Step)
	s.startGuess(m, ests)
	return nil
}

// compute runs ests' micro-batches of step on rep in a goroutine, writing
// each gradient to local and its loss, sample hash and advanced cursor to
// results; the channel is closed when it is done, or when stop (if not
// nil) is set, checked before each EST. kill SIGKILLs the process after
// the first EST (fault injection).
func (s *session) compute(rep *trainer.Replica, step int64, ests []*trainer.ESTContext, local [][]float32, results []estState, kill bool, stop *atomic.Bool) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, c := range ests {
			if stop != nil && stop.Load() {
				return
			}
			in := trainer.ESTInput{Workload: s.wl, Sampler: s.sampler, Seed: s.spec.Seed, Step: step,
				MicroBatch: s.spec.MicroBatch, StreamKey: c.ID, Buffers: c.Buffers}
			results[i].Loss, results[i].Hash = rep.ComputeEST(c, in, local[i])
			results[i].Epoch, results[i].Pos = c.Cursor.Epoch, c.Cursor.Pos
			if kill {
				s.o.Logger.Warn("fault injection: SIGKILL myself mid-step", "step", step)
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}()
	return done
}

// awaitCompute waits for this worker's ESTs of step to be computed (done
// closed) while serving the coordinator's frames. The session ends at once,
// leaving the computation to finish into buffers no one reads again (the
// next session builds its own replica), when it must quit, when the
// coordinator says goodbye, or when its connection is gone. An Abort
// (another worker was lost) waits for the computation, since the redo
// reuses this replica, and is then returned; the frames after it are left
// for the session's loop. over reports that the session ends with err.
func (s *session) awaitCompute(step int64, done <-chan struct{}) (over bool, err error) {
	msgs := s.msgs
	var stopErr error
	for {
		select {
		case <-done:
			return false, stopErr
		case <-s.quit:
			s.o.Logger.Warn("abandoning this worker's part of the step in progress", "step", step, "reason", s.quitErr.Error())
			return true, s.quitErr
		case f, ok := <-msgs:
			switch kind, err := classify(f, ok); kind {
			case frameLost:
				return true, err
			case frameHeartbeat:
			case frameAbort:
				stopErr = fmt.Errorf("step %d aborted by the coordinator (a worker was lost)", step)
				msgs = nil
			case frameBye:
				return true, s.bye(f.b)
			default:
				return true, fmt.Errorf("unexpected %v message during step %d", f.t, step)
			}
		}
	}
}

// stepFailed reports a failed step attempt to the coordinator, which
// aborts it.
func (s *session) stepFailed(m *stepMsg, err error) error {
	s.o.Logger.Warn("step failed", "step", m.Step, "error", err)
	if serr := s.p.send(typeStepError, stepErrorMsg{Step: m.Step, Attempt: m.Attempt, Error: err.Error()}, 0, nil); serr != nil {
		return fmt.Errorf("step %d: %v; reporting it: %w", m.Step, err, serr)
	}
	return nil
}

// receiveContexts builds the EST contexts a message lists (cursors checked
// against the sampler) and fills their buffers from the buffers frame that
// follows it, in the listed order; bufs is that frame's data, all the
// contexts' buffers concatenated.
func (s *session) receiveContexts(states []estState) (ests []*trainer.ESTContext, bufs []float32, err error) {
	ests = make([]*trainer.ESTContext, len(states))
	nbuf := 0
	for i, e := range states {
		c := &trainer.ESTContext{ID: e.ID, Cursor: data.Cursor{Epoch: e.Epoch, Pos: e.Pos}, Buffers: s.rep.Net.NewBuffers()}
		if err := s.sampler.Check(c.Cursor, c.ID, s.spec.MicroBatch); err != nil {
			return nil, nil, fmt.Errorf("context of EST %d: %w", e.ID, err)
		}
		ests[i] = c
		nbuf += bufferLen(c)
	}
	bufs = make([]float32, nbuf)
	bf, err := s.next()
	if err == nil {
		err = decodeFloats(bf.t, typeBuffers, bf.b, bufs)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("receiving EST buffers: %w", err)
	}
	scatterBuffers(ests, bufs)
	return ests, bufs, nil
}
