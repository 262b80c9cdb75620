package cluster

import (
	"math"
	"sync/atomic"

	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// guess is a step a worker computes before the coordinator asks for it:
// once the update of step S is applied ahead (applyAhead), step S+1 on the
// same logical workers, from the contexts step S left them in, is what the
// coordinator sends next unless the membership, the placement or the
// ring changes. The step message confirms the guess (matches) or the
// guess is dropped (stopSoon) and the step computed from the message. The
// guess computes on a replica of its own (a copy of the parameters) into
// gradient buffers of its own, from contexts nothing else uses, so a
// dropped guess holds nothing the step needs and loses only its time: it
// ends after the logical worker it is computing, which matters when that
// takes long (the worker must still leave within its grace on SIGTERM).
// A worker thus computes while the coordinator gathers, commits and
// records the last step and sends the next, instead of waiting for it.
// The price is memory: the guess's replica and gradient buffers, and the
// copy applyAhead keeps, hold about 2 + (logical workers on this worker)
// more copies of the parameters than a worker needed before.
type guess struct {
	step        int64
	rank, first int
	ringID      int64
	inputs      []estState // the logical workers and their cursors before the step
	bufs        []float32  // the contexts' BatchNorm buffers, flattened, before the step
	ests        []*trainer.ESTContext
	local       [][]float32 // the gradients, one per logical worker
	results     []estState
	done        <-chan struct{}
	stop        atomic.Bool
}

// startGuess starts computing the step after m on ests, the contexts m's
// step advanced, when this worker applied m's update ahead, has a ring,
// and no dropped guess is still computing.
func (s *session) startGuess(m *stepMsg, ests []*trainer.ESTContext) {
	if s.ahead != m.Step || s.ring == nil || len(ests) == 0 {
		return
	}
	if s.stale != nil {
		select {
		case <-s.stale.done:
			s.stale = nil
		default:
			return
		}
	}
	if s.guessRep == nil {
		rep, err := trainer.NewReplica(s.spec, s.wl, s.rep.Tape.Threads())
		if err != nil {
			return
		}
		s.guessRep = rep
	}
	models.CopyData(s.guessRep.Params, s.rep.Params)
	for len(s.guessGrads) < len(ests) {
		s.guessGrads = append(s.guessGrads, make([]float32, s.rep.NumParams()))
	}
	g := &guess{step: m.Step + 1, rank: m.Rank, first: m.FirstEST, ringID: s.ringID, ests: ests,
		results: make([]estState, len(ests))}
	n := 0
	for i, c := range ests {
		g.inputs = append(g.inputs, estState{ID: c.ID, Epoch: c.Cursor.Epoch, Pos: c.Cursor.Pos})
		g.results[i].ID = c.ID
		n += bufferLen(c)
	}
	g.bufs = make([]float32, n)
	gatherBuffers(g.bufs, ests)
	g.local = s.guessGrads[:len(ests)]
	g.done = s.compute(s.guessRep, g.step, ests, g.local, g.results, false, &g.stop)
	s.guess = g
}

// matches reports whether step message m (with its contexts' buffers
// bufs, on ring ringID) asks for exactly the step g computes: the same
// step, rank, ring, logical workers, cursors and buffer bits.
func (g *guess) matches(m *stepMsg, ringID int64, bufs []float32) bool {
	if g == nil || m.Step != g.step || m.Rank != g.rank || m.FirstEST != g.first || m.RingID != ringID || ringID != g.ringID ||
		len(m.ESTs) != len(g.inputs) || len(bufs) != len(g.bufs) {
		return false
	}
	for i, e := range m.ESTs {
		if in := g.inputs[i]; e.ID != in.ID || e.Epoch != in.Epoch || e.Pos != in.Pos {
			return false
		}
	}
	for i, v := range bufs {
		if math.Float32bits(v) != math.Float32bits(g.bufs[i]) {
			return false
		}
	}
	return true
}

// stopSoon asks the guess to stop without waiting (the session ends).
func (g *guess) stopSoon() {
	if g != nil {
		g.stop.Store(true)
	}
}
