package wire

import (
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"testing"
)

func frameBytes(t Type, payload []byte) []byte {
	var b bytes.Buffer
	if err := WriteFrame(&b, t, payload); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestReadFrame(t *testing.T) {
	good := frameBytes(TypeRingHello, []byte("hello"))
	badMagic := append([]byte("XYZ"), good[3:]...)
	badVersion := append([]byte(nil), good...)
	badVersion[3] = Version + 1
	cases := []struct {
		name    string
		in      []byte
		max     uint64
		want    string
		wantErr any
	}{
		{name: "a well-formed frame round-trips", in: good, max: 64, want: "hello"},
		{name: "an empty payload is allowed", in: frameBytes(TypeAuthResult, nil), max: 0, want: ""},
		{name: "a wrong magic is a MagicError", in: badMagic, max: 64, wantErr: new(*MagicError)},
		{name: "a wrong version is a VersionError", in: badVersion, max: 64, wantErr: new(*VersionError)},
		{name: "a length above the cap is a SizeError", in: good, max: 4, wantErr: new(*SizeError)},
		{name: "a truncated payload is an unexpected EOF", in: good[:len(good)-1], max: 64, wantErr: &io.ErrUnexpectedEOF},
		{name: "a truncated header is an unexpected EOF", in: good[:5], max: 64, wantErr: &io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, p, err := ReadFrame(bytes.NewReader(c.in), c.max)
			switch want := c.wantErr.(type) {
			case nil:
				if err != nil {
					t.Fatalf("ReadFrame: %v", err)
				}
				if string(p) != c.want || int(h.Len) != len(c.want) {
					t.Fatalf("payload %q (len %d), want %q", p, h.Len, c.want)
				}
			case *error:
				if !errors.Is(err, *want) {
					t.Fatalf("err = %v, want %v", err, *want)
				}
			default:
				if !errors.As(err, want) {
					t.Fatalf("err = %v (%T), want %T", err, err, want)
				}
			}
		})
	}
}

func TestReadHeaderCleanEOF(t *testing.T) {
	if _, err := ReadHeader(bytes.NewReader(nil), 10); err != io.EOF {
		t.Fatalf("err = %v, want io.EOF on an empty stream", err)
	}
}

func TestErrorMessagesNameWhatWasExpected(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"magic", &MagicError{Got: [3]byte{'G', 'E', 'T'}}, `want "ESW"`},
		{"version", &VersionError{Got: 9, Want: 1}, "version 9, want 1"},
		{"size", &SizeError{Type: TypeReduceChunk, Len: 10, Max: 4}, "reduce-chunk payload of 10 bytes exceeds the cap of 4"},
		{"type", &TypeError{Got: TypeAuthResult, Want: Type(77)}, "got a auth-result frame, want type-77"},
	}
	for _, c := range cases {
		if got := c.err.Error(); !bytes.Contains([]byte(got), []byte(c.want)) {
			t.Errorf("%s: %q does not contain %q", c.name, got, c.want)
		}
	}
}

// TestReadPayloadAllocatesWithReceivedBytes checks that a header announcing
// 1 GiB followed by a few bytes does not make the reader allocate 1 GiB.
func TestReadPayloadAllocatesWithReceivedBytes(t *testing.T) {
	var hdr [HeaderSize]byte
	if err := PutHeader(hdr[:], TypeReduceChunk, MaxTensor); err != nil {
		t.Fatal(err)
	}
	in := append(hdr[:], make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := ReadFrame(bytes.NewReader(in), MaxTensor)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*growStep {
		t.Fatalf("allocated %d bytes for a 100-byte truncated frame announcing 1 GiB", got)
	}
}

func TestReadPayloadGrowsToLargeFrames(t *testing.T) {
	payload := make([]byte, 3*growStep+17)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	_, got, err := ReadFrame(bytes.NewReader(frameBytes(TypeBroadcastChunk, payload)), MaxTensor)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("payload differs after growing reads")
	}
}

func TestFloat32sRoundTripBitsOnBothPaths(t *testing.T) {
	v := []float32{0, float32(math.Copysign(0, -1)), 1.5, -3e38, math.SmallestNonzeroFloat32,
		float32(math.Inf(1)), math.Float32frombits(0x7fc00001), math.Float32frombits(0xff800123)}
	fast := AppendFloat32s(nil, v)
	portable := appendFloat32sPortable(nil, v)
	if !bytes.Equal(fast, portable) {
		t.Fatalf("native encoding %x differs from portable %x", fast, portable)
	}
	if fast[4*2+3] != 0x3f || fast[4*2+2] != 0xc0 {
		t.Fatalf("1.5 encoded as %x, want little-endian 0000c03f", fast[8:12])
	}
	for _, dec := range []struct {
		name string
		fn   func([]float32, []byte) error
	}{
		{"native", DecodeFloat32s},
		{"portable", func(d []float32, s []byte) error { decodeFloat32sPortable(d, s); return nil }},
	} {
		got := make([]float32, len(v))
		if err := dec.fn(got, fast); err != nil {
			t.Fatal(err)
		}
		for i := range v {
			if math.Float32bits(got[i]) != math.Float32bits(v[i]) {
				t.Errorf("%s: element %d = %08x, want %08x", dec.name, i, math.Float32bits(got[i]), math.Float32bits(v[i]))
			}
		}
	}
	if err := DecodeFloat32s(make([]float32, 2), make([]byte, 7)); err == nil {
		t.Fatal("decoding 7 bytes into 2 floats succeeded")
	}
}

// FuzzReadFrame feeds arbitrary bytes to the frame reader: it must never
// panic, never return a payload above the cap, and every frame it accepts
// must re-encode to the bytes it consumed.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameBytes(TypeRingHello, []byte(`{"rank":1}`)))
	f.Add(frameBytes(TypeReduceChunk, make([]byte, 300)))
	f.Add([]byte("ESW\x01\x02\xff\xff\xff\xff"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	const max = 256
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		h, p, err := ReadFrame(r, max)
		if err != nil {
			return
		}
		if len(p) > max || int(h.Len) != len(p) {
			t.Fatalf("payload of %d bytes (header %d) with cap %d", len(p), h.Len, max)
		}
		consumed := in[:len(in)-r.Len()]
		if again := frameBytes(h.Type, p); !bytes.Equal(again, consumed) {
			t.Fatalf("re-encoded %x, consumed %x", again, consumed)
		}
	})
}
