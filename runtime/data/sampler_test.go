package data

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

func mustSampler(t testing.TB, n, w int, seed uint64) *Sampler {
	t.Helper()
	s, err := NewSampler(n, w, seed)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestShardsCoverEveryIndexOncePerEpochWhenWorldDividesN(t *testing.T) {
	for _, tc := range []struct {
		name string
		n, w int
	}{
		{"sixty samples over eight logical workers", 64, 8},
		{"MNIST-sized data over eight logical workers", 60000, 8},
		{"one logical worker gets everything", 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSampler(t, tc.n, tc.w, 7)
			for epoch := range 2 {
				count := make([]int, tc.n)
				for r := range tc.w {
					for _, i := range s.Shard(epoch, r) {
						count[i]++
					}
				}
				for i, c := range count {
					if c != 1 {
						t.Fatalf("epoch %d: index %d appears %d times", epoch, i, c)
					}
				}
			}
		})
	}
}

func TestPaddingRepeatsThePermutationFromItsStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		n, w int
	}{
		{"ten samples over four logical workers pad two", 10, 4},
		{"three samples over eight logical workers repeat the permutation", 3, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSampler(t, tc.n, tc.w, 1)
			perm := Permutation(tc.n, 1, 0)
			total := s.ShardLen() * tc.w
			if s.ShardLen() != (tc.n+tc.w-1)/tc.w {
				t.Fatalf("ShardLen = %d", s.ShardLen())
			}
			count := make([]int, tc.n)
			for r := range tc.w {
				for p, i := range s.Shard(0, r) {
					q := r + p*tc.w
					if want := int(perm[q%tc.n]); i != want {
						t.Fatalf("rank %d position %d = %d, want padded[%d] = %d", r, p, i, q, want)
					}
					count[i]++
				}
			}
			sum := 0
			for i, c := range count {
				if c < 1 {
					t.Fatalf("index %d never sampled", i)
				}
				sum += c
			}
			if sum != total {
				t.Fatalf("%d entries over all shards, want %d", sum, total)
			}
		})
	}
}

func TestEpochsHaveDifferentOrders(t *testing.T) {
	s := mustSampler(t, 1000, 4, 3)
	var c Cursor
	steps := s.StepsPerEpoch(25)
	var epochs [3][]int
	for e := range epochs {
		for range steps {
			if c.Epoch != e {
				t.Fatalf("cursor in epoch %d during epoch %d", c.Epoch, e)
			}
			epochs[e] = append(epochs[e], s.Next(&c, 2, 25)...)
		}
	}
	if c != (Cursor{Epoch: 3}) {
		t.Fatalf("cursor %+v after three epochs, want {3 0}", c)
	}
	if slices.Equal(epochs[0], epochs[1]) || slices.Equal(epochs[1], epochs[2]) {
		t.Fatal("the same order repeats across epochs")
	}
	// Each epoch still draws the same multiset (rank 2's shard is a fixed-size
	// sample of a fresh permutation), and different seeds differ.
	other := mustSampler(t, 1000, 4, 4)
	if slices.Equal(other.Shard(0, 2), s.Shard(0, 2)) {
		t.Fatal("seeds 3 and 4 give the same shard")
	}
}

func TestNextDropsTheShardRemainderAndAdvancesTheEpoch(t *testing.T) {
	s := mustSampler(t, 10, 4, 5) // shard length 3
	var c Cursor
	b1 := s.Next(&c, 1, 2)
	if want := s.Shard(0, 1)[:2]; !slices.Equal(b1, want) {
		t.Fatalf("first batch %v, want %v", b1, want)
	}
	if c != (Cursor{Epoch: 1, Pos: 0}) {
		t.Fatalf("cursor %+v after the only full batch of epoch 0, want {1 0}", c)
	}
	b2 := s.Next(&c, 1, 2)
	if want := s.Shard(1, 1)[:2]; !slices.Equal(b2, want) {
		t.Fatalf("second batch %v, want epoch 1's %v", b2, want)
	}
	if s.StepsPerEpoch(2) != 1 || s.StepsPerEpoch(3) != 1 || s.StepsPerEpoch(1) != 3 || s.StepsPerEpoch(0) != 0 {
		t.Fatal("StepsPerEpoch disagrees with floor(ShardLen/b)")
	}
	t.Run("a cursor saved mid-shard with a larger remainder resumes in place", func(t *testing.T) {
		c := Cursor{Epoch: 0, Pos: 1}
		got := s.Next(&c, 3, 2)
		if want := s.Shard(0, 3)[1:3]; !slices.Equal(got, want) {
			t.Fatalf("batch %v, want %v", got, want)
		}
	})
}

func TestRestoredCursorContinuesIdentically(t *testing.T) {
	s := mustSampler(t, 60000, 8, 11)
	var c Cursor
	for range 1000 { // crosses the 234-step epoch boundary several times
		s.Next(&c, 5, 32)
	}
	saved := c // what the EST context stores
	var want [][]int
	for range 300 {
		want = append(want, s.Next(&c, 5, 32))
	}
	fresh := mustSampler(t, 60000, 8, 11) // as after a restart: empty cache
	restored := Cursor{Epoch: saved.Epoch, Pos: saved.Pos}
	for i := range want {
		if got := fresh.Next(&restored, 5, 32); !slices.Equal(got, want[i]) {
			t.Fatalf("batch %d after restore = %v, want %v", i, got[:4], want[i][:4])
		}
	}
	if restored != c {
		t.Fatalf("restored cursor ended at %+v, original at %+v", restored, c)
	}
}

func TestSamplerIsSafeForConcurrentLogicalWorkers(t *testing.T) {
	s := mustSampler(t, 6000, 8, 2)
	ref := mustSampler(t, 6000, 8, 2)
	var want [8][]int
	for r := range 8 {
		var c Cursor
		for range 100 {
			want[r] = ref.NextInto(want[r], &c, r, 16)
		}
	}
	var got [8][]int
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Go(func() {
			var c Cursor
			for range 100 {
				got[r] = s.NextInto(got[r], &c, r, 16)
			}
		})
	}
	wg.Wait()
	for r := range 8 {
		if !slices.Equal(got[r], want[r]) {
			t.Fatalf("rank %d drew differently when run concurrently", r)
		}
	}
}

func TestSamplerRejectsBadArguments(t *testing.T) {
	if _, err := NewSampler(0, 4, 1); err == nil {
		t.Error("empty data set accepted")
	}
	if _, err := NewSampler(10, 0, 1); err == nil {
		t.Error("zero logical workers accepted")
	}
	s := mustSampler(t, 10, 4, 1)
	cases := []struct {
		name string
		c    Cursor
		rank int
		b    int
	}{
		{"a rank equal to the world size", Cursor{}, 4, 1},
		{"a negative rank", Cursor{}, -1, 1},
		{"a zero micro-batch", Cursor{}, 0, 0},
		{"a micro-batch longer than the shard", Cursor{}, 0, 4},
		{"a negative epoch", Cursor{Epoch: -1}, 0, 1},
		{"a position past the shard", Cursor{Pos: 4}, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Check(tc.c, tc.rank, tc.b); err == nil {
				t.Fatal("Check accepted it")
			}
			defer func() {
				if recover() == nil {
					t.Fatal("Next did not panic")
				}
			}()
			c := tc.c
			s.Next(&c, tc.rank, tc.b)
		})
	}
}

func TestEvalShardsCountEverySampleOnce(t *testing.T) {
	for _, tc := range []struct{ n, w int }{{10, 4}, {10000, 8}, {3, 8}, {0, 2}, {7, 7}} {
		t.Run(fmt.Sprintf("%d samples over %d logical workers", tc.n, tc.w), func(t *testing.T) {
			shards := EvalShards(tc.n, tc.w)
			if len(shards) != tc.w {
				t.Fatalf("%d shards", len(shards))
			}
			next, total := 0, 0
			for r, sh := range shards {
				if sh.Start != next || sh.Len() < 0 {
					t.Fatalf("shard %d = %+v, want to start at %d", r, sh, next)
				}
				if d := sh.Len() - tc.n/tc.w; d < 0 || d > 1 {
					t.Fatalf("shard %d has %d samples, want %d or %d", r, sh.Len(), tc.n/tc.w, tc.n/tc.w+1)
				}
				next = sh.End
				total += sh.Len()
			}
			if next != tc.n || total != tc.n {
				t.Fatalf("shards cover %d samples ending at %d, want %d", total, next, tc.n)
			}
		})
	}
	if EvalShards(5, 0) != nil || EvalShards(-1, 2) != nil {
		t.Fatal("invalid arguments gave shards")
	}
}

func TestPermutationIsAPermutationKeyedBySeedAndEpoch(t *testing.T) {
	p := Permutation(1000, 9, 4)
	seen := make([]bool, 1000)
	for _, v := range p {
		if seen[v] {
			t.Fatalf("index %d twice", v)
		}
		seen[v] = true
	}
	if slices.Equal(p, Permutation(1000, 9, 5)) || slices.Equal(p, Permutation(1000, 10, 4)) {
		t.Fatal("another epoch or seed gave the same permutation")
	}
	if !slices.Equal(p, Permutation(1000, 9, 4)) {
		t.Fatal("the same key gave another permutation")
	}
	// Golden value, recorded from this implementation: the shuffle is part
	// of the reproducibility contract, so a change here changes every model.
	want := []int32{8, 1, 2, 11, 0, 6, 3, 7, 4, 9, 10, 5}
	if got := Permutation(12, 9, 4); !slices.Equal(got, want) {
		t.Fatalf("Permutation(12, 9, 4) = %v, want %v (the shuffle changed)", got, want)
	}
}

func BenchmarkSamplerNext(b *testing.B) {
	s := mustSampler(b, 60000, 8, 1)
	var c Cursor
	buf := make([]int, 0, 32)
	b.ReportAllocs()
	for b.Loop() {
		buf = s.NextInto(buf[:0], &c, 3, 32)
	}
}

func BenchmarkPermutation60k(b *testing.B) {
	for b.Loop() {
		Permutation(60000, 1, 0)
	}
}
