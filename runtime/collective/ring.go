package collective

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// Defaults of Options.
const (
	DefaultChunkBytes     = 256 << 10
	DefaultTimeout        = 5 * time.Second
	DefaultConnectTimeout = 30 * time.Second
)

// Role is the role ring links present in the auth handshake.
const Role = "ring"

// Member is one process of the ring. Ring order is rank order: rank r sends
// to rank r+1 mod P and receives from rank r-1 mod P.
type Member struct {
	Rank int
	// Addr is the host:port the member's Listener accepts on.
	Addr string
}

// Listener accepts the ring link from the previous rank. Its deadline is
// used to stop accepting when Connect ends; *net.TCPListener implements it.
type Listener interface {
	net.Listener
	SetDeadline(t time.Time) error
}

// Options tune a Ring. All members of a ring must use the same ChunkBytes
// and Epoch (Connect checks).
type Options struct {
	// ChunkBytes is the pipelining unit in bytes, a positive multiple of 4
	// (default DefaultChunkBytes).
	ChunkBytes int
	// Timeout bounds how long any read or write on a ring link may go
	// without progress (default DefaultTimeout); a dead or stalled peer
	// makes AllReduce fail within about this time.
	Timeout time.Duration
	// ConnectTimeout bounds Connect when ctx has no deadline (default
	// DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// Epoch identifies this ring among the rings the job builds as its
	// membership changes; links from another epoch are refused.
	Epoch uint64
	// Auth authenticates every ring link with the job secret (runtime/auth,
	// role Role). Nil is refused unless Insecure is set.
	Auth *auth.Config
	// Insecure allows Auth == nil (tests and benchmarks on loopback only).
	Insecure bool
	// DisableNoDelay leaves Nagle's algorithm on (TCP_NODELAY off); by
	// default it is off so the small chunk headers are not delayed.
	DisableNoDelay bool
	// Logger receives refused connections; nil discards.
	Logger hclog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.ChunkBytes == 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.ChunkBytes < 4 || o.ChunkBytes%4 != 0 || o.ChunkBytes > wire.MaxTensor {
		return o, fmt.Errorf("collective: ChunkBytes %d: want a positive multiple of 4 up to %d", o.ChunkBytes, wire.MaxTensor)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Timeout < 0 || o.ConnectTimeout < 0 {
		return o, fmt.Errorf("collective: negative timeout (Timeout %v, ConnectTimeout %v)", o.Timeout, o.ConnectTimeout)
	}
	if o.Auth == nil && !o.Insecure {
		return o, errors.New("collective: Options.Auth is nil: ring links must be authenticated with the job secret (set Insecure only for loopback tests)")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o, nil
}

// Ring is this process's place in a ring of P processes: a link to the next
// rank and one from the previous. AllReduce calls must not overlap (they are
// serialized); Close may be called at any time. After any AllReduce error
// the ring is broken (its links closed, so the failure reaches every member
// quickly) and the caller builds a new one with Connect.
type Ring struct {
	rank, size int
	chunk      int // elements per chunk
	opts       Options
	in, out    *wire.Conn // from rank-1, to rank+1 (nil when size == 1)
	prevAddr   string
	nextAddr   string

	mu     sync.Mutex // serializes AllReduce
	seq    uint64
	broken atomic.Pointer[error]
}

// Rank returns this process's rank.
func (r *Ring) Rank() int { return r.rank }

// Size returns the number of processes P.
func (r *Ring) Size() int { return r.size }

// Close closes the ring's links; an AllReduce in progress (here or, through
// the closed links, at the neighbours) fails. Close is idempotent.
func (r *Ring) Close() error {
	r.fail(ErrClosed)
	return nil
}

// fail marks the ring broken with err (the first cause wins) and closes the
// links.
func (r *Ring) fail(err error) {
	r.broken.CompareAndSwap(nil, &err)
	if r.in != nil {
		r.in.Close()
	}
	if r.out != nil {
		r.out.Close()
	}
}

// ErrClosed is returned by AllReduce on a ring that was closed.
var ErrClosed = errors.New("collective: ring closed")

// ErrProtocol marks frames that do not fit what this rank expects: members
// called AllReduce with inconsistent lengths, EST ranges or scales, or a
// link carried bytes of another protocol.
var ErrProtocol = errors.New("collective: protocol mismatch")

// LinkError reports the failure of one ring link: the neighbour died, closed
// the link, stalled past the timeout or sent bytes that do not fit. The
// runtime treats it as a crash of the ring and rebuilds it.
type LinkError struct {
	// Rank is this process's rank, Peer the neighbour's.
	Rank, Peer int
	Addr       string
	// Sending is true for the link to the next rank, false for the link
	// from the previous one.
	Sending bool
	// Doing says what was in progress.
	Doing string
	Err   error
}

// Error names both ranks, the link's direction and address, and what was
// in progress.
func (e *LinkError) Error() string {
	dir := "from"
	if e.Sending {
		dir = "to"
	}
	return fmt.Sprintf("collective: rank %d: link %s rank %d (%s) failed while %s: %v", e.Rank, dir, e.Peer, e.Addr, e.Doing, e.Err)
}

// Unwrap returns the underlying I/O or protocol error.
func (e *LinkError) Unwrap() error { return e.Err }

// Timeout reports whether the link failed because the peer made no
// progress within Options.Timeout.
func (e *LinkError) Timeout() bool { return errors.Is(e.Err, os.ErrDeadlineExceeded) }

// hello is the first message on a ring link after authentication.
type hello struct {
	Epoch      uint64 `json:"epoch"`
	Rank       int    `json:"rank"`
	Size       int    `json:"size"`
	ChunkBytes int    `json:"chunk_bytes"`
}

type helloAck struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Connect joins rank into the ring of members (members[i].Rank must be i):
// it accepts the link from the previous rank on ln and dials the next rank,
// authenticating both with opts.Auth and checking that both ends agree on
// epoch, size, ranks and chunk size. Connections that fail authentication or
// these checks are refused and logged, and Connect keeps waiting for the
// right one until ctx ends (or ConnectTimeout passes when ctx has no
// deadline). A refusal by the next rank is returned at once. ln stays open
// and is the caller's to close; for P = 1 it is not used and may be nil.
func Connect(ctx context.Context, rank int, members []Member, ln Listener, opts Options) (*Ring, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkMembers(rank, members); err != nil {
		return nil, err
	}
	p := len(members)
	r := &Ring{rank: rank, size: p, chunk: opts.ChunkBytes / 4, opts: opts}
	if p == 1 {
		return r, nil
	}
	if ln == nil {
		return nil, errors.New("collective: Connect needs a listener for a ring of more than one process")
	}
	r.prevAddr, r.nextAddr = members[(rank+p-1)%p].Addr, members[(rank+1)%p].Addr
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.ConnectTimeout)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type accepted struct {
		c   *wire.Conn
		err error
	}
	inc := make(chan accepted, 1)
	go func() {
		c, err := r.acceptPrev(ctx, ln)
		inc <- accepted{c, err}
	}()
	out, err := r.dialNext(ctx)
	if err != nil {
		cancel()
		if a := <-inc; a.c != nil {
			a.c.Close()
		}
		return nil, err
	}
	a := <-inc
	if a.err != nil {
		out.Close()
		return nil, a.err
	}
	r.in, r.out = a.c, out
	r.in.Max = prefixSize + uint64(opts.ChunkBytes)
	return r, nil
}

func checkMembers(rank int, members []Member) error {
	if len(members) == 0 {
		return errors.New("collective: no members")
	}
	if rank < 0 || rank >= len(members) {
		return fmt.Errorf("collective: rank %d outside the ring of %d members", rank, len(members))
	}
	for i, m := range members {
		if m.Rank != i {
			return fmt.Errorf("collective: members[%d] has rank %d: members must be listed in rank order 0..%d", i, m.Rank, len(members)-1)
		}
		if m.Addr == "" && len(members) > 1 {
			return fmt.Errorf("collective: member %d has no address", i)
		}
	}
	return nil
}

func (r *Ring) tune(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(!r.opts.DisableNoDelay)
	}
}

// acceptPrev accepts connections on ln until one from the previous rank
// passes authentication and the hello check, refusing the others.
func (r *Ring) acceptPrev(ctx context.Context, ln Listener) (_ *wire.Conn, err error) {
	actx, stopAccept := context.WithCancel(ctx)
	defer stopAccept()
	unblocked := make(chan struct{})
	stop := context.AfterFunc(actx, func() {
		ln.SetDeadline(time.Unix(1, 0))
		close(unblocked)
	})
	won := make(chan *wire.Conn, 1)
	var wg sync.WaitGroup
	defer func() {
		stopAccept()
		wg.Wait()
		if err != nil {
			select {
			case late := <-won: // admitted after the loop gave up
				late.Close()
			default:
			}
		}
		if !stop() {
			<-unblocked
		}
		ln.SetDeadline(time.Time{})
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case wc := <-won:
				return wc, nil
			default:
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("collective: rank %d waiting for the link from rank %d: %w", r.rank, (r.rank+r.size-1)%r.size, ctx.Err())
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return nil, fmt.Errorf("collective: rank %d accepting ring links: %w", r.rank, err)
		}
		wg.Go(func() {
			wc, err := r.admit(actx, c)
			if err != nil {
				r.opts.Logger.Warn("refused ring connection", "rank", r.rank, "peer", c.RemoteAddr().String(), "error", err)
				c.Close()
				return
			}
			select {
			case won <- wc:
				stopAccept()
			default:
				wc.Close()
			}
		})
	}
}

// admit authenticates one incoming connection and checks its hello.
func (r *Ring) admit(ctx context.Context, c net.Conn) (*wire.Conn, error) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r.tune(c)
	if r.opts.Auth != nil {
		p, err := auth.Server(ctx, c, *r.opts.Auth)
		if err != nil {
			return nil, err
		}
		if p.Role != Role {
			return nil, fmt.Errorf("collective: peer authenticated as %q, not as a ring member", p.Role)
		}
	}
	wc := wire.NewConn(c, r.opts.Timeout, wire.MaxControl)
	var h hello
	if err := wc.ReadJSON(wire.TypeRingHello, &h); err != nil {
		return nil, fmt.Errorf("collective: reading the ring hello: %w", err)
	}
	want := hello{Epoch: r.opts.Epoch, Rank: (r.rank + r.size - 1) % r.size, Size: r.size, ChunkBytes: r.opts.ChunkBytes}
	if h != want {
		msg := fmt.Sprintf("rank %d expects a link from rank %d of a ring of %d (epoch %d, chunk %d bytes), got one from rank %d of %d (epoch %d, chunk %d bytes)",
			r.rank, want.Rank, want.Size, want.Epoch, want.ChunkBytes, h.Rank, h.Size, h.Epoch, h.ChunkBytes)
		wc.WriteJSON(wire.TypeRingHelloAck, helloAck{Error: msg})
		return nil, fmt.Errorf("collective: %s", msg)
	}
	if err := wc.WriteJSON(wire.TypeRingHelloAck, helloAck{OK: true}); err != nil {
		return nil, fmt.Errorf("collective: acknowledging the ring hello: %w", err)
	}
	if !stop() {
		return nil, ctx.Err()
	}
	return wc, nil
}

// dialNext connects to the next rank, retrying refused dials (its listener
// may not be up yet) until ctx ends.
func (r *Ring) dialNext(ctx context.Context) (*wire.Conn, error) {
	next := (r.rank + 1) % r.size
	backoff := 10 * time.Millisecond
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", r.nextAddr)
		if err == nil {
			wc, err := r.greet(ctx, c)
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("collective: rank %d linking to rank %d at %s: %w", r.rank, next, r.nextAddr, err)
			}
			return wc, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("collective: rank %d dialing rank %d at %s: %w (last error: %v)", r.rank, next, r.nextAddr, ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// ErrRefused is wrapped by Connect's error when the next rank refused this
// rank's link (other epoch, size or chunk size).
var ErrRefused = errors.New("collective: ring link refused")

func (r *Ring) greet(ctx context.Context, c net.Conn) (*wire.Conn, error) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r.tune(c)
	if r.opts.Auth != nil {
		if _, err := auth.Client(ctx, c, *r.opts.Auth, Role); err != nil {
			return nil, err
		}
	}
	wc := wire.NewConn(c, r.opts.Timeout, wire.MaxControl)
	if err := wc.WriteJSON(wire.TypeRingHello, hello{Epoch: r.opts.Epoch, Rank: r.rank, Size: r.size, ChunkBytes: r.opts.ChunkBytes}); err != nil {
		return nil, err
	}
	var ack helloAck
	if err := wc.ReadJSON(wire.TypeRingHelloAck, &ack); err != nil {
		return nil, fmt.Errorf("reading the hello acknowledgement: %w", err)
	}
	if !ack.OK {
		return nil, fmt.Errorf("%w: %s", ErrRefused, ack.Error)
	}
	if !stop() {
		return nil, ctx.Err()
	}
	return wc, nil
}
