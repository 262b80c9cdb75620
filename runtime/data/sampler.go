package data

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/easyscale/easyscale-slurm/runtime/rng"
)

// Sampler splits a data set of N samples among W logical workers (ESTs) with
// the semantics of PyTorch's DistributedSampler
// (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
// with shuffle=True and drop_last=False, followed per logical worker by a
// DataLoader with drop_last=True:
//
//   - Each epoch e has its own permutation of 0..N-1 (see Permutation), keyed
//     by (seed, e) only: not by the number of physical workers.
//   - The permutation is padded to ShardLen()·W entries by repeating it from
//     the start (padded[q] = perm[q mod N]).
//   - The shard of rank r is padded positions r, r+W, r+2W, ... (ShardLen()
//     entries; every shard has the same length).
//   - A logical worker consumes its shard in micro-batches of b in order;
//     when fewer than b entries remain they are dropped and its cursor moves
//     to the start of the next epoch. StepsPerEpoch(b) = ShardLen() / b.
//
// The permutations of the two most recent epochs are cached, so Next costs
// O(b) after the first call of an epoch; a Sampler is safe for concurrent
// use by many goroutines.
type Sampler struct {
	n, world int
	seed     uint64
	shardLen int

	mu    sync.Mutex // serialises computing a missing permutation
	cache [2]atomic.Pointer[epochPerm]
}

type epochPerm struct {
	epoch int
	perm  []int32
}

// maxSamples bounds N so indices fit the cached int32 permutation.
const maxSamples = 1<<31 - 1

// NewSampler returns the sampler of n samples over world logical workers for
// the job seed. It fails unless 1 <= n < 2^31 and world >= 1; world > n is
// allowed (shards then repeat samples, as in PyTorch).
func NewSampler(n, world int, seed uint64) (*Sampler, error) {
	if n < 1 || n > maxSamples {
		return nil, fmt.Errorf("creating sampler: data set size %d, want 1 to %d", n, maxSamples)
	}
	if world < 1 {
		return nil, fmt.Errorf("creating sampler: %d logical workers, want at least 1", world)
	}
	return &Sampler{n: n, world: world, seed: seed, shardLen: (n + world - 1) / world}, nil
}

// Len returns the data set size N.
func (s *Sampler) Len() int { return s.n }

// World returns the number of logical workers W.
func (s *Sampler) World() int { return s.world }

// ShardLen returns the number of entries in every shard: ceil(N/W).
func (s *Sampler) ShardLen() int { return s.shardLen }

// StepsPerEpoch returns how many micro-batches of size microBatch each
// logical worker takes per epoch: floor(ShardLen()/microBatch), 0 when
// microBatch < 1.
func (s *Sampler) StepsPerEpoch(microBatch int) int {
	if microBatch < 1 {
		return 0
	}
	return s.shardLen / microBatch
}

// Cursor is a logical worker's position in its shard: the epoch and the
// number of shard entries already taken in it. It is part of the EST context
// saved at every consistent step; the zero Cursor is the start of training.
// A Cursor belongs to one logical worker: unlike the Sampler, it must not be
// advanced from two goroutines at once.
type Cursor struct {
	Epoch int
	Pos   int
}

// Check reports whether a cursor restored from outside (a state database),
// a rank and a micro-batch size are valid for this sampler; Next panics on
// exactly the values Check rejects.
func (s *Sampler) Check(c Cursor, rank, microBatch int) error {
	switch {
	case rank < 0 || rank >= s.world:
		return fmt.Errorf("sampler: rank %d outside 0..%d", rank, s.world-1)
	case microBatch < 1 || microBatch > s.shardLen:
		return fmt.Errorf("sampler: micro-batch %d outside 1..%d (the shard length of %d samples over %d logical workers)", microBatch, s.shardLen, s.n, s.world)
	case c.Epoch < 0 || uint64(c.Epoch) > rng.MaxStep:
		return fmt.Errorf("sampler: cursor epoch %d outside 0..%d", c.Epoch, uint64(rng.MaxStep))
	case c.Pos < 0 || c.Pos > s.shardLen:
		return fmt.Errorf("sampler: cursor position %d outside 0..%d", c.Pos, s.shardLen)
	}
	return nil
}

// Next returns the data set indices of the next micro-batch of logical
// worker rank and advances c. See NextInto.
func (s *Sampler) Next(c *Cursor, rank, microBatch int) []int {
	return s.NextInto(make([]int, 0, microBatch), c, rank, microBatch)
}

// NextInto appends the microBatch indices of the next micro-batch of logical
// worker rank to dst and advances c: if fewer than microBatch entries of the
// shard remain at c, c first moves to the start of the next epoch. After the
// batch is taken, c is moved to the next epoch at once if its shard cannot
// give another full micro-batch, so c.Epoch always names the epoch of the
// next batch. It panics on arguments Check rejects (a programming error; the
// runtime validates restored cursors with Check).
func (s *Sampler) NextInto(dst []int, c *Cursor, rank, microBatch int) []int {
	if err := s.Check(*c, rank, microBatch); err != nil {
		panic(err.Error())
	}
	if s.shardLen-c.Pos < microBatch {
		c.Epoch, c.Pos = c.Epoch+1, 0
	}
	perm := s.permutation(c.Epoch)
	q := rank + c.Pos*s.world
	for range microBatch {
		dst = append(dst, int(perm[q%s.n]))
		q += s.world
	}
	c.Pos += microBatch
	if s.shardLen-c.Pos < microBatch {
		c.Epoch, c.Pos = c.Epoch+1, 0
	}
	return dst
}

// Shard returns every padded entry of rank's shard in epoch (ShardLen()
// indices), mainly for tests and inspection.
func (s *Sampler) Shard(epoch, rank int) []int {
	perm := s.permutation(epoch)
	out := make([]int, s.shardLen)
	for p := range out {
		out[p] = int(perm[(rank+p*s.world)%s.n])
	}
	return out
}

// permutation returns epoch's cached permutation, computing it on a miss.
func (s *Sampler) permutation(epoch int) []int32 {
	for i := range s.cache {
		if p := s.cache[i].Load(); p != nil && p.epoch == epoch {
			return p.perm
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var slots [2]*epochPerm
	for i := range s.cache {
		slots[i] = s.cache[i].Load()
		if slots[i] != nil && slots[i].epoch == epoch {
			return slots[i].perm
		}
	}
	// Fill an empty slot, else evict the older epoch.
	victim := 0
	if slots[0] != nil && (slots[1] == nil || slots[1].epoch < slots[0].epoch) {
		victim = 1
	}
	p := &epochPerm{epoch: epoch, perm: Permutation(s.n, s.seed, epoch)}
	s.cache[victim].Store(p)
	return p.perm
}

// Permutation returns the permutation of 0..n-1 used in epoch: Fisher–Yates
// (Knuth, TAOCP vol. 2, Algorithm 3.4.2P) from the identity, for i = n-1 down
// to 1 swapping entry i with entry j = Intn(i+1), drawn from the rng stream
// {Seed: seed, Worker: 0, Step: epoch, Purpose: rng.Shuffle, Sub: 0}. The
// shuffle stream belongs to no logical worker, so Worker 0 with the Shuffle
// purpose is reserved for it. n must be in 0..2^31-1 and epoch in
// 0..rng.MaxStep; other values give an empty permutation.
func Permutation(n int, seed uint64, epoch int) []int32 {
	if n < 0 || n > maxSamples || epoch < 0 || uint64(epoch) > rng.MaxStep {
		return nil
	}
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	st := rng.NewStream(rng.StreamKey{Seed: seed, Worker: 0, Step: uint64(epoch), Purpose: rng.Shuffle})
	for i := n - 1; i > 0; i-- {
		j := st.Intn(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// Range is the half-open index range [Start, End).
type Range struct {
	Start, End int
}

// Len returns End - Start.
func (r Range) Len() int { return r.End - r.Start }

// EvalShards splits n evaluation samples among w logical workers into
// contiguous ranges without padding, so every sample is evaluated exactly
// once (unlike DistributedSampler, whose padding would count some twice):
// rank r gets [r·n/w, (r+1)·n/w), so sizes differ by at most one and a rank
// may get none when w > n. It returns nil when n < 0 or w < 1.
func EvalShards(n, w int) []Range {
	if n < 0 || w < 1 {
		return nil
	}
	out := make([]Range, w)
	for r := range out {
		out[r] = Range{Start: int(int64(r) * int64(n) / int64(w)), End: int(int64(r+1) * int64(n) / int64(w))}
	}
	return out
}
