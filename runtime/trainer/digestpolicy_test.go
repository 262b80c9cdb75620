package trainer

import "testing"

func TestDigestIntervalIsTheSmallestKeepingHashingAtOnePercent(t *testing.T) {
	for _, c := range []struct {
		name       string
		hash, step float64
		want       int
	}{
		{"hashing at 0.5 % of a step is every step", 0.0005, 0.1, 1},
		{"hashing at exactly 1 % is every step", 0.001, 0.1, 1},
		{"hashing at 1.5 % is every other step", 0.0015, 0.1, 2},
		{"hashing as long as the step is every 100 steps", 0.1, 0.1, 100},
		{"ResNet-18 on the CPU (32 ms of a 5 s step) is every step", 0.032, 5, 1},
		{"no measurement is every step", 0, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := chooseDigestEvery(c.hash, c.step); got != c.want {
				t.Fatalf("chooseDigestEvery(%v, %v) = %d, want %d", c.hash, c.step, got, c.want)
			}
		})
	}
}

func TestDigestPolicyHashesEveryStepUntilMeasuredThenMultiplesOfK(t *testing.T) {
	p := newDigestPolicy(0)
	for s := int64(1); s <= digestSamples; s++ {
		if !p.Hashed(s) {
			t.Fatalf("step %d is not hashed while the interval is measured", s)
		}
		p.Observe(0.02, 0.12) // 20 ms of hashing in a 100 ms step: 20 % -> K = 20
	}
	if p.Every() != 20 {
		t.Fatalf("K = %d after measuring 20 %%, want 20", p.Every())
	}
	if h, ratio, ok := p.Cost(); !ok || h != 0.02 || ratio < 0.1999 || ratio > 0.2001 {
		t.Fatalf("Cost() = %v, %v, %v; want 0.02 s and 0.2", h, ratio, ok)
	}
	for s, want := range map[int64]bool{4: false, 19: false, 20: true, 21: false, 40: true} {
		if p.Hashed(s) != want {
			t.Errorf("Hashed(%d) = %v, want %v", s, !want, want)
		}
	}
	fixed := newDigestPolicy(7)
	fixed.Observe(1, 1.01) // a fixed interval is not re-chosen
	fixed.Observe(1, 1.01)
	fixed.Observe(1, 1.01)
	if fixed.Every() != 7 || fixed.Hashed(1) || !fixed.Hashed(14) {
		t.Fatalf("fixed interval 7: K = %d, Hashed(1) = %v, Hashed(14) = %v", fixed.Every(), fixed.Hashed(1), fixed.Hashed(14))
	}
}
