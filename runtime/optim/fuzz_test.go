package optim

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// FuzzLoadState feeds LoadState state read from a checkpoint file (outside
// input): any names and values must give an error or a state that reads
// back identically, never a panic.
func FuzzLoadState(f *testing.F) {
	f.Add("step", uint8(1), []byte{0, 0, 0x80, 0x3f}, "exp_avg.0", uint8(2))
	f.Add("exp_avg.0", uint8(2), []byte{1, 2, 3, 4, 5, 6, 7, 8}, "exp_avg_sq.0", uint8(2))
	f.Add("momentum_buffer.0", uint8(2), []byte{0, 0, 0xc0, 0x7f}, "step", uint8(0))
	f.Fuzz(func(t *testing.T, name1 string, n1 uint8, raw []byte, name2 string, n2 uint8) {
		vals := make([]float32, len(raw)/4)
		for i := range vals {
			vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		take := func(n uint8) []float32 { return vals[:min(int(n), len(vals))] }
		params := []*engine.Tensor{engine.NewParam(2)}
		for _, opt := range []Optimizer{NewAdamW(params, 0.9, 0.999, 1e-8, 0), NewSGD(params, 0.9, 0, false)} {
			st := opt.State()
			// overwrite or add the fuzzed tensors
			for _, ns := range []NamedSlice{{name1, take(n1)}, {name2, take(n2)}} {
				replaced := false
				for i := range st {
					if st[i].Name == ns.Name {
						st[i].Data, replaced = ns.Data, true
					}
				}
				if !replaced {
					st = append(st, ns)
				}
			}
			if err := opt.LoadState(st); err != nil {
				continue
			}
			back := opt.State()
			for i := range back {
				for j, v := range back[i].Data {
					if math.Float32bits(v) != math.Float32bits(findState(st, back[i].Name)[j]) {
						t.Fatalf("%s[%d] reads back %v after a successful load", back[i].Name, j, v)
					}
				}
			}
		}
	})
}

func findState(s []NamedSlice, name string) []float32 {
	for _, ns := range s {
		if ns.Name == name {
			return ns.Data
		}
	}
	return nil
}
