package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic opens every frame.
const Magic = "ESW"

// Version is the frame format version this package reads and writes. A
// change to the header layout or to the meaning of a message type bumps it.
const Version uint8 = 1

// HeaderSize is the length in bytes of a frame header.
const HeaderSize = 9

// Size caps, in payload bytes.
const (
	// MaxTensor is the default cap for frames that carry tensors (1 GiB).
	MaxTensor = 1 << 30
	// MaxControl is the cap for JSON control messages (64 KiB).
	MaxControl = 64 << 10
	// MaxPayload is the largest length a header can announce that any
	// reader accepts (4 GiB - 1, the range of the length field).
	MaxPayload = 1<<32 - 1
)

// Type identifies a message. The values are the one registry for all of
// EasyScale's protocols, so that a frame read in the wrong place is named in
// the error.
type Type uint8

// Message types. 1-15 authentication (runtime/auth), 16-31 the all-reduce
// ring (runtime/collective), 32 and up the coordinator protocol.
const (
	TypeAuthChallenge  Type = 1
	TypeAuthResponse   Type = 2
	TypeAuthResult     Type = 3
	TypeRingHello      Type = 16
	TypeRingHelloAck   Type = 17
	TypeReduceChunk    Type = 18
	TypeBroadcastChunk Type = 19
)

var typeNames = map[Type]string{
	TypeAuthChallenge:  "auth-challenge",
	TypeAuthResponse:   "auth-response",
	TypeAuthResult:     "auth-result",
	TypeRingHello:      "ring-hello",
	TypeRingHelloAck:   "ring-hello-ack",
	TypeReduceChunk:    "reduce-chunk",
	TypeBroadcastChunk: "broadcast-chunk",
}

// RegisterName names a message type of a protocol defined in another
// package (the coordinator protocol, types 32 and up), so that errors show
// the name. Call it only from init functions.
func RegisterName(t Type, name string) { typeNames[t] = name }

// String returns the message type's name, or "type-N" for an unnamed one.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type-%d", uint8(t))
}

// Header is a decoded frame header.
type Header struct {
	Type Type
	// Len is the payload length in bytes.
	Len uint32
}

// MagicError reports a frame that does not start with Magic: the peer does
// not speak this protocol (or the stream lost its framing).
type MagicError struct {
	Got [3]byte
}

// Error names the bytes found and the magic expected.
func (e *MagicError) Error() string {
	return fmt.Sprintf("wire: frame starts with %q, want %q: the peer does not speak the EasyScale protocol", e.Got[:], Magic)
}

// VersionError reports a frame of another format version.
type VersionError struct {
	Got, Want uint8
}

// Error names both versions.
func (e *VersionError) Error() string {
	return fmt.Sprintf("wire: frame format version %d, want %d: peer runs an incompatible easyscale build", e.Got, e.Want)
}

// SizeError reports a payload length above the reader's cap, or a payload
// whose length does not fit what the reader expects.
type SizeError struct {
	Type Type
	Len  uint32
	// Max is the cap that was exceeded; when Want is set instead, the
	// payload had to be exactly Want bytes.
	Max, Want uint64
}

// Error names the message type, its length and the cap or expected length.
func (e *SizeError) Error() string {
	if e.Max == 0 {
		return fmt.Sprintf("wire: %v payload of %d bytes, want exactly %d", e.Type, e.Len, e.Want)
	}
	return fmt.Sprintf("wire: %v payload of %d bytes exceeds the cap of %d bytes", e.Type, e.Len, e.Max)
}

// TypeError reports a frame of another message type than the one expected.
type TypeError struct {
	Got, Want Type
}

// Error names both message types.
func (e *TypeError) Error() string {
	return fmt.Sprintf("wire: got a %v frame, want %v", e.Got, e.Want)
}

// PutHeader encodes a header for a payload of n bytes into b, which must be
// at least HeaderSize long. It returns a *SizeError when n does not fit the
// length field.
func PutHeader(b []byte, t Type, n int) error {
	if n < 0 || uint64(n) > MaxPayload {
		return &SizeError{Type: t, Len: MaxPayload, Max: MaxPayload}
	}
	copy(b, Magic)
	b[3] = Version
	b[4] = byte(t)
	binary.LittleEndian.PutUint32(b[5:9], uint32(n))
	return nil
}

// ParseHeader decodes and checks a header: b must hold HeaderSize bytes, the
// magic and version must match, and the length must be at most max (values
// above MaxPayload mean MaxPayload). Errors are *MagicError, *VersionError
// and *SizeError.
func ParseHeader(b []byte, max uint64) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("wire: header of %d bytes, want %d: %w", len(b), HeaderSize, io.ErrUnexpectedEOF)
	}
	if string(b[:3]) != Magic {
		e := &MagicError{}
		copy(e.Got[:], b[:3])
		return Header{}, e
	}
	if b[3] != Version {
		return Header{}, &VersionError{Got: b[3], Want: Version}
	}
	h := Header{Type: Type(b[4]), Len: binary.LittleEndian.Uint32(b[5:9])}
	if uint64(h.Len) > max {
		return Header{}, &SizeError{Type: h.Type, Len: h.Len, Max: max}
	}
	return h, nil
}

// ReadHeader reads and checks one header from r (see ParseHeader). A stream
// that ends before the first byte returns io.EOF unwrapped, so a reader loop
// can tell a clean close from a truncated frame.
func ReadHeader(r io.Reader, max uint64) (Header, error) {
	var b [HeaderSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		if err == io.EOF {
			return Header{}, io.EOF
		}
		return Header{}, fmt.Errorf("wire: reading frame header: %w", err)
	}
	return ParseHeader(b[:], max)
}

// growStep is the largest buffer ReadPayload allocates before the bytes to
// fill it have arrived; longer payloads grow as they are received, so a
// header announcing 1 GiB followed by nothing costs 1 MiB, not 1 GiB.
const growStep = 1 << 20

// ReadPayload reads the h.Len payload bytes that follow a header into buf
// (reused when large enough) and returns them. Memory grows with the bytes
// actually received (at most about twice that), never with the announced
// length alone.
func ReadPayload(r io.Reader, h Header, buf []byte) ([]byte, error) {
	n := int(h.Len)
	if cap(buf) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("wire: reading %d-byte %v payload: %w", n, h.Type, noEOF(err))
		}
		return buf, nil
	}
	buf = make([]byte, 0, min(n, growStep))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), n))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, fmt.Errorf("wire: reading %d-byte %v payload (got %d): %w", n, h.Type, len(buf), noEOF(err))
		}
	}
	return buf, nil
}

// noEOF turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadFrame reads one frame of at most max payload bytes from r.
func ReadFrame(r io.Reader, max uint64) (Header, []byte, error) {
	h, err := ReadHeader(r, max)
	if err != nil {
		return Header{}, nil, err
	}
	p, err := ReadPayload(r, h, nil)
	return h, p, err
}

// WriteFrame writes one frame (header and payload) to w in a single Write.
func WriteFrame(w io.Writer, t Type, payload []byte) error {
	b := make([]byte, HeaderSize+len(payload))
	if err := PutHeader(b, t, len(payload)); err != nil {
		return err
	}
	copy(b[HeaderSize:], payload)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("wire: writing %v frame: %w", t, err)
	}
	return nil
}
