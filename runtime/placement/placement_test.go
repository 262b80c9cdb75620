package placement

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

func TestCompute(t *testing.T) {
	cases := []struct {
		name    string
		ests, w int
		speeds  []float64
		want    string
	}{
		{"equal workers split evenly", 8, 4, nil, "0-1|2-3|4-5|6-7"},
		{"a remainder goes to the lowest ranks", 8, 3, nil, "0-2|3-5|6-7"},
		{"one worker holds every EST", 8, 1, nil, "0-7"},
		{"one EST per worker", 8, 8, nil, "0|1|2|3|4|5|6|7"},
		{"speeds get proportional shares", 8, 3, []float64{3, 2, 1}, "0-3|4-6|7"},
		{"a much slower worker may get nothing", 4, 2, []float64{100, 1}, "0-3|-"},
		{"ties go to the lower rank", 3, 2, []float64{1, 1}, "0-1|2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compute(c.ests, c.w, c.speeds)
			if err != nil {
				t.Fatal(err)
			}
			if p.String() != c.want {
				t.Fatalf("Compute(%d, %d, %v) = %s, want %s", c.ests, c.w, c.speeds, p, c.want)
			}
		})
	}
}

func TestComputeRejects(t *testing.T) {
	for _, c := range []struct {
		name    string
		ests, w int
		speeds  []float64
	}{
		{"zero workers", 8, 0, nil},
		{"more workers than ESTs", 2, 3, nil},
		{"a zero speed", 4, 2, []float64{1, 0}},
		{"a speed list of the wrong length", 4, 2, []float64{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Compute(c.ests, c.w, c.speeds); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

// TestComputeIsOptimal checks the greedy placement against brute force on
// small random instances: no assignment of counts has a smaller makespan.
func TestComputeIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 300; trial++ {
		w := 1 + rng.Intn(4)
		n := w + rng.Intn(8)
		speeds := make([]float64, w)
		for i := range speeds {
			speeds[i] = 0.5 + 4*rng.Float64()
		}
		p, err := Compute(n, w, speeds)
		if err != nil {
			t.Fatal(err)
		}
		got := makespan(p, speeds)
		best := bruteForce(n, speeds)
		if got > best+1e-12 {
			t.Fatalf("n=%d speeds=%v: greedy makespan %v > optimum %v (%s)", n, speeds, got, best, p)
		}
		covered := 0
		for i, r := range p {
			if r.First != covered {
				t.Fatalf("ranges not contiguous at rank %d: %s", i, p)
			}
			covered += r.Count
		}
		if covered != n {
			t.Fatalf("plan %s covers %d of %d ESTs", p, covered, n)
		}
	}
}

func makespan(p Plan, speeds []float64) float64 {
	m := 0.0
	for w, r := range p {
		if v := float64(r.Count) / speeds[w]; v > m {
			m = v
		}
	}
	return m
}

func bruteForce(n int, speeds []float64) float64 {
	best := 1e300
	var rec func(w, left int, cur float64)
	rec = func(w, left int, cur float64) {
		if w == len(speeds)-1 {
			if v := float64(left) / speeds[w]; v > cur {
				cur = v
			}
			if cur < best {
				best = cur
			}
			return
		}
		for c := 0; c <= left; c++ {
			v := float64(c) / speeds[w]
			if v < cur {
				v = cur
			}
			rec(w+1, left-c, v)
		}
	}
	rec(0, n, 0)
	return best
}

func TestOwnerAndImbalance(t *testing.T) {
	p, _ := Compute(8, 3, nil)
	for est, want := range []int{0, 0, 0, 1, 1, 1, 2, 2} {
		if got := p.Owner(est); got != want {
			t.Errorf("Owner(%d) = %d, want %d", est, got, want)
		}
	}
	if p.Owner(8) != -1 {
		t.Error("Owner(8) should be -1")
	}
	if got := p.Imbalance(nil); got < 0.124 || got > 0.126 {
		t.Errorf("Imbalance = %v, want 0.125 (3 ESTs vs 8/3)", got)
	}
}

func ExampleCompute() {
	p, _ := Compute(8, 3, []float64{3.1, 2.4, 1})
	fmt.Println(p)
	// Output: 0-3|4-6|7
}

func TestCountsGivesUnusableWorkersNothing(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name   string
		l      int
		speeds []float64
		want   []int
	}{
		{"proportional to speed", 8, []float64{3, 1}, []int{6, 2}},
		{"ties go to the lower index", 3, []float64{1, 1}, []int{2, 1}},
		{"a zero, negative, NaN or infinite speed gets none", 4, []float64{0, 1, -1, math.NaN(), inf, 1}, []int{0, 2, 0, 0, 0, 2}},
		{"fewer ESTs than workers", 1, []float64{1, 2}, []int{0, 1}},
		{"no usable worker", 5, []float64{0, inf}, []int{0, 0}},
		{"no EST", 0, []float64{1}, []int{0}},
		{"no worker", 3, nil, []int{}},
	} {
		if got := Counts(c.l, c.speeds); !slices.Equal(got, c.want) {
			t.Errorf("%s: Counts(%d, %v) = %v, want %v", c.name, c.l, c.speeds, got, c.want)
		}
	}
}
