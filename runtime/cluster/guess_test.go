package cluster

import (
	"math"
	"testing"
)

// TestAGuessIsTakenOnlyForExactlyTheStepItComputed checks guess.matches:
// any difference between the step message and the guess's inputs (step,
// rank, ring, logical workers, cursors, a buffer's bits) drops the guess.
func TestAGuessIsTakenOnlyForExactlyTheStepItComputed(t *testing.T) {
	g := &guess{step: 7, rank: 1, first: 4, ringID: 3, inputs: []estState{{ID: 4, Pos: 64}, {ID: 5, Pos: 64}},
		bufs: []float32{1, 2, float32(math.Copysign(0, -1))}}
	msg := func() *stepMsg {
		return &stepMsg{Step: 7, Rank: 1, FirstEST: 4, RingID: 3, ESTs: []estState{{ID: 4, Pos: 64}, {ID: 5, Pos: 64}}}
	}
	bufs := func() []float32 { return []float32{1, 2, float32(math.Copysign(0, -1))} }
	cases := []struct {
		name   string
		change func(m *stepMsg, ringID *int64, b *[]float32)
		want   bool
	}{
		{"the same step", func(*stepMsg, *int64, *[]float32) {}, true},
		{"another step (a redo)", func(m *stepMsg, _ *int64, _ *[]float32) { m.Step = 6 }, false},
		{"another rank", func(m *stepMsg, _ *int64, _ *[]float32) { m.Rank = 0 }, false},
		{"other logical workers", func(m *stepMsg, _ *int64, _ *[]float32) { m.FirstEST, m.ESTs[0].ID, m.ESTs[1].ID = 3, 3, 4 }, false},
		{"one logical worker fewer", func(m *stepMsg, _ *int64, _ *[]float32) { m.ESTs = m.ESTs[:1] }, false},
		{"a cursor elsewhere", func(m *stepMsg, _ *int64, _ *[]float32) { m.ESTs[1].Pos = 96 }, false},
		{"another epoch", func(m *stepMsg, _ *int64, _ *[]float32) { m.ESTs[0].Epoch = 1 }, false},
		{"a new ring", func(m *stepMsg, r *int64, _ *[]float32) { m.RingID, *r = 4, 4 }, false},
		{"a buffer of other bits (+0 for -0)", func(_ *stepMsg, _ *int64, b *[]float32) { (*b)[2] = 0 }, false},
		{"buffers of another length", func(_ *stepMsg, _ *int64, b *[]float32) { *b = (*b)[:2] }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, ringID, b := msg(), int64(3), bufs()
			c.change(m, &ringID, &b)
			if got := g.matches(m, ringID, b); got != c.want {
				t.Fatalf("matches = %v, want %v", got, c.want)
			}
		})
	}
	var none *guess
	if none.matches(msg(), 3, bufs()) {
		t.Fatal("no guess matched a step")
	}
}
