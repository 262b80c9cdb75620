package cluster

import (
	"math"
	"sync/atomic"

	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// guess is a step a worker computes before the coordinator asks for it:
// once the update of step S is applied ahead (applyAhead), step S+1 on the
// same logical workers, from the contexts step S left them in, is what the
// coordinator sends next unless the membership, the placement or the
// ring changes. The step message confirms the guess (matches) or the
// guess is dropped (cancel) and the step computed from the message; the
// guess changes nothing but the worker's gradient buffers and the
// contexts it owns, so dropping it loses only its time. A worker thus
// computes while the coordinator gathers, commits and records the last
// step and sends the next, instead of waiting for it.
type guess struct {
	step         int64
	rank, first  int
	ringID       int64
	ids          []int
	epochs, poss []int
	bufs         []float32 // the contexts' BatchNorm buffers, flattened, before the step
	ests         []*trainer.ESTContext
	results      []estState
	done         <-chan struct{}
	stop         atomic.Bool
}

// startGuess starts computing the step after m on ests, the contexts m's
// step advanced, when this worker applied m's update ahead and has a ring.
func (s *session) startGuess(m *stepMsg, ests []*trainer.ESTContext) {
	if s.ahead != m.Step || s.ring == nil || len(ests) == 0 {
		return
	}
	g := &guess{step: m.Step + 1, rank: m.Rank, first: m.FirstEST, ringID: s.ringID, ests: ests,
		results: make([]estState, len(ests))}
	n := 0
	for i, c := range ests {
		g.ids = append(g.ids, c.ID)
		g.epochs, g.poss = append(g.epochs, c.Cursor.Epoch), append(g.poss, c.Cursor.Pos)
		g.results[i].ID = c.ID
		n += bufferLen(c)
	}
	g.bufs = make([]float32, n)
	gatherBuffers(g.bufs, ests)
	g.done = s.compute(g.step, ests, s.grads[:len(ests)], g.results, false, &g.stop)
	s.guess = g
}

// matches reports whether step message m (with its contexts' buffers
// bufs, on ring ringID) asks for exactly the step g computes: the same
// step, rank, ring, logical workers, cursors and buffer bits.
func (g *guess) matches(m *stepMsg, ringID int64, bufs []float32) bool {
	if g == nil || m.Step != g.step || m.Rank != g.rank || m.FirstEST != g.first || m.RingID != ringID || ringID != g.ringID ||
		len(m.ESTs) != len(g.ids) || len(bufs) != len(g.bufs) {
		return false
	}
	for i, e := range m.ESTs {
		if e.ID != g.ids[i] || e.Epoch != g.epochs[i] || e.Pos != g.poss[i] {
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

// cancel stops the guess after the logical worker it is computing and
// waits for that, so the gradient buffers are free again.
func (g *guess) cancel() {
	if g == nil {
		return
	}
	g.stop.Store(true)
	<-g.done
}

// stopSoon asks the guess to stop without waiting (the session ends).
func (g *guess) stopSoon() {
	if g != nil {
		g.stop.Store(true)
	}
}
