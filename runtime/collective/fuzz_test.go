package collective

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// fuzzLen and fuzzChunk shape the all-reduce FuzzReceive runs: 5 elements in
// chunks of 2, so 3 reduce frames arrive.
const (
	fuzzLen   = 5
	fuzzChunk = 2
)

// reduceFrames encodes the reduce frames a correct rank 0 holding one EST
// sends for all-reduce seq.
func reduceFrames(seq uint64, partial []float32) []byte {
	var b bytes.Buffer
	for k := 0; k*fuzzChunk < len(partial); k++ {
		lo, hi := k*fuzzChunk, min((k+1)*fuzzChunk, len(partial))
		var pre [prefixSize]byte
		chunkHeader{seq: seq, chunk: uint32(k), n: uint32(len(partial)), ests: 1}.put(pre[:])
		wire.WriteFrame(&b, wire.TypeReduceChunk, wire.AppendFloat32s(pre[:], partial[lo:hi]))
	}
	return b.Bytes()
}

// fuzzGrad is the last rank's own EST gradient in receiveOnce.
var fuzzGrad = []float32{0.5, -1, 1e30, 3, 7}

// receiveOnce runs one all-reduce as the last rank of a 2-rank ring whose
// previous rank sends the bytes in.
func receiveOnce(in []byte) ([]float32, error) {
	inA, inB := net.Pipe()
	outA, outB := net.Pipe()
	defer inA.Close()
	defer outA.Close()
	go io.Copy(io.Discard, outB)
	go func() {
		inA.Write(in)
		inA.Close()
	}()
	r := &Ring{rank: 1, size: 2, chunk: fuzzChunk, opts: Options{Timeout: time.Second},
		in:  wire.NewConn(inB, time.Second, prefixSize+4*fuzzChunk),
		out: wire.NewConn(outA, time.Second, wire.MaxControl)}
	out := make([]float32, fuzzLen)
	return out, r.AllReduce(context.Background(), out, [][]float32{fuzzGrad}, 1, 0.5)
}

func TestReceiveChecksFrames(t *testing.T) {
	good := reduceFrames(0, []float32{1, 2, 3, 4, 5})
	cases := []struct {
		name     string
		in       []byte
		protocol bool // the error must be ErrProtocol
		ok       bool
	}{
		{name: "well-formed frames are reduced", in: good, ok: true},
		{name: "frames of another all-reduce are a protocol error", in: reduceFrames(1, []float32{1, 2, 3, 4, 5}), protocol: true},
		{name: "frames of a shorter vector are a protocol error", in: reduceFrames(0, []float32{1, 2, 3}), protocol: true},
		{name: "a truncated stream is an error", in: good[:len(good)-3]},
		{name: "a header announcing 4 GiB is an error", in: []byte("ESW\x01\x12\xff\xff\xff\xff")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := receiveOnce(c.in)
			if c.ok {
				if err != nil || out[0] != 0.75 || out[1] != 0.5 || out[4] != 6 {
					t.Fatalf("out %v, err %v", out, err)
				}
				return
			}
			if err == nil || (c.protocol && !errors.Is(err, ErrProtocol)) {
				t.Fatalf("err = %v (protocol error wanted: %v)", err, c.protocol)
			}
		})
	}
}

// FuzzReceive plays the previous rank of a 2-rank ring with arbitrary bytes.
// The last rank must never panic or hang; when it succeeds, the bytes were
// well-formed reduce frames and its result is exactly
// float32(partial+g)*scale of the partial they carried.
func FuzzReceive(f *testing.F) {
	f.Add(reduceFrames(0, []float32{1, 2, 3, 4, 5}))
	f.Add(reduceFrames(1, []float32{1, 2, 3, 4, 5}))
	f.Add(reduceFrames(0, []float32{1, 2, 3})[:20])
	f.Add([]byte("ESW\x01\x12\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := receiveOnce(in)
		if err != nil {
			return
		}
		var partial []float32
		rd := bytes.NewReader(in)
		for range 3 {
			_, p, err := wire.ReadFrame(rd, wire.MaxControl)
			if err != nil {
				t.Fatalf("AllReduce accepted input that is not 3 frames: %v", err)
			}
			v := make([]float32, (len(p)-prefixSize)/4)
			wire.DecodeFloat32s(v, p[prefixSize:])
			partial = append(partial, v...)
		}
		for j := range out {
			want := float32(partial[j]+fuzzGrad[j]) * 0.5
			if math.Float32bits(out[j]) != math.Float32bits(want) {
				t.Fatalf("element %d = %v, want %v", j, out[j], want)
			}
		}
	})
}
