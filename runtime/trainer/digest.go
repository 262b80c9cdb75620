package trainer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// Digest returns "sha256:<hex>" over tensors in order, and a short digest of
// each tensor. For each tensor the hash covers its name, its rank and
// dimensions (uint32 little-endian) and its values (IEEE-754 float32 bits,
// little-endian), so two models have the same digest exactly when every
// value is bitwise equal. The per-tensor digest is the first 16 hex digits
// of sha256 over the same bytes of that tensor alone.
func Digest(tensors []models.Named) (string, []statedb.TensorDigest) {
	all := sha256.New()
	per := make([]statedb.TensorDigest, len(tensors))
	var buf []byte
	for i, t := range tensors {
		buf = buf[:0]
		buf = append(buf, t.Name...)
		buf = append(buf, 0)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(t.T.Shape)))
		for _, d := range t.T.Shape {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(d))
		}
		for _, v := range t.T.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		all.Write(buf)
		one := sha256.Sum256(buf)
		per[i] = statedb.TensorDigest{Name: t.Name, Digest: hex.EncodeToString(one[:8])}
	}
	return "sha256:" + hex.EncodeToString(all.Sum(nil)), per
}

// hashIndices returns a short hash of the sample indices one logical worker
// consumed in one step (sha256 of the uint32 LE indices, 16 hex digits).
func hashIndices(idx []int) string {
	b := make([]byte, 0, 4*len(idx))
	for _, i := range idx {
		b = binary.LittleEndian.AppendUint32(b, uint32(i))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}
