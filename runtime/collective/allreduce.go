package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/easyscale/easyscale-slurm/runtime/vecf32"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// prefixSize is the chunk header inside every reduce and broadcast frame:
//
//	seq    uint64  all-reduce sequence number on this ring (from 0)
//	chunk  uint32  chunk index
//	n      uint32  elements of the whole vector
//	ests   uint32  reduce: ESTs summed into the partial (= receiver's firstEST);
//	               broadcast: N, all ESTs
//	scale  uint32  broadcast: float32 bits of the scale applied; reduce: 0
const prefixSize = 24

type chunkHeader struct {
	seq            uint64
	chunk, n, ests uint32
	scaleBits      uint32
}

func (h chunkHeader) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], h.seq)
	binary.LittleEndian.PutUint32(b[8:], h.chunk)
	binary.LittleEndian.PutUint32(b[12:], h.n)
	binary.LittleEndian.PutUint32(b[16:], h.ests)
	binary.LittleEndian.PutUint32(b[20:], h.scaleBits)
}

func parseChunkHeader(b []byte) chunkHeader {
	return chunkHeader{
		seq:       binary.LittleEndian.Uint64(b[0:]),
		chunk:     binary.LittleEndian.Uint32(b[8:]),
		n:         binary.LittleEndian.Uint32(b[12:]),
		ests:      binary.LittleEndian.Uint32(b[16:]),
		scaleBits: binary.LittleEndian.Uint32(b[20:]),
	}
}

// AllReduce computes, on every rank of the ring, the mean gradient of the
// job's N logical workers (ESTs) in the one canonical order:
//
//	s = g_0[j]; s = s + g_1[j]; ...; s = s + g_{N-1}[j]   (float32 adds, increasing EST order)
//	out[j] = s * scale
//
// bit for bit what runtime/trainer's canonicalReduce computes, for any
// number of ranks, any split of the ESTs over them and any chunk size.
//
// local holds this rank's ESTs' gradients in EST order: local[i] is EST
// firstEST+i's, each of len(out). Ranks hold contiguous EST ranges in rank
// order: rank 0 holds ESTs 0..len(local)-1 (firstEST = 0), rank r+1's
// firstEST is rank r's firstEST+len(local); a rank may hold none. All ranks
// pass the same len(out) and scale (float32(1)/float32(N) for the mean).
// out must not overlap any local slice. Calls must be made by all ranks in
// the same sequence.
//
// Algorithm (pipelined chain along the ring; see the package doc): chunk by
// chunk, the partial sum flows 0 → 1 → … → P-1, each rank adding its ESTs
// in order (the rank holding EST 0 starts from g_0); rank P-1 applies the
// scale; the result flows P-1 → 0 → … → P-2. Each rank receives, adds and
// sends in three goroutines so that the stages of consecutive chunks
// overlap.
//
// Errors: invalid arguments; a *LinkError when a neighbour dies, stalls
// longer than Options.Timeout or sends frames that do not fit (ErrProtocol);
// ctx's error when it ends; ErrClosed on a closed ring. Any error breaks the
// ring (see Ring).
func (r *Ring) AllReduce(ctx context.Context, out []float32, local [][]float32, firstEST int, scale float32) error {
	return r.AllReduceNotify(ctx, out, local, firstEST, scale, nil)
}

// AllReduceNotify is AllReduce that also calls contributed (when not nil)
// once this rank's part is written to the ring: from then on the reduction
// no longer reads local, and what is left is the result arriving in out,
// which the call still waits for. A rank other than the last can so
// report the rest of its step (its losses, its logical workers' contexts)
// while the result is on its way. contributed runs on another goroutine,
// at most once, and never on the last rank (whose part is the result) or
// when the reduction fails first; it must not block.
func (r *Ring) AllReduceNotify(ctx context.Context, out []float32, local [][]float32, firstEST int, scale float32, contributed func()) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.broken.Load(); p != nil {
		return fmt.Errorf("collective: rank %d: ring unusable after an earlier failure: %w", r.rank, *p)
	}
	if err := r.checkArgs(out, local, firstEST); err != nil {
		r.fail(err)
		return err
	}
	o := r.newOp(out, local, firstEST, scale)
	o.contributed = contributed
	r.seq++
	if r.size == 1 || len(out) == 0 {
		o.computeAll()
		return nil
	}
	if err := o.run(ctx); err != nil {
		r.fail(err)
		return err
	}
	return nil
}

func (r *Ring) checkArgs(out []float32, local [][]float32, firstEST int) error {
	if len(out) > math.MaxUint32 {
		return fmt.Errorf("collective: vector of %d elements exceeds %d", len(out), uint32(math.MaxUint32))
	}
	for i, g := range local {
		if len(g) != len(out) {
			return fmt.Errorf("collective: rank %d: gradient of EST %d has %d elements, out has %d", r.rank, firstEST+i, len(g), len(out))
		}
	}
	switch {
	case firstEST < 0 || firstEST+len(local) > math.MaxUint32:
		return fmt.Errorf("collective: rank %d: firstEST %d out of range", r.rank, firstEST)
	case r.rank == 0 && firstEST != 0:
		return fmt.Errorf("collective: rank 0 has firstEST %d: the first rank holds the first ESTs (firstEST 0)", firstEST)
	case r.rank == r.size-1 && firstEST+len(local) == 0:
		return fmt.Errorf("collective: rank %d, the last, sees no EST on any rank: nothing to reduce", r.rank)
	}
	return nil
}

// op is one AllReduce call on one rank.
type op struct {
	r      *Ring
	seq    uint64
	out    []float32
	local  [][]float32
	first  int
	scale  float32
	chunks int

	recvReduce bool // a partial arrives from rank-1 (some earlier rank holds ESTs)
	sendReduce bool // this rank passes a partial to rank+1
	last       bool // rank P-1: applies the scale and starts the broadcast
	recvBcast  bool // the result arrives from rank-1
	sendBcast  bool // this rank passes the result to rank+1
	zeroCopy   bool // the partial sent is local[0] itself (EST 0 alone on this rank)

	total uint32 // N, known to the sender before it forwards the broadcast

	received    chan int // reduce chunks read, for compute
	reduceReady chan int // reduce chunks computed, for the sender
	reduceSent  chan int // reduce chunks written, for the broadcast receiver
	bcastReady  chan int // result chunks available, for the sender

	abort    chan struct{}
	failOnce sync.Once
	err      error

	// contributed is called once this rank's reduce frames are written
	// (AllReduceNotify); nil for none.
	contributed func()

	prefix [prefixSize]byte // receiver's
	wpre   [prefixSize]byte // sender's
}

func (r *Ring) newOp(out []float32, local [][]float32, first int, scale float32) *op {
	p := r.size
	chunks := (len(out) + r.chunk - 1) / r.chunk
	o := &op{
		r: r, seq: r.seq, out: out, local: local, first: first, scale: scale, chunks: chunks,
		recvReduce: r.rank > 0 && first > 0,
		sendReduce: r.rank < p-1 && first+len(local) > 0,
		last:       r.rank == p-1,
		recvBcast:  r.rank != p-1,
		sendBcast:  r.rank == p-1 || r.rank < p-2,
		abort:      make(chan struct{}),
	}
	o.zeroCopy = !o.recvReduce && len(local) == 1 && !o.last
	if o.last {
		o.total = uint32(first + len(local))
	}
	o.received = make(chan int, chunks)
	o.reduceReady = make(chan int, chunks)
	o.reduceSent = make(chan int, chunks)
	o.bcastReady = make(chan int, chunks)
	return o
}

func (o *op) bounds(k int) (lo, hi int) {
	lo = k * o.r.chunk
	return lo, min(lo+o.r.chunk, len(o.out))
}

// fail records the first error and breaks the ring, which unblocks every
// read and write of this op and, through the closed links, the neighbours'.
func (o *op) fail(err error) {
	o.failOnce.Do(func() {
		o.err = err
		close(o.abort)
		o.r.fail(err)
	})
}

func (o *op) run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		o.fail(fmt.Errorf("collective: rank %d: all-reduce %d: %w", o.r.rank, o.seq, ctx.Err()))
	})
	defer stop()
	if !o.sendReduce && !o.last && o.contributed != nil {
		o.contributed() // no EST up to this rank: nothing of its own to send
	}
	var wg sync.WaitGroup
	if o.sendReduce || o.sendBcast {
		wg.Go(func() {
			if err := o.send(); err != nil {
				o.fail(err)
			}
		})
	}
	if o.recvReduce || o.recvBcast {
		wg.Go(func() {
			if err := o.receive(); err != nil {
				o.fail(err)
			}
		})
	}
	if err := o.compute(); err != nil {
		o.fail(err)
	}
	wg.Wait()
	// ctx's AfterFunc may be failing the op this moment: stop it, and let
	// Once.Do wait for a fail in progress before o.err is read (a no-op
	// Do on an op that did not fail leaves later fails nothing to record).
	stop()
	o.failOnce.Do(func() {})
	return o.err
}

// wait takes the next chunk index from c, or reports an abort.
func (o *op) wait(c chan int) (int, bool) {
	select {
	case k := <-c:
		return k, true
	case <-o.abort:
		return 0, false
	}
}

var errAborted = errors.New("aborted")

// compute produces the partial (or final) sum of every chunk this rank
// contributes to, in chunk order.
func (o *op) compute() error {
	if !o.recvReduce && len(o.local) == 0 {
		return nil // no EST up to this rank: it only forwards the result
	}
	for k := range o.chunks {
		if o.recvReduce {
			if _, ok := o.wait(o.received); !ok {
				return errAborted
			}
		}
		lo, hi := o.bounds(k)
		o.reduceChunk(lo, hi)
		if o.sendReduce {
			o.reduceReady <- k
		}
		if o.last {
			o.bcastReady <- k
		}
	}
	return nil
}

// computeAll is the whole reduction on one rank (P = 1).
func (o *op) computeAll() {
	for k := range o.chunks {
		lo, hi := o.bounds(k)
		o.reduceChunk(lo, hi)
	}
}

// reduceChunk adds this rank's ESTs to out[lo:hi] in EST order (starting
// from g_0 on the rank holding EST 0) and scales on the last rank, the last
// add and the scale in one pass (vecf32.AddScale rounds each). Each element
// sees exactly the canonical sequence of float32 operations.
func (o *op) reduceChunk(lo, hi int) {
	if o.zeroCopy {
		return
	}
	dst := o.out[lo:hi]
	gs := o.local
	if !o.recvReduce {
		copy(dst, gs[0][lo:hi])
		gs = gs[1:]
	}
	if !o.last {
		for _, g := range gs {
			vecf32.Add(dst, g[lo:hi])
		}
		return
	}
	if len(gs) == 0 {
		vecf32.Scale(dst, o.scale)
		return
	}
	for _, g := range gs[:len(gs)-1] {
		vecf32.Add(dst, g[lo:hi])
	}
	vecf32.AddScale(dst, gs[len(gs)-1][lo:hi], o.scale)
}

// send writes this rank's reduce frames, then its broadcast frames, to rank+1.
func (o *op) send() error {
	if o.sendReduce {
		ests := uint32(o.first + len(o.local))
		for range o.chunks {
			k, ok := o.wait(o.reduceReady)
			if !ok {
				return errAborted
			}
			lo, hi := o.bounds(k)
			src := o.out[lo:hi]
			if o.zeroCopy {
				src = o.local[0][lo:hi]
			}
			if err := o.write(wire.TypeReduceChunk, chunkHeader{chunk: uint32(k), ests: ests}, src); err != nil {
				return err
			}
			o.reduceSent <- k
		}
		if o.contributed != nil {
			o.contributed()
		}
	}
	if o.sendBcast {
		for range o.chunks {
			k, ok := o.wait(o.bcastReady)
			if !ok {
				return errAborted
			}
			lo, hi := o.bounds(k)
			h := chunkHeader{chunk: uint32(k), ests: o.total, scaleBits: math.Float32bits(o.scale)}
			if err := o.write(wire.TypeBroadcastChunk, h, o.out[lo:hi]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *op) write(t wire.Type, h chunkHeader, src []float32) error {
	h.seq, h.n = o.seq, uint32(len(o.out))
	h.put(o.wpre[:])
	if err := o.r.out.WriteFloat32Frame(t, o.wpre[:], src); err != nil {
		return o.linkError(true, fmt.Sprintf("sending %v %d of all-reduce %d", t, h.chunk, o.seq), err)
	}
	return nil
}

// receive reads this rank's reduce frames, then its broadcast frames, from
// rank-1, straight into out.
func (o *op) receive() error {
	if o.recvReduce {
		for k := range o.chunks {
			h, err := o.read(wire.TypeReduceChunk, k)
			if err != nil {
				return err
			}
			if h.ests != uint32(o.first) {
				return o.protocolError(wire.TypeReduceChunk, k, "the partial sums %d ESTs, this rank's firstEST is %d", h.ests, o.first)
			}
			o.received <- k
		}
	}
	if !o.recvBcast {
		return nil
	}
	for k := range o.chunks {
		if o.sendReduce && !o.zeroCopy {
			// out[lo:hi] holds the partial until the sender has written it.
			if _, ok := o.wait(o.reduceSent); !ok {
				return errAborted
			}
		}
		h, err := o.read(wire.TypeBroadcastChunk, k)
		if err != nil {
			return err
		}
		if h.ests < uint32(o.first+len(o.local)) || h.scaleBits != math.Float32bits(o.scale) {
			return o.protocolError(wire.TypeBroadcastChunk, k, "the result covers %d ESTs scaled by %v; this rank holds ESTs up to %d and scale %v",
				h.ests, math.Float32frombits(h.scaleBits), o.first+len(o.local), o.scale)
		}
		switch {
		case k == 0:
			o.total = h.ests // read by the sender after bcastReady
		case h.ests != o.total:
			return o.protocolError(wire.TypeBroadcastChunk, k, "the result covers %d ESTs, chunk 0 covered %d", h.ests, o.total)
		}
		if o.sendBcast {
			o.bcastReady <- k
		}
	}
	return nil
}

// read reads frame k of type t into its chunk of out and returns its header.
func (o *op) read(t wire.Type, k int) (chunkHeader, error) {
	lo, hi := o.bounds(k)
	doing := fmt.Sprintf("receiving %v %d of all-reduce %d", t, k, o.seq)
	in := o.r.in
	fh, err := in.ReadHeader()
	if err != nil {
		return chunkHeader{}, o.linkError(false, doing, err)
	}
	if fh.Type != t {
		return chunkHeader{}, o.linkError(false, doing, fmt.Errorf("%w: %w", ErrProtocol, &wire.TypeError{Got: fh.Type, Want: t}))
	}
	if want := prefixSize + 4*(hi-lo); int(fh.Len) != want {
		return chunkHeader{}, o.linkError(false, doing, fmt.Errorf("%w: %w", ErrProtocol, &wire.SizeError{Type: t, Len: fh.Len, Want: uint64(want)}))
	}
	if err := in.ReadFull(o.prefix[:]); err != nil {
		return chunkHeader{}, o.linkError(false, doing, err)
	}
	h := parseChunkHeader(o.prefix[:])
	if h.seq != o.seq || h.chunk != uint32(k) || h.n != uint32(len(o.out)) {
		return h, o.protocolError(t, k, "frame is chunk %d of all-reduce %d over %d elements, want chunk %d of all-reduce %d over %d",
			h.chunk, h.seq, h.n, k, o.seq, len(o.out))
	}
	if err := in.ReadFloat32s(o.out[lo:hi]); err != nil {
		return h, o.linkError(false, doing, err)
	}
	return h, nil
}

func (o *op) linkError(sending bool, doing string, err error) error {
	r := o.r
	e := &LinkError{Rank: r.rank, Peer: (r.rank + r.size - 1) % r.size, Addr: r.prevAddr, Sending: sending, Doing: doing, Err: err}
	if sending {
		e.Peer, e.Addr = (r.rank+1)%r.size, r.nextAddr
	}
	return e
}

func (o *op) protocolError(t wire.Type, k int, format string, args ...any) error {
	return o.linkError(false, fmt.Sprintf("checking %v %d of all-reduce %d", t, k, o.seq),
		fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...)))
}
