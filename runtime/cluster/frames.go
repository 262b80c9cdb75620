package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// peer is one end of a control connection: reads happen on one goroutine,
// writes are serialised by a mutex (the heartbeat writes concurrently).
type peer struct {
	c   *wire.Conn
	wmu sync.Mutex
}

// send writes v as a JSON frame of type t and, when floats is non-nil, a
// typeBuffers/typeState frame right after it, atomically with respect to
// other senders.
func (p *peer) send(t wire.Type, v any, floatType wire.Type, floats []float32) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if floats != nil {
		return p.c.WriteJSONThenFloats(t, v, floatType, floats)
	}
	return p.c.WriteJSON(t, v)
}

// recv reads the next frame of any type: its type and payload.
func (p *peer) recv() (wire.Type, []byte, error) {
	h, err := p.c.ReadHeader()
	if err != nil {
		return 0, nil, err
	}
	buf := make([]byte, h.Len)
	if err := p.c.ReadFull(buf); err != nil {
		return 0, nil, fmt.Errorf("reading %v payload: %w", h.Type, err)
	}
	return h.Type, buf, nil
}

// recvJSON reads the next frame, which must be of type want, into v.
func (p *peer) recvJSON(want wire.Type, v any) error {
	t, b, err := p.recv()
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("expected a %v message, got %v", want, t)
	}
	return json.Unmarshal(b, v)
}

// recvFloats reads a float frame of type want of exactly len(dst) values.
func (p *peer) recvFloats(want wire.Type, dst []float32) error {
	t, b, err := p.recv()
	if err != nil {
		return err
	}
	return decodeFloats(t, want, b, dst)
}

func decodeFloats(t, want wire.Type, b []byte, dst []float32) error {
	if t != want {
		return fmt.Errorf("expected a %v frame, got %v", want, t)
	}
	if len(b) != 4*len(dst) {
		return fmt.Errorf("%v frame of %d bytes, want %d", t, len(b), 4*len(dst))
	}
	return wire.DecodeFloat32s(dst, b)
}

// stateChecksum is the sha256 (hex) of the little-endian bytes of v: what
// a joiner verifies the transferred state against.
func stateChecksum(v []float32) string {
	sum := sha256.Sum256(wire.AppendFloat32s(nil, v))
	return hex.EncodeToString(sum[:])
}
