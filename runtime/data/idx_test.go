package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// idxBytes builds an IDX stream of unsigned bytes with the given dims and
// payload.
func idxBytes(dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, IDXUnsignedByte, byte(len(dims))})
	for _, d := range dims {
		_ = binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(payload)
	return b.Bytes()
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestReadIDXDecodesValidFiles(t *testing.T) {
	cases := []struct {
		name  string
		in    []byte
		dims  []int
		magic uint32
	}{
		{"a label file of three labels", idxBytes([]uint32{3}, []byte{7, 2, 1}), []int{3}, MagicLabels},
		{"an image file of two 2x3 images", idxBytes([]uint32{2, 2, 3}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), []int{2, 2, 3}, MagicImages},
		{"an empty label file", idxBytes([]uint32{0}, nil), []int{0}, MagicLabels},
		{"an empty image file with large image dims", idxBytes([]uint32{0, 28, 0xFFFFFFFF}, nil), []int{0, 28, 0xFFFFFFFF}, MagicImages},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ReadIDX(bytes.NewReader(tc.in), 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(x.Dims) != len(tc.dims) {
				t.Fatalf("dims %v, want %v", x.Dims, tc.dims)
			}
			for i := range x.Dims {
				if x.Dims[i] != tc.dims[i] {
					t.Fatalf("dims %v, want %v", x.Dims, tc.dims)
				}
			}
			if x.Magic() != tc.magic {
				t.Fatalf("magic %#x, want %#x", x.Magic(), tc.magic)
			}
			hdr := 4 + 4*len(tc.dims)
			if !bytes.Equal(x.Data, tc.in[hdr:]) {
				t.Fatalf("payload %v, want %v", x.Data, tc.in[hdr:])
			}
		})
	}
}

func TestReadIDXRejectsCorruptInput(t *testing.T) {
	valid := idxBytes([]uint32{2, 2, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	cases := []struct {
		name    string
		in      []byte
		limit   int64
		field   string
		wantEOF bool
	}{
		{"an empty stream has no magic", nil, 0, "magic", true},
		{"a two-byte stream has a truncated magic", []byte{0, 0}, 0, "magic", true},
		{"a nonzero first magic byte is not IDX", []byte{1, 0, 8, 1, 0, 0, 0, 0}, 0, "magic", false},
		{"a gzip stream passed without decompressing is not IDX", gzipBytes(t, valid), 0, "magic", false},
		{"a float element type is unsupported", []byte{0, 0, 0x0d, 1, 0, 0, 0, 0}, 0, "type", false},
		{"zero dimensions are rejected", []byte{0, 0, 8, 0}, 0, "dims", false},
		{"nine dimensions are rejected", []byte{0, 0, 8, 9}, 0, "dims", false},
		{"a header cut inside the dimensions is truncated", valid[:9], 0, "count", true},
		{"a zero row count is rejected", idxBytes([]uint32{1, 0, 28}, nil), 0, "rows", false},
		{"a huge count is refused before allocating", idxBytes([]uint32{0xFFFFFFFF, 28, 28}, nil), 0, "count", false},
		{"a product of dims over the limit names the dim that crosses it", idxBytes([]uint32{60000, 28, 28 * 1000}, nil), 0, "cols", false},
		{"a huge column count is refused by a small limit", idxBytes([]uint32{2, 2, 1000}, nil), 100, "cols", false},
		{"a count over the limit is named", idxBytes([]uint32{1000}, nil), 10, "count", false},
		{"a truncated payload is reported", valid[:len(valid)-1], 0, "payload", true},
		{"bytes after the payload are reported", append(bytes.Clone(valid), 0), 0, "trailing", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadIDX(bytes.NewReader(tc.in), tc.limit)
			var ie *IDXError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v, want *IDXError", err)
			}
			if ie.Field != tc.field {
				t.Fatalf("field %q (%v), want %q", ie.Field, err, tc.field)
			}
			if got := errors.Is(err, io.ErrUnexpectedEOF); got != tc.wantEOF {
				t.Fatalf("errors.Is(%v, io.ErrUnexpectedEOF) = %v, want %v", err, got, tc.wantEOF)
			}
		})
	}
}

// A header announcing the largest payload the limit allows, followed by no
// data, must fail without allocating anywhere near that much.
func TestReadIDXAllocatesOnlyWhatArrives(t *testing.T) {
	in := idxBytes([]uint32{200, 1000, 1000}, make([]byte, 10))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 5 {
		if _, err := ReadIDX(bytes.NewReader(in), 1<<30); err == nil {
			t.Fatal("truncated 200 MB payload accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("5 reads of a truncated header claiming 200 MB allocated %d bytes", grew)
	}
}

func TestReadIDXFileHandlesPlainAndGzip(t *testing.T) {
	raw := idxBytes([]uint32{4}, []byte{9, 8, 7, 6})
	dir := t.TempDir()
	plain := filepath.Join(dir, "labels-idx1-ubyte")
	zipped := filepath.Join(dir, "labels-idx1-ubyte.gz")
	if err := os.WriteFile(plain, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zipped, gzipBytes(t, raw), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, zipped} {
		x, err := ReadIDXFile(p, 0)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !bytes.Equal(x.Data, raw[8:]) {
			t.Fatalf("%s: payload %v", p, x.Data)
		}
	}
	t.Run("a corrupt gzip trailer is an error", func(t *testing.T) {
		z := gzipBytes(t, raw)
		z[len(z)-5] ^= 0xff // CRC-32 of the member
		bad := filepath.Join(dir, "bad.gz")
		if err := os.WriteFile(bad, z, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadIDXFile(bad, 0); err == nil {
			t.Fatal("corrupt gzip accepted")
		}
	})
	t.Run("a missing file error names the path", func(t *testing.T) {
		_, err := ReadIDXFile(filepath.Join(dir, "nope.gz"), 0)
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("error %v, want os.ErrNotExist", err)
		}
	})
}

// FuzzReadIDX checks that no input makes ReadIDX panic or allocate past its
// limit, and that every accepted input round-trips: re-encoding the decoded
// dims and payload gives the input back.
func FuzzReadIDX(f *testing.F) {
	f.Add(idxBytes([]uint32{3}, []byte{7, 2, 1}))
	f.Add(idxBytes([]uint32{1, 2, 2}, []byte{0, 255, 1, 2}))
	f.Add(idxBytes([]uint32{0xFFFFFFFF, 28, 28}, nil))
	f.Add([]byte{0, 0, 8, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 42})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 1 << 16
		x, err := ReadIDX(bytes.NewReader(in), limit)
		if err != nil {
			var ie *IDXError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is not an *IDXError", err)
			}
			return
		}
		if len(x.Data) > limit {
			t.Fatalf("payload of %d bytes beyond the %d limit", len(x.Data), limit)
		}
		dims := make([]uint32, len(x.Dims))
		for i, d := range x.Dims {
			dims[i] = uint32(d)
		}
		if out := idxBytes(dims, x.Data); !bytes.Equal(out, in) {
			t.Fatalf("round trip gave %x, input %x", out, in)
		}
	})
}
