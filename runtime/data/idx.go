package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// IDX element type codes (byte 2 of the magic), from the MNIST page
// (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"). Only unsigned
// bytes are supported: they are what every MNIST-family file holds.
const IDXUnsignedByte = 0x08

// MNIST magic numbers: unsigned bytes with 3 dimensions (images) or 1
// dimension (labels).
const (
	MagicImages = 0x00000803
	MagicLabels = 0x00000801
)

// DefaultMaxIDXBytes is the payload cap ReadIDX applies when given a limit
// <= 0: 256 MiB, five times the MNIST training images (47,040,000 bytes).
const DefaultMaxIDXBytes = 256 << 20

// maxIDXDims bounds the dimension count a header may declare.
const maxIDXDims = 4

// IDX is one decoded IDX file of unsigned bytes.
type IDX struct {
	Dims []int  // sizes, outermost first: [count] for labels, [count, rows, cols] for images
	Data []byte // row-major payload, len = product of Dims
}

// Magic returns the file's magic number: 0x0000_08_NN for NN dimensions.
func (x *IDX) Magic() uint32 { return IDXUnsignedByte<<8 | uint32(len(x.Dims)) }

// IDXError is a malformed IDX header or payload. Field names the part that is
// wrong: "magic", "type", "dims", "count", "rows", "cols", "dim3",
// "payload" or "trailing"; Offset is its byte offset in the decompressed
// stream.
type IDXError struct {
	Field  string
	Offset int64
	Msg    string
	Err    error // underlying read error, if any (e.g. io.ErrUnexpectedEOF)
}

// Error formats the error as "idx: <field> at byte <offset>: <msg>[: <err>]".
func (e *IDXError) Error() string {
	s := "idx: " + e.Field + " at byte " + strconv.FormatInt(e.Offset, 10) + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying read error.
func (e *IDXError) Unwrap() error { return e.Err }

// dimField names dimension i of an ndims-dimensional file.
func dimField(i int) string {
	switch i {
	case 0:
		return "count"
	case 1:
		return "rows"
	case 2:
		return "cols"
	}
	return "dim" + strconv.Itoa(i)
}

// ReadIDX decodes one uncompressed IDX stream of unsigned bytes: a
// big-endian magic (two zero bytes, type 0x08, dimension count 1..4), one
// big-endian uint32 per dimension, then the row-major payload, and nothing
// after it. A payload larger than limit bytes (DefaultMaxIDXBytes when
// limit <= 0) is refused before anything is allocated, and the payload buffer
// grows only as data actually arrives, so a corrupt header cannot make it
// allocate gigabytes. Errors are *IDXError naming the bad field.
func ReadIDX(r io.Reader, limit int64) (*IDX, error) {
	if limit <= 0 {
		limit = DefaultMaxIDXBytes
	}
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, &IDXError{Field: "magic", Offset: 0, Msg: "cannot read the 4-byte magic", Err: eofToUnexpected(err)}
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, &IDXError{Field: "magic", Offset: 0, Msg: fmt.Sprintf("first two bytes are %#02x %#02x, want 0 0 (not an IDX file?)", magic[0], magic[1])}
	}
	if magic[2] != IDXUnsignedByte {
		return nil, &IDXError{Field: "type", Offset: 2, Msg: fmt.Sprintf("element type %#02x is not supported, want %#02x (unsigned byte)", magic[2], IDXUnsignedByte)}
	}
	nd := int(magic[3])
	if nd < 1 || nd > maxIDXDims {
		return nil, &IDXError{Field: "dims", Offset: 3, Msg: fmt.Sprintf("%d dimensions, want 1 to %d", nd, maxIDXDims)}
	}
	hdr := make([]byte, 4*nd)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, &IDXError{Field: dimField(0), Offset: 4, Msg: fmt.Sprintf("header of %d dimensions is truncated", nd), Err: eofToUnexpected(err)}
	}
	dims := make([]int, nd)
	size := int64(1)
	for i := range dims {
		d := int64(binary.BigEndian.Uint32(hdr[4*i:]))
		off := int64(4 + 4*i)
		if d == 0 && i > 0 {
			return nil, &IDXError{Field: dimField(i), Offset: off, Msg: "size 0"}
		}
		if size > 0 && d > limit/size {
			return nil, &IDXError{Field: dimField(i), Offset: off, Msg: fmt.Sprintf("size %d makes the payload exceed the %d-byte limit", d, limit)}
		}
		size *= d
		dims[i] = int(d)
	}
	payloadOff := int64(4 + 4*nd)
	data, err := readPayload(r, size)
	if err != nil {
		return nil, &IDXError{Field: "payload", Offset: payloadOff + int64(len(data)), Msg: fmt.Sprintf("have %d of %d bytes", len(data), size), Err: eofToUnexpected(err)}
	}
	var one [1]byte
	if n, err := r.Read(one[:]); n > 0 || (err != nil && err != io.EOF) {
		if err == nil {
			return nil, &IDXError{Field: "trailing", Offset: payloadOff + size, Msg: "data after the payload"}
		}
		return nil, &IDXError{Field: "trailing", Offset: payloadOff + size, Msg: "error after the payload", Err: err}
	}
	return &IDX{Dims: dims, Data: data}, nil
}

// readPayload reads exactly size bytes, growing its buffer in steps so the
// allocation tracks the bytes that exist. On error it returns what it read.
func readPayload(r io.Reader, size int64) ([]byte, error) {
	const step = 4 << 20
	buf := make([]byte, 0, min(size, step))
	for int64(len(buf)) < size {
		if len(buf) == cap(buf) {
			nc := min(size, max(int64(2*cap(buf)), step))
			nb := make([]byte, len(buf), nc)
			copy(nb, buf)
			buf = nb
		}
		want := min(size, int64(cap(buf)))
		n, err := io.ReadFull(r, buf[len(buf):want])
		buf = buf[:len(buf)+n]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

func eofToUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadIDXFile reads the IDX file at path, decompressing it first when it
// starts with the gzip magic (1f 8b), as the canonical MNIST .gz files do.
// limit is as for ReadIDX. Errors name the path and wrap *IDXError or the
// gzip/os error.
func ReadIDXFile(path string, limit int64) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening IDX file: %w", err)
	}
	defer f.Close()
	x, err := readMaybeGzip(f, limit)
	if err != nil {
		return nil, fmt.Errorf("reading IDX file %s: %w", path, err)
	}
	return x, nil
}

// readMaybeGzip decodes an IDX stream that may be gzip-compressed.
func readMaybeGzip(r io.Reader, limit int64) (*IDX, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, err := br.Peek(2)
	if err == nil && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("opening gzip stream: %w", err)
		}
		defer zr.Close()
		return ReadIDX(bufio.NewReaderSize(zr, 1<<16), limit)
	}
	return ReadIDX(br, limit)
}
