package collective

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
)

// testJob is the auth configuration shared by the test rings.
func testJob(t testing.TB) *auth.Config {
	t.Helper()
	s, err := auth.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return &auth.Config{JobID: "job-test", Secret: s, Timeout: 5 * time.Second}
}

// logEvent is a log output that closes seen the first time a line
// containing text is written.
type logEvent struct {
	text string
	seen chan struct{}
	once sync.Once
}

func (e *logEvent) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(e.text)) {
		e.once.Do(func() { close(e.seen) })
	}
	return len(p), nil
}

// listeners opens p listeners on 127.0.0.1 and returns them with the ring
// members they serve.
func listeners(t testing.TB, p int) ([]*net.TCPListener, []Member) {
	t.Helper()
	lns := make([]*net.TCPListener, p)
	members := make([]Member, p)
	for i := range lns {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[i], members[i] = ln, Member{Rank: i, Addr: ln.Addr().String()}
	}
	return lns, members
}

// connectRing builds a ring of p ranks in this process.
func connectRing(t testing.TB, p int, opts Options) []*Ring {
	t.Helper()
	lns, members := listeners(t, p)
	rings := make([]*Ring, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range p {
		wg.Go(func() { rings[i], errs[i] = Connect(ctx, i, members, lns[i], opts) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: Connect: %v", i, err)
		}
	}
	t.Cleanup(func() {
		for _, r := range rings {
			r.Close()
		}
	})
	return rings
}

// reference is the canonical reduction (runtime/trainer/reduce.go).
func reference(grads [][]float32, scale float32) []float32 {
	out := make([]float32, len(grads[0]))
	copy(out, grads[0])
	for _, g := range grads[1:] {
		for j := range out {
			out[j] = out[j] + g[j]
		}
	}
	for j := range out {
		out[j] = out[j] * scale
	}
	return out
}

// grouped sums each rank's ESTs first and then the ranks' partial sums: the
// naive "local accumulation + all-reduce" order.
func grouped(grads [][]float32, counts []int, scale float32) []float32 {
	var parts [][]float32
	e := 0
	for _, c := range counts {
		if c > 0 {
			parts = append(parts, reference(grads[e:e+c], 1))
		}
		e += c
	}
	return reference(parts, scale)
}

// mixedGrads returns n gradients of length m whose values span 2^-20..2^20
// in magnitude with both signs, so the order of additions shows in the bits.
func mixedGrads(rng *rand.Rand, n, m int) [][]float32 {
	g := make([][]float32, n)
	for e := range g {
		g[e] = make([]float32, m)
		for j := range g[e] {
			g[e][j] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(41)-20))
		}
	}
	return g
}

// randomSplit spreads n ESTs over p ranks in contiguous ranges, some ranks
// possibly holding none.
func randomSplit(rng *rand.Rand, n, p int) []int {
	cuts := make([]int, p+1)
	cuts[p] = n
	for i := 1; i < p; i++ {
		cuts[i] = rng.IntN(n + 1)
	}
	for i := 1; i < p; i++ { // insertion sort of the inner cuts
		for j := i; j > 1 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	counts := make([]int, p)
	for i := range counts {
		counts[i] = cuts[i+1] - cuts[i]
	}
	return counts
}

// allReduce runs one AllReduce on every rank concurrently with the ESTs
// split by counts and returns each rank's output and error.
func allReduce(ctx context.Context, rings []*Ring, grads [][]float32, counts []int) ([][]float32, []error) {
	scale := float32(1) / float32(len(grads))
	outs := make([][]float32, len(rings))
	errs := make([]error, len(rings))
	var wg sync.WaitGroup
	first := 0
	for r := range rings {
		lo, hi := first, first+counts[r]
		first = hi
		outs[r] = make([]float32, len(grads[0]))
		wg.Go(func() { errs[r] = rings[r].AllReduce(ctx, outs[r], grads[lo:hi], lo, scale) })
	}
	wg.Wait()
	return outs, errs
}

func firstDiff(a, b []float32) int {
	for j := range a {
		if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
			return j
		}
	}
	return -1
}

func TestAllReduceIsBitwiseTheCanonicalReduction(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name       string
		ranks      int
		chunkBytes int
	}{
		{"one process reduces locally", 1, 0},
		{"two processes with the default chunk", 2, 0},
		{"three processes with one-element chunks", 3, 4},
		{"four processes with 7-element chunks", 4, 28},
		{"five processes with 1 KiB chunks", 5, 1024},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rings := connectRing(t, c.ranks, Options{ChunkBytes: c.chunkBytes, Timeout: 5 * time.Second, Auth: testJob(t)})
			lengths := []int{1, 7, 1000, 40_003}
			if c.chunkBytes == 4 {
				lengths = []int{1, 7, 300}
			}
			for trial, m := range lengths {
				for _, n := range []int{1, c.ranks, 2*c.ranks + 3} {
					counts := randomSplit(rng, n, c.ranks)
					if trial == 0 && c.ranks > 1 { // first and last rank empty
						counts = make([]int, c.ranks)
						counts[c.ranks/2] = n
						if c.ranks == 2 {
							counts[0], counts[1] = 0, n
						}
					}
					grads := mixedGrads(rng, n, m)
					want := reference(grads, float32(1)/float32(n))
					outs, errs := allReduce(context.Background(), rings, grads, counts)
					for r := range rings {
						if errs[r] != nil {
							t.Fatalf("len %d, split %v: rank %d: %v", m, counts, r, errs[r])
						}
						if j := firstDiff(outs[r], want); j >= 0 {
							t.Fatalf("len %d, split %v: rank %d element %d = %08x, canonical %08x",
								m, counts, r, j, math.Float32bits(outs[r][j]), math.Float32bits(want[j]))
						}
					}
				}
			}
		})
	}
}

// TestOtherOrdersWouldDiffer shows that the data of the equality test is
// sensitive to the order of additions: summing per rank first (what a
// naive local accumulation + all-reduce does) changes bits, so the equality
// above is evidence that the canonical order is kept.
func TestOtherOrdersWouldDiffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	grads := mixedGrads(rng, 8, 1000)
	want := reference(grads, 0.125)
	cases := []struct {
		name   string
		counts []int
	}{
		{"four ranks of two ESTs", []int{2, 2, 2, 2}},
		{"two ranks of four ESTs", []int{4, 4}},
		{"an uneven split", []int{3, 0, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if firstDiff(grouped(grads, c.counts, 0.125), want) < 0 {
				t.Fatal("grouped order gives the canonical bits: the test data cannot tell orders apart")
			}
			rings := connectRing(t, len(c.counts), Options{Insecure: true, ChunkBytes: 256})
			outs, errs := allReduce(context.Background(), rings, grads, c.counts)
			for r := range rings {
				if errs[r] != nil || firstDiff(outs[r], want) >= 0 {
					t.Fatalf("rank %d: err %v, differs from canonical at %d", r, errs[r], firstDiff(outs[r], want))
				}
			}
		})
	}
}

func TestAllReduceRefusesBadArguments(t *testing.T) {
	g := [][]float32{make([]float32, 4), make([]float32, 4)}
	cases := []struct {
		name  string
		ranks int
		rank  int
		out   []float32
		local [][]float32
		first int
	}{
		{"gradients of another length", 1, 0, make([]float32, 3), g, 0},
		{"a first rank that does not start at EST 0", 2, 0, make([]float32, 4), g, 1},
		{"a single process without ESTs", 1, 0, make([]float32, 4), nil, 0},
		{"a negative firstEST", 2, 1, make([]float32, 4), g, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rings := connectRing(t, c.ranks, Options{Insecure: true})
			if err := rings[c.rank].AllReduce(context.Background(), c.out, c.local, c.first, 0.5); err == nil {
				t.Fatal("AllReduce accepted bad arguments")
			}
			if err := rings[c.rank].AllReduce(context.Background(), make([]float32, 4), g, 0, 0.5); err == nil {
				t.Fatal("a ring broken by an error accepted another AllReduce")
			}
		})
	}
}

// TestInconsistentCallsFailEveryRank: ranks that disagree on the split
// get errors, not a hang and not a wrong result.
func TestInconsistentCallsFailEveryRank(t *testing.T) {
	rings := connectRing(t, 3, Options{Insecure: true, Timeout: 500 * time.Millisecond})
	g := mixedGrads(rand.New(rand.NewPCG(3, 4)), 3, 100)
	outs := make([]float32, 3*100)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	firsts := []int{0, 2, 2} // rank 0 holds one EST, but rank 1 believes two came before it
	for r := range rings {
		wg.Go(func() {
			errs[r] = rings[r].AllReduce(context.Background(), outs[100*r:100*(r+1)], g[r:r+1], firsts[r], 1.0/3)
		})
	}
	wg.Wait()
	protocol := false
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d succeeded with an inconsistent split", r)
		}
		protocol = protocol || errors.Is(err, ErrProtocol)
	}
	if !protocol {
		t.Fatalf("no rank reported ErrProtocol: %v", errs)
	}
}

func TestAllReduceAfterCloseIsErrClosed(t *testing.T) {
	rings := connectRing(t, 2, Options{Insecure: true})
	rings[0].Close()
	err := rings[0].AllReduce(context.Background(), make([]float32, 1), [][]float32{{1}}, 0, 1)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

func TestAllReduceStopsWhenTheContextEnds(t *testing.T) {
	rings := connectRing(t, 2, Options{Insecure: true, Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// Rank 1 never joins: only the context can end rank 0's wait.
	err := rings[0].AllReduce(ctx, make([]float32, 8), [][]float32{make([]float32, 8)}, 0, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
}

// TestAContextEndingAsTheAllReduceEndsIsOneOutcome cancels the context of
// every rank while the all-reduce is finishing, many times (under go test
// -race this found the context's AfterFunc writing the op's error while
// run read it): each rank returns either nil with the canonical reduction
// or an error wrapping context.Canceled, never anything else.
func TestAContextEndingAsTheAllReduceEndsIsOneOutcome(t *testing.T) {
	grads := mixedGrads(rand.New(rand.NewPCG(7, 8)), 2, 1<<10)
	want := reference(grads, 0.5)
	for i := range 40 {
		rings := connectRing(t, 2, Options{Insecure: true, Timeout: 10 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(time.Duration(i%8) * 50 * time.Microsecond)
			cancel()
		}()
		outs, errs := allReduce(ctx, rings, grads, []int{1, 1})
		cancel()
		for r, err := range errs {
			switch {
			case err == nil:
				if d := firstDiff(outs[r], want); d >= 0 {
					t.Fatalf("try %d, rank %d: nil error but element %d is %v, want %v", i, r, d, outs[r][d], want[d])
				}
			case !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed):
				var le *LinkError
				if !errors.As(err, &le) { // the neighbour's cancellation broke the link
					t.Fatalf("try %d, rank %d: %v, want nil, the context's cancellation or a broken link", i, r, err)
				}
			}
		}
		for _, ring := range rings {
			ring.Close()
		}
	}
}

// TestAClosedPeerFailsEverySurvivor closes one rank in the middle of a
// stream of all-reduces (as a crash closes its sockets); every other rank
// must return an error well within the timeout.
func TestAClosedPeerFailsEverySurvivor(t *testing.T) {
	const p, victim, timeout = 4, 2, 3 * time.Second
	rings := connectRing(t, p, Options{Insecure: true, ChunkBytes: 16 << 10, Timeout: timeout})
	grads := mixedGrads(rand.New(rand.NewPCG(5, 6)), p, 1<<18)
	var killedAt time.Time
	var mu sync.Mutex
	errAt := make([]time.Duration, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range rings {
		wg.Go(func() {
			out := make([]float32, len(grads[0]))
			for i := 0; ; i++ {
				if r == victim && i == 3 {
					go func() { // crash in the middle of the fourth all-reduce
						time.Sleep(time.Millisecond)
						mu.Lock()
						killedAt = time.Now()
						mu.Unlock()
						rings[victim].Close()
					}()
				}
				if err := rings[r].AllReduce(context.Background(), out, grads[r:r+1], r, 0.25); err != nil {
					mu.Lock()
					errAt[r], errs[r] = time.Since(killedAt), err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	for r := range rings {
		if r == victim {
			continue
		}
		var le *LinkError
		if !errors.As(errs[r], &le) && !errors.Is(errs[r], ErrClosed) {
			t.Errorf("rank %d: err = %v, want a *LinkError", r, errs[r])
		}
		if errAt[r] > timeout {
			t.Errorf("rank %d noticed the crash after %v (timeout %v)", r, errAt[r], timeout)
		}
	}
}

// TestAStalledPeerTimesOut: a rank that stops taking part (a frozen
// process) makes the others fail after about Options.Timeout.
func TestAStalledPeerTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	rings := connectRing(t, 3, Options{Insecure: true, Timeout: timeout})
	g := mixedGrads(rand.New(rand.NewPCG(7, 8)), 3, 1000)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	start := time.Now()
	for _, r := range []int{0, 2} { // rank 1 is frozen
		wg.Go(func() { errs[r] = rings[r].AllReduce(context.Background(), make([]float32, 1000), g[r:r+1], r, 1.0/3) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	timedOut := false
	for _, r := range []int{0, 2} {
		var le *LinkError
		if !errors.As(errs[r], &le) {
			t.Fatalf("rank %d: err = %v, want a *LinkError", r, errs[r])
		}
		timedOut = timedOut || le.Timeout()
	}
	if !timedOut {
		t.Fatalf("no rank reported a timeout: %v", errs)
	}
	if elapsed > timeout+2*time.Second {
		t.Fatalf("survivors returned after %v, timeout %v", elapsed, timeout)
	}
}

func TestConnect(t *testing.T) {
	job := testJob(t)
	cases := []struct {
		name     string
		intruder func(t *testing.T, addr string) // dials rank 1 before rank 0 does
		opts     func(rank int) Options
		wantErr  error // from rank 0's Connect; nil: the ring forms
	}{
		{
			name: "a client with another secret is refused and the ring still forms",
			intruder: func(t *testing.T, addr string) {
				other := testJob(t)
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := auth.Client(context.Background(), c, *other, Role); !errors.Is(err, auth.ErrWrongToken) {
					t.Errorf("intruder: err = %v, want wrong token", err)
				}
			},
			opts: func(int) Options { return Options{Auth: job} },
		},
		{
			name: "a port scanner is refused and the ring still forms",
			intruder: func(t *testing.T, addr string) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				c.Close()
			},
			opts: func(int) Options { return Options{Auth: job} },
		},
		{
			name: "ranks of different epochs refuse each other",
			opts: func(rank int) Options {
				return Options{Auth: job, Epoch: uint64(rank), ConnectTimeout: 2 * time.Second}
			},
			wantErr: ErrRefused,
		},
		{
			name: "ranks with different chunk sizes refuse each other",
			opts: func(rank int) Options {
				return Options{Auth: job, ChunkBytes: 1024 * (rank + 1), ConnectTimeout: 2 * time.Second}
			},
			wantErr: ErrRefused,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lns, members := listeners(t, 2)
			refused := &logEvent{text: "refused ring connection", seen: make(chan struct{})}
			if c.intruder != nil {
				done := make(chan struct{})
				go func() { defer close(done); c.intruder(t, members[1].Addr) }()
				// Rank 1 admits the intruder while it waits for rank 0.
				defer func() { <-done }()
			}
			var wg sync.WaitGroup
			rings := make([]*Ring, 2)
			errs := make([]error, 2)
			for r := range 2 {
				wg.Go(func() {
					o := c.opts(r)
					if c.intruder != nil && r == 1 {
						o.Logger = hclog.New(&hclog.LoggerOptions{Output: refused})
					}
					if c.intruder != nil && r == 0 { // dial only once rank 1 has refused the intruder
						select {
						case <-refused.seen:
						case <-time.After(10 * time.Second):
							t.Error("rank 1 did not refuse the intruder within 10 s")
						}
					}
					rings[r], errs[r] = Connect(context.Background(), r, members, lns[r], o)
				})
			}
			wg.Wait()
			for _, r := range rings {
				if r != nil {
					defer r.Close()
				}
			}
			if c.wantErr != nil {
				if !errors.Is(errs[0], c.wantErr) && !errors.Is(errs[1], c.wantErr) {
					t.Fatalf("errs = %v, want %v", errs, c.wantErr)
				}
				return
			}
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("Connect: %v", errs)
			}
			outs, aerrs := allReduce(context.Background(), rings, [][]float32{{1, 2}, {3, 4}}, []int{1, 1})
			if aerrs[0] != nil || aerrs[1] != nil || outs[0][1] != 3 || outs[1][0] != 2 {
				t.Fatalf("all-reduce over the formed ring: %v %v", outs, aerrs)
			}
		})
	}
}

func TestConnectRefusesBadMembersAndOptions(t *testing.T) {
	cases := []struct {
		name    string
		rank    int
		members []Member
		opts    Options
	}{
		{"no members", 0, nil, Options{Insecure: true}},
		{"a rank outside the ring", 2, []Member{{0, "a:1"}, {1, "b:1"}}, Options{Insecure: true}},
		{"members out of rank order", 0, []Member{{1, "a:1"}, {0, "b:1"}}, Options{Insecure: true}},
		{"no authentication without Insecure", 0, []Member{{0, "a:1"}}, Options{}},
		{"a chunk that is not whole floats", 0, []Member{{0, "a:1"}}, Options{Insecure: true, ChunkBytes: 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Connect(context.Background(), c.rank, c.members, nil, c.opts); err == nil {
				t.Fatal("Connect accepted it")
			}
		})
	}
}

func BenchmarkAllReduce(b *testing.B) {
	for _, p := range []int{2, 4} {
		b.Run(fmt.Sprintf("P=%d/25MB", p), func(b *testing.B) {
			const m = 25_000_000 / 4
			rings := connectRing(b, p, Options{Insecure: true})
			grads := make([][]float32, p)
			for i := range grads {
				grads[i] = make([]float32, m)
			}
			counts := make([]int, p)
			for i := range counts {
				counts[i] = 1
			}
			b.SetBytes(4 * m)
			b.ResetTimer()
			for b.Loop() {
				if _, errs := allReduce(context.Background(), rings, grads, counts); errors.Join(errs...) != nil {
					b.Fatal(errors.Join(errs...))
				}
			}
		})
	}
}

// BenchmarkAllReduceSmall is the MNIST example's step on 2 processes: 8
// ESTs' gradients of 37,514 floats (150 kB) over P = 2, 4 ESTs each, with
// the chunk size that decides how far the chain is pipelined.
func BenchmarkAllReduceSmall(b *testing.B) {
	for _, chunk := range []int{8 << 10, 32 << 10, 64 << 10, DefaultChunkBytes} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			const m, p = 37514, 2
			rings := connectRing(b, p, Options{Insecure: true, ChunkBytes: chunk})
			grads := make([][]float32, 8)
			for i := range grads {
				grads[i] = make([]float32, m)
				for j := range grads[i] {
					grads[i][j] = float32(j%97) * 0.01
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, errs := allReduce(context.Background(), rings, grads, []int{4, 4}); errors.Join(errs...) != nil {
					b.Fatal(errors.Join(errs...))
				}
			}
		})
	}
}

// TestContributedComesOnceOnEveryRankButTheLastAndLocalIsThenFree checks
// AllReduceNotify: every rank but the last is told once, and from then on
// its gradients may be overwritten (here with NaN) without changing the
// result; the last rank is never told.
func TestContributedComesOnceOnEveryRankButTheLastAndLocalIsThenFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		name       string
		counts     []int
		chunkBytes int
	}{
		{"two ranks, one chunk", []int{4, 4}, 0},
		{"two ranks, many chunks", []int{4, 4}, 64},
		{"one EST on rank 0 (sent without a copy)", []int{1, 3}, 64},
		{"three ranks, the first holding none", []int{0, 3, 2}, 64},
		{"four ranks, the middle ones holding none", []int{2, 0, 0, 3}, 128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := len(c.counts)
			rings := connectRing(t, p, Options{ChunkBytes: c.chunkBytes, Timeout: 5 * time.Second, Auth: testJob(t)})
			n := 0
			for _, k := range c.counts {
				n += k
			}
			grads := mixedGrads(rng, n, 1003)
			scale := float32(1) / float32(n)
			want := reference(grads, scale)
			outs := make([][]float32, p)
			errs := make([]error, p)
			told := make([]atomic.Int32, p)
			var wg sync.WaitGroup
			first := 0
			for r := range rings {
				lo, hi := first, first+c.counts[r]
				first = hi
				outs[r] = make([]float32, 1003)
				local := make([][]float32, hi-lo)
				for i := range local {
					local[i] = append([]float32(nil), grads[lo+i]...)
				}
				wg.Go(func() {
					errs[r] = rings[r].AllReduceNotify(context.Background(), outs[r], local, lo, scale, func() {
						told[r].Add(1)
						for _, g := range local {
							for j := range g {
								g[j] = float32(math.NaN())
							}
						}
					})
				})
			}
			wg.Wait()
			for r := range rings {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if j := firstDiff(outs[r], want); j >= 0 {
					t.Fatalf("rank %d element %d = %v, canonical %v", r, j, outs[r][j], want[j])
				}
				wantTold := int32(1)
				if r == p-1 {
					wantTold = 0
				}
				if got := told[r].Load(); got != wantTold {
					t.Errorf("rank %d was told %d times that its part is sent, want %d", r, got, wantTold)
				}
			}
		})
	}
}
