package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// littleEndian reports whether float32 slices already have the wire's byte
// order in memory, so that their bytes can be written and read in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// float32Bytes returns the bytes of v in memory order (a view, no copy).
// Only meaningful as wire bytes when littleEndian holds.
func float32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// AppendFloat32s appends the little-endian IEEE-754 bytes of v to dst
// (4·len(v) bytes) and returns the extended slice.
func AppendFloat32s(dst []byte, v []float32) []byte {
	if littleEndian {
		return append(dst, float32Bytes(v)...)
	}
	return appendFloat32sPortable(dst, v)
}

func appendFloat32sPortable(dst []byte, v []float32) []byte {
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

// DecodeFloat32s decodes little-endian IEEE-754 bytes into dst; src must be
// exactly 4·len(dst) bytes long. Bits are preserved exactly (NaN payloads
// included).
func DecodeFloat32s(dst []float32, src []byte) error {
	if len(src) != 4*len(dst) {
		return fmt.Errorf("wire: decoding %d float32 values from %d bytes: want %d bytes", len(dst), len(src), 4*len(dst))
	}
	if littleEndian {
		copy(float32Bytes(dst), src)
		return nil
	}
	decodeFloat32sPortable(dst, src)
	return nil
}

func decodeFloat32sPortable(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}
