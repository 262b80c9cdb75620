package statedb

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"testing"
)

// file assembles a safetensors file from a header and a data section.
func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

const okMeta = `"__metadata__":{"easyscale.step":"4","easyscale.order":"[\"w\"]"}`

func TestDecodeRejectsMalformedFiles(t *testing.T) {
	eight := make([]byte, 8)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"a file shorter than the length prefix", []byte{1, 2, 3}, "header"},
		{"a header length beyond the file", append(binary.LittleEndian.AppendUint64(nil, 1<<60), "{}"...), "header"},
		{"a header that is not JSON", file("{not json", nil), "header"},
		{"a dtype other than F32", file(`{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},`+okMeta+`}`, eight), "F32"},
		{"offsets that leave a gap", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},`+okMeta+`}`, eight), "offset"},
		{"a shape that does not match the offsets", file(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]},`+okMeta+`}`, eight), "offsets"},
		{"a shape whose product overflows", file(`{"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]},`+okMeta+`}`, eight), "num"},
		{"a huge dimension of an empty tensor", file(`{"w":{"dtype":"F32","shape":[0,1099511627776],"data_offsets":[0,0]},`+okMeta+`}`, nil), "out of range"},
		{"data beyond the described tensors", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},`+okMeta+`}`, eight), "incomplete"},
		{"a missing step", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, eight), "easyscale.step"},
		{"an order naming an absent tensor", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"easyscale.step":"1","easyscale.order":"[\"v\"]"}}`, eight), "easyscale.order"},
		{"an order listing a tensor twice", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"__metadata__":{"easyscale.step":"1","easyscale.order":"[\"w\",\"w\"]"}}`, eight), "easyscale.order"},
		{"a non-string metadata value", file(`{"__metadata__":{"easyscale.step":1}}`, nil), "header"},
	}
	for _, c := range cases {
		t.Run(c.name+" is rejected", func(t *testing.T) {
			_, _, _, err := decodeCheckpoint(c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestDecodeAcceptsAWellFormedFile(t *testing.T) {
	b := file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},`+
		`"__metadata__":{"easyscale.step":"4","easyscale.order":"[\"w\"]","note":"x"}}`,
		[]byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0})
	step, ts, meta, err := decodeCheckpoint(b)
	if err != nil || step != 4 || len(ts) != 1 || !slices.Equal(ts[0].Data, []float32{1, -2}) ||
		!maps.Equal(meta, map[string]string{"note": "x"}) {
		t.Fatalf("decode = %d %v %v %v", step, ts, meta, err)
	}
}

// checkRoundTrip asserts that what decodeCheckpoint accepted encodes and
// decodes again to the same values, bit for bit.
func checkRoundTrip(t *testing.T, b []byte) {
	step, ts, meta, err := decodeCheckpoint(b)
	if err != nil {
		return
	}
	if validateTensors(ts) != nil || validateMeta(meta) != nil {
		return // e.g. a tensor named "": readable, but not ours to write
	}
	var buf bytes.Buffer
	if err := encodeCheckpoint(&buf, step, ts, meta); err != nil {
		t.Fatalf("re-encoding a decoded checkpoint: %v", err)
	}
	step2, ts2, meta2, err := decodeCheckpoint(buf.Bytes())
	if err != nil {
		t.Fatalf("decoding a re-encoded checkpoint: %v", err)
	}
	if step2 != step || !maps.Equal(meta, meta2) || len(ts) != len(ts2) {
		t.Fatalf("round trip changed step/meta/count: %d %v %d -> %d %v %d", step, meta, len(ts), step2, meta2, len(ts2))
	}
	for i := range ts {
		if ts[i].Name != ts2[i].Name || !slices.Equal(ts[i].Shape, ts2[i].Shape) || !bitsEqual(ts[i].Data, ts2[i].Data) {
			t.Fatalf("round trip changed tensor %d: %+v -> %+v", i, ts[i], ts2[i])
		}
	}
}

func encoded(t testing.TB, step int64, ts []Tensor, meta map[string]string) []byte {
	var buf bytes.Buffer
	if err := encodeCheckpoint(&buf, step, ts, meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzDecodeCheckpoint feeds arbitrary bytes to the checkpoint reader: it
// must never panic, and whatever it accepts must round-trip.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(encoded(f, 3, stepTensors(3, 8), map[string]string{"k": "v"}))
	f.Add(encoded(f, 0, nil, nil))
	f.Add(encoded(f, 1, []Tensor{{Name: "s", Shape: []int{}, Data: []float32{1}}, {Name: "e", Shape: []int{0}, Data: []float32{}}}, nil))
	full := encoded(f, 9, stepTensors(9, 4), nil)
	f.Add(full[:len(full)-3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRoundTrip(t, b)
	})
}

// FuzzCheckpointHeader varies the JSON header and the data section
// separately, so the fuzzer explores header structure rather than length
// prefixes.
func FuzzCheckpointHeader(f *testing.F) {
	f.Add(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},`+okMeta+`}`, make([]byte, 8))
	f.Add(`{"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]},`+okMeta+`}`, make([]byte, 4))
	f.Add(`{"w":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]},`+okMeta+`}`, []byte{})
	f.Add(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,7]},`+okMeta+`}`, make([]byte, 8))
	f.Add(`{"__metadata__":{"easyscale.step":"-1","easyscale.order":"[]"}}`, []byte{})
	f.Add(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}`, make([]byte, 8))
	f.Fuzz(func(t *testing.T, header string, data []byte) {
		checkRoundTrip(t, file(header, data))
	})
}
