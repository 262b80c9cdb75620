package engine

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestBatchNormUpdatesRunningBuffersWithUnbiasedVariance(t *testing.T) {
	// x [4,2]: channel 0 = 1,2,3,4 (mean 2.5, biased var 1.25, unbiased 5/3);
	// channel 1 = 0,0,0,8 (mean 2, biased var 12, unbiased 16).
	x := FromSlice([]float32{1, 0, 2, 0, 3, 0, 4, 8}, 4, 2)
	rm, rv := FromSlice([]float32{0.5, -1}, 2), FromSlice([]float32{1, 2}, 2)
	const m = 0.1
	NewTape(1).BatchNorm(x, nil, nil, rm, rv, m, 1e-5, true)
	wantMean := []float64{0.9*0.5 + 0.1*2.5, 0.9*-1 + 0.1*2}
	wantVar := []float64{0.9*1 + 0.1*5.0/3, 0.9*2 + 0.1*16}
	for c := range 2 {
		if math.Abs(float64(rm.Data[c])-wantMean[c]) > 1e-6 || math.Abs(float64(rv.Data[c])-wantVar[c]) > 1e-6 {
			t.Errorf("channel %d: running (mean, var) = (%v, %v), want (%v, %v)", c, rm.Data[c], rv.Data[c], wantMean[c], wantVar[c])
		}
	}
}

func TestBatchNormTrainingNormalisesWithBatchStatistics(t *testing.T) {
	x := FromSlice([]float32{1, 0, 2, 0, 3, 0, 4, 8}, 4, 2)
	gamma, beta := FromSlice([]float32{2, 1}, 2), FromSlice([]float32{0.5, 0}, 2)
	y := NewTape(1).BatchNorm(x, gamma, beta, nil, nil, 0.1, 0, true)
	// channel 0: (x-2.5)/sqrt(1.25)*2+0.5; channel 1: (x-2)/sqrt(12).
	for n := range 4 {
		want0 := (float64(x.Data[2*n])-2.5)/math.Sqrt(1.25)*2 + 0.5
		want1 := (float64(x.Data[2*n+1]) - 2) / math.Sqrt(12)
		if math.Abs(float64(y.Data[2*n])-want0) > 1e-5 || math.Abs(float64(y.Data[2*n+1])-want1) > 1e-5 {
			t.Errorf("row %d: got (%v, %v), want (%v, %v)", n, y.Data[2*n], y.Data[2*n+1], want0, want1)
		}
	}
}

func TestBatchNormEvalUsesRunningBuffersAndLeavesThemAlone(t *testing.T) {
	x := FromSlice([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 2, 1, 2)
	gamma, beta := FromSlice([]float32{1.5, -1}, 2), FromSlice([]float32{0.25, 2}, 2)
	rm, rv := FromSlice([]float32{1, 3}, 2), FromSlice([]float32{4, 0.25}, 2)
	const eps = 1e-3
	y := NewTape(1).BatchNorm(x, gamma, beta, rm, rv, 0.1, eps, false)
	for i, v := range x.Data {
		c := (i / 2) % 2
		want := float64(gamma.Data[c])*(float64(v)-float64(rm.Data[c]))/math.Sqrt(float64(rv.Data[c])+eps) + float64(beta.Data[c])
		if math.Abs(float64(y.Data[i])-want) > 1e-5 {
			t.Errorf("element %d: got %v, want %v", i, y.Data[i], want)
		}
	}
	if rm.Data[0] != 1 || rm.Data[1] != 3 || rv.Data[0] != 4 || rv.Data[1] != 0.25 {
		t.Errorf("eval mode changed the running buffers: mean %v, var %v", rm.Data, rv.Data)
	}
}

func TestDropoutDrawsOncePerElementInRowMajorOrder(t *testing.T) {
	x := FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	src := &seqSource{vals: []float32{0.1, 0.5, 0.25, 0.9, 0.2499, 0.75}}
	y := NewTape(1).Dropout(x, 0.25, src)
	if src.draws != 6 {
		t.Fatalf("dropout made %d draws for 6 elements, want 6", src.draws)
	}
	// keep when u >= p: elements 1, 2, 3 and 5; kept ones scaled by 1/(1-0.25).
	want := []float32{0, 2 / 0.75, 3 / 0.75, 4 / 0.75, 0, 6 / 0.75}
	for i := range want {
		if math.Abs(float64(y.Data[i]-want[i])) > 1e-6 {
			t.Errorf("element %d: got %v, want %v", i, y.Data[i], want[i])
		}
	}
}

func TestDropoutMasksDependOnTheSource(t *testing.T) {
	x := NewTensor(64)
	fill(x.Data, 1)
	a := NewTape(1).Dropout(x, 0.5, newRand(1))
	b := NewTape(1).Dropout(x, 0.5, newRand(2))
	c := NewTape(1).Dropout(x, 0.5, newRand(1))
	if bitsEqual(a.Data, b.Data) {
		t.Error("two different sources gave the same mask")
	}
	if !bitsEqual(a.Data, c.Data) {
		t.Error("the same source gave different masks")
	}
}

func TestDropoutWithProbabilityOneZeroesEverything(t *testing.T) {
	x := FromSlice([]float32{1, -2, 3}, 3)
	src := &seqSource{vals: []float32{0, 0.5, 0.999}}
	y := NewTape(1).Dropout(x, 1, src)
	for i, v := range y.Data {
		if v != 0 {
			t.Errorf("element %d = %v, want 0", i, v)
		}
	}
}

func TestSoftmaxCrossEntropyIsStableForLargeLogits(t *testing.T) {
	cases := []struct {
		name  string
		shift float32
	}{
		{"logits near zero", 0},
		{"logits near 1e4", 1e4},
		{"logits near -1e4", -1e4},
	}
	// log-sum-exp of (1, 2, 0) minus the target logit 2.
	want := math.Log(math.Exp(1)+math.Exp(2)+math.Exp(0)) - 2
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logits := NewParam(1, 3)
			copy(logits.Data, []float32{1 + c.shift, 2 + c.shift, c.shift})
			tp := NewTape(1)
			loss := tp.SoftmaxCrossEntropy(logits, []int32{1})
			tp.Backward(loss)
			if math.Abs(float64(loss.Data[0])-want) > 2e-3 {
				t.Errorf("loss %v, want %v", loss.Data[0], want)
			}
			var sum float32
			for _, g := range logits.Grad {
				if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
					t.Fatalf("gradient %v is not finite", logits.Grad)
				}
				sum += g
			}
			if math.Abs(float64(sum)) > 1e-5 {
				t.Errorf("gradient %v does not sum to 0", logits.Grad)
			}
		})
	}
}

func TestArgmaxPicksTheFirstLargest(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name string
		row  []float32
		want int
	}{
		{"an empty row has no index", nil, -1},
		{"a single value is its own maximum", []float32{-3}, 0},
		{"ties go to the first", []float32{1, 5, 5, 2}, 1},
		{"negative values work", []float32{-4, -1, -2}, 1},
		{"a leading NaN is skipped", []float32{nan, 1, 2}, 2},
		{"all NaN gives index 0", []float32{nan, nan}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Argmax(c.row); got != c.want {
				t.Errorf("Argmax(%v) = %d, want %d", c.row, got, c.want)
			}
		})
	}
}

func TestInitUniformStaysInBoundsInDrawOrder(t *testing.T) {
	w := NewTensor(3)
	InitUniform(w, 0.5, &seqSource{vals: []float32{0, 0.5, 0.75}})
	want := []float32{-0.5, 0, 0.25}
	if !bitsEqual(w.Data, want) {
		t.Errorf("InitUniform with draws 0, 0.5, 0.75 and bound 0.5 = %v, want %v", w.Data, want)
	}
	big := NewTensor(1000)
	b := FanInBound(25)
	InitUniform(big, b, newRand(3))
	for i, v := range big.Data {
		if v < -b || v >= b {
			t.Fatalf("element %d = %v outside [-%v, %v)", i, v, b, b)
		}
	}
	if b != 0.2 {
		t.Errorf("FanInBound(25) = %v, want 0.2", b)
	}
}

func TestReshapeInfersOneDimensionAndSharesData(t *testing.T) {
	x := NewParam(2, 3, 4)
	y := NewTape(1).Reshape(x, 6, -1)
	if !slices.Equal(y.Shape, []int{6, 4}) {
		t.Fatalf("shape %v, want [6 4]", y.Shape)
	}
	y.Data[5] = 7
	if x.Data[5] != 7 {
		t.Error("reshape copied the data instead of viewing it")
	}
}

func TestBackwardAccumulatesIntoParameters(t *testing.T) {
	w := FromSlice([]float32{2}, 1, 1)
	w.Grad = []float32{10}
	x := FromSlice([]float32{3}, 1, 1)
	tp := NewTape(1)
	tp.Backward(tp.Reshape(tp.Linear(x, w, nil), 1))
	if w.Grad[0] != 13 {
		t.Errorf("grad after backward = %v, want 10 + 3", w.Grad[0])
	}
	tp.Reset()
	w.ZeroGrad()
	if w.Grad[0] != 0 {
		t.Errorf("ZeroGrad left %v", w.Grad[0])
	}
}

func TestGradDisabledRecordsNothing(t *testing.T) {
	w := NewParam(2, 2)
	tp := NewTape(1)
	tp.SetGradEnabled(false)
	y := tp.Linear(NewTensor(1, 2), w, nil)
	if y.Grad != nil || len(tp.ops) != 0 {
		t.Errorf("with gradients disabled the output has Grad %v and the tape %d ops", y.Grad, len(tp.ops))
	}
}

func TestShapeErrorsPanicNamingTheOp(t *testing.T) {
	cases := []struct {
		name string
		want string
		call func(tp *Tape)
	}{
		{"linear with mismatched In", "Linear", func(tp *Tape) { tp.Linear(NewTensor(2, 3), NewTensor(4, 5), nil) }},
		{"conv2d with a kernel larger than the input", "Conv2d", func(tp *Tape) { tp.Conv2d(NewTensor(1, 1, 2, 2), NewTensor(1, 1, 3, 3), nil, 1, 0) }},
		{"max pool with a window larger than the input", "MaxPool2d", func(tp *Tape) { tp.MaxPool2d(NewTensor(1, 1, 2, 2), 3, 1) }},
		{"embedding with an id outside the vocabulary", "Embedding", func(tp *Tape) { tp.Embedding([]int32{5}, NewTensor(5, 2)) }},
		{"cross-entropy with a target out of range", "SoftmaxCrossEntropy", func(tp *Tape) { tp.SoftmaxCrossEntropy(NewTensor(1, 3), []int32{3}) }},
		{"attention with heads not dividing the width", "CausalSelfAttention", func(tp *Tape) { tp.CausalSelfAttention(NewTensor(2, 12), 1, 2, 3) }},
		{"reshape to a different size", "Reshape", func(tp *Tape) { tp.Reshape(NewTensor(2, 3), 4, -1) }},
		{"batch norm eval without running buffers", "BatchNorm", func(tp *Tape) { tp.BatchNorm(NewTensor(2, 3), nil, nil, nil, nil, 0.1, 1e-5, false) }},
		{"dropout with a negative probability", "Dropout", func(tp *Tape) { tp.Dropout(NewTensor(2), -0.5, newRand(1)) }},
		{"from slice with the wrong length", "FromSlice", func(*Tape) { FromSlice(make([]float32, 5), 2, 3) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, c.want) {
					t.Errorf("panic %v does not name %s", r, c.want)
				}
			}()
			c.call(NewTape(1))
		})
	}
}

func TestReusedTapeGivesTheSameGradientsAsAFreshOne(t *testing.T) {
	c := opCaseNamed(t, "small conv net: conv, batch norm, relu, pool, linear, cross-entropy") // pooled grads, columns and normalised activations
	run := func(tp *Tape) []float32 {
		leaves, fwd := c.setup(newRand(9), false)
		loss := fwd(tp)
		tp.Backward(loss)
		var g []float32
		for _, l := range leaves {
			g = append(g, l.Grad...)
		}
		if loss.Grad == nil {
			t.Fatal("the loss has no gradient before Reset")
		}
		tp.Reset()
		if loss.Grad != nil {
			t.Error("Reset left an intermediate gradient attached")
		}
		return g
	}
	shared := NewTape(2)
	first, second := run(shared), run(shared)
	fresh := run(NewTape(2))
	if !bitsEqual(first, fresh) || !bitsEqual(second, fresh) {
		t.Error("gradients from a reused tape differ from a fresh tape's")
	}
}

// opCaseNamed returns the op case of that name.
func opCaseNamed(t *testing.T, name string) opCase {
	for _, c := range opCases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no op case %q", name)
	return opCase{}
}

// TestConv2dPaddingWiderThanTheInput covers kernel columns whose every
// output column reads padding (stride 1, pad 2 on a 1-pixel-wide input).
func TestConv2dPaddingWiderThanTheInput(t *testing.T) {
	x, w := randParam(newRand(3), 2, 1, 3, 1), randParam(newRand(4), 2, 1, 5, 5)
	tp := NewTape(1)
	y := tp.Conv2d(x, w, nil, 1, 2)
	if !slices.Equal(y.Shape, []int{2, 2, 3, 1}) {
		t.Fatalf("shape %v, want [2 2 3 1]", y.Shape)
	}
	// y[n,o,oy,0] = Σ_{i} x[n,0,oy-2+i,0]·w[o,0,i,2]: only the centre column sees the input.
	for n := range 2 {
		for o := range 2 {
			for oy := range 3 {
				var want float32
				for i := range 5 {
					if iy := oy - 2 + i; iy >= 0 && iy < 3 {
						want += float32(x.Data[n*3+iy] * w.Data[o*25+i*5+2])
					}
				}
				if got := y.Data[(n*2+o)*3+oy]; got != want {
					t.Errorf("y[%d,%d,%d] = %v, want %v", n, o, oy, got, want)
				}
			}
		}
	}
	tp.Backward(tp.SoftmaxCrossEntropy(tp.Reshape(y, 6, 2), make([]int32, 6))) // col2im over the same padding
}

// TestMaxPool2x2KeepsTheFirstMaximum checks the 2×2 stride-2 kernel against
// the window loop `if v > best` on ties, signed zeros and NaNs: the value's
// bits and which input receives the gradient.
func TestMaxPool2x2KeepsTheFirstMaximum(t *testing.T) {
	nan, negZero := float32(math.NaN()), float32(math.Copysign(0, -1))
	for _, c := range []struct {
		name   string
		window [4]float32 // row-major: (0,0), (0,1), (1,0), (1,1)
	}{
		{"a tie goes to the first of the equal values", [4]float32{1, 3, 3, 2}},
		{"all equal keeps the first", [4]float32{2, 2, 2, 2}},
		{"+0 after −0 does not replace it", [4]float32{negZero, 0, -1, -2}},
		{"a NaN in front is never replaced", [4]float32{nan, 5, 6, 7}},
		{"a NaN later is never taken", [4]float32{1, nan, 0, nan}},
		{"the last element can win", [4]float32{-4, -3, -2, -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A 3×5 plane: one full window at columns 2..3 of rows 0..1, the
			// odd row and column left out as MaxPool2d drops them.
			x := NewParam(1, 1, 3, 5)
			for i := range x.Data {
				x.Data[i] = -100
			}
			x.Data[2], x.Data[3], x.Data[7], x.Data[8] = c.window[0], c.window[1], c.window[2], c.window[3]
			best, bi := c.window[0], 0
			for i, v := range c.window {
				if v > best {
					best, bi = v, i
				}
			}
			tp := NewTape(1)
			y := tp.MaxPool2d(x, 2, 2)
			if got := y.Data[1]; math.Float32bits(got) != math.Float32bits(best) {
				t.Fatalf("max bits %#x, want %#x", math.Float32bits(got), math.Float32bits(best))
			}
			y.Grad[1] = 1
			tp.ops[0]()
			for i, at := range []int{2, 3, 7, 8} {
				if want := float32(b2f(i == bi)); x.Grad[at] != want {
					t.Errorf("grad of window element %d = %v, want %v", i, x.Grad[at], want)
				}
			}
		})
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// TestTapeReusingOutputsGivesTheSameBits runs every op case three times on
// one tape with SetReuseOutputs on (outputs and internal buffers recycled
// across cases of different sizes) and compares output, state and
// gradients with a fresh tape's.
func TestTapeReusingOutputsGivesTheSameBits(t *testing.T) {
	shared := NewTape(3)
	shared.SetReuseOutputs(true)
	for round := range 3 {
		for _, c := range opCases {
			wantOut, wantState, wantGrads := runCase(c, 3, false)
			out, state, grads := runCaseOn(c, shared, false)
			shared.Reset()
			if !bitsEqual(out, wantOut) || !bitsEqual(state, wantState) || !bitsEqual(grads, wantGrads) {
				t.Errorf("round %d, %s: a tape reusing its outputs gives other bits than a fresh one", round, c.name)
			}
		}
	}
}
