// Package wire is the framing of every message EasyScale processes exchange
// over TCP: the coordinator's control messages, the join handshake and the
// all-reduce chunks of runtime/collective.
//
// A frame is a 9-byte header followed by the payload:
//
//	offset  size  field
//	0       3     magic "ESW"
//	3       1     format version (Version)
//	4       1     message type (Type)
//	5       4     payload length in bytes, uint32 little-endian
//	9       n     payload
//
// Every read checks the header before it allocates: a wrong magic or version
// is a *MagicError or *VersionError naming what was expected, and a length
// above the reader's cap is a *SizeError, so a peer cannot make a reader
// allocate more than the cap. Control payloads are JSON (WriteJSON,
// ReadJSON, capped at MaxControl); tensor payloads are float32 slices in
// little-endian byte order, written and read without per-element work on
// little-endian machines (the bytes of the slice are the payload) and by an
// explicit encode/decode loop on big-endian ones.
//
// Conn wraps a net.Conn with a per-call I/O timeout, so that a stalled peer
// turns into a timeout error instead of a hang.
package wire
