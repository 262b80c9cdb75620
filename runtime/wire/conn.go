package wire

import (
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// ioStep is the most bytes one Read or Write call on a Conn moves before the
// deadline is pushed forward again: a Conn's timeout bounds the time without
// progress, not the time of a whole (possibly 1 GiB) frame.
const ioStep = 1 << 20

// Conn reads and writes frames on a net.Conn. Every read and write call on
// the underlying connection gets a deadline of Timeout from its start, so a
// peer that stops sending or receiving for Timeout makes the call fail with
// an error matching os.ErrDeadlineExceeded. One goroutine may read while
// another writes; two concurrent readers or writers are not allowed.
type Conn struct {
	nc net.Conn
	// Timeout bounds the time each read or write may go without progress;
	// zero means no deadline.
	Timeout time.Duration
	// Max is the payload cap in bytes for frames read with ReadHeader and
	// ReadFrame.
	Max uint64

	whdr    []byte
	lead    []byte
	wbufs   [2][]byte
	scratch []byte
}

// NewConn wraps nc with the given progress timeout and payload cap (bytes).
func NewConn(nc net.Conn, timeout time.Duration, max uint64) *Conn {
	return &Conn{nc: nc, Timeout: timeout, Max: max}
}

// NetConn returns the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the wrapped connection, unblocking any read or write.
func (c *Conn) Close() error { return c.nc.Close() }

func (c *Conn) readDeadline() {
	if c.Timeout > 0 {
		c.nc.SetReadDeadline(time.Now().Add(c.Timeout))
	}
}

func (c *Conn) writeDeadline() {
	if c.Timeout > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(c.Timeout))
	}
}

// SetTimeout changes Timeout. Setting 0 also clears the deadlines an
// earlier call with a timeout left on the connection (assigning Timeout = 0
// directly leaves them, which lets a caller such as runtime/auth manage the
// connection's deadline itself).
func (c *Conn) SetTimeout(d time.Duration) {
	c.Timeout = d
	if d == 0 {
		c.nc.SetDeadline(time.Time{})
	}
}

// ReadFull fills p from the connection, refreshing the deadline at every
// read call.
func (c *Conn) ReadFull(p []byte) error {
	for len(p) > 0 {
		c.readDeadline()
		n, err := c.nc.Read(p)
		p = p[n:]
		if err != nil && len(p) > 0 {
			return fmt.Errorf("wire: reading from %v (%d bytes missing): %w", c.nc.RemoteAddr(), len(p), noEOF(err))
		}
	}
	return nil
}

// ReadHeader reads and checks the next frame header against c.Max (see
// ParseHeader).
func (c *Conn) ReadHeader() (Header, error) {
	var b [HeaderSize]byte
	if err := c.ReadFull(b[:]); err != nil {
		return Header{}, err
	}
	return ParseHeader(b[:], c.Max)
}

// ReadFrame reads the next frame, which must be of type want (else a
// *TypeError), and returns its payload.
func (c *Conn) ReadFrame(want Type) ([]byte, error) {
	return c.readFrame(want, c.Max)
}

func (c *Conn) readFrame(want Type, max uint64) ([]byte, error) {
	var b [HeaderSize]byte
	if err := c.ReadFull(b[:]); err != nil {
		return nil, err
	}
	h, err := ParseHeader(b[:], max)
	if err != nil {
		return nil, err
	}
	if h.Type != want {
		return nil, &TypeError{Got: h.Type, Want: want}
	}
	return ReadPayload(readerFunc(func(p []byte) (int, error) {
		c.readDeadline()
		return c.nc.Read(p)
	}), h, nil)
}

type readerFunc func([]byte) (int, error)

// Read calls f.
func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// ReadFloat32s reads 4·len(dst) payload bytes into dst (little-endian
// float32). On little-endian machines the bytes land in dst directly.
func (c *Conn) ReadFloat32s(dst []float32) error {
	if littleEndian {
		return c.ReadFull(float32Bytes(dst))
	}
	for len(dst) > 0 {
		n := min(len(dst), ioStep/4)
		c.scratch = append(c.scratch[:0], make([]byte, 4*n)...)
		if err := c.ReadFull(c.scratch); err != nil {
			return err
		}
		decodeFloat32sPortable(dst[:n], c.scratch)
		dst = dst[n:]
	}
	return nil
}

// ReadJSON reads the next frame, which must be of type want and at most
// min(c.Max, MaxControl) bytes, and decodes its JSON payload into v.
// Unknown fields are ignored, so that a peer of a newer protocol version can
// still be told about the version mismatch.
func (c *Conn) ReadJSON(want Type, v any) error {
	p, err := c.readFrame(want, min(c.Max, MaxControl))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("wire: decoding %v message from %v: %w", want, c.nc.RemoteAddr(), err)
	}
	return nil
}

// WriteFrame writes one frame with the given payload.
func (c *Conn) WriteFrame(t Type, payload []byte) error {
	return c.writeFrame(nil, t, nil, payload)
}

// WriteJSON writes v as the JSON payload of a frame of type t.
func (c *Conn) WriteJSON(t Type, v any) error {
	p, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("wire: encoding %v message: %w", t, err)
	}
	return c.writeFrame(nil, t, nil, p)
}

// WriteJSONThenFloats writes v as the JSON payload of a frame of type t and
// then a frame of type ft holding the little-endian bytes of floats, both in
// one writev when floats take at most 1 MiB: the reader is woken once for
// the pair (a step message and its buffers, say), not once per frame.
func (c *Conn) WriteJSONThenFloats(t Type, v any, ft Type, floats []float32) error {
	p, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("wire: encoding %v message: %w", t, err)
	}
	c.lead = append(c.lead[:0], make([]byte, HeaderSize)...)
	if err := PutHeader(c.lead, t, len(p)); err != nil {
		return err
	}
	c.lead = append(c.lead, p...)
	return c.writeFrame(c.lead, ft, nil, c.floatBytes(floats))
}

// WriteFloat32Frame writes one frame whose payload is prefix followed by the
// little-endian bytes of v. On little-endian machines v is written from its
// own memory (one writev per frame up to 1 MiB, no copy).
func (c *Conn) WriteFloat32Frame(t Type, prefix []byte, v []float32) error {
	return c.writeFrame(nil, t, prefix, c.floatBytes(v))
}

// floatBytes is v's little-endian bytes: v's own memory on little-endian
// machines, else a copy in c.scratch.
func (c *Conn) floatBytes(v []float32) []byte {
	if littleEndian {
		return float32Bytes(v)
	}
	c.scratch = appendFloat32sPortable(c.scratch[:0], v)
	return c.scratch
}

// writeFrame writes lead (whole frames already encoded, may be nil), the
// header, prefix and body, the first ioStep bytes of body in the same
// writev as the header.
func (c *Conn) writeFrame(lead []byte, t Type, prefix, body []byte) error {
	c.whdr = append(append(c.whdr[:0], lead...), make([]byte, HeaderSize)...)
	if err := PutHeader(c.whdr[len(lead):], t, len(prefix)+len(body)); err != nil {
		return err
	}
	c.whdr = append(c.whdr, prefix...)
	first := min(len(body), ioStep)
	c.wbufs[0], c.wbufs[1] = c.whdr, body[:first]
	bufs := net.Buffers(c.wbufs[:])
	c.writeDeadline()
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return fmt.Errorf("wire: writing %v frame to %v: %w", t, c.nc.RemoteAddr(), err)
	}
	for rest := body[first:]; len(rest) > 0; {
		n := min(len(rest), ioStep)
		c.writeDeadline()
		if _, err := c.nc.Write(rest[:n]); err != nil {
			return fmt.Errorf("wire: writing %v frame to %v: %w", t, c.nc.RemoteAddr(), err)
		}
		rest = rest[n:]
	}
	return nil
}
