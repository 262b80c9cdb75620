package engine

import "fmt"

// Embedding looks up rows of table (torch.nn.functional.embedding).
//
// Shapes: table [V,D]; the result is [len(ids), D] with row i =
// table[ids[i]]. Backward adds row i's gradient to table row ids[i] in
// increasing i (repeated ids accumulate in that order). It panics when an id
// is outside [0,V).
func (tp *Tape) Embedding(ids []int32, table *Tensor) *Tensor {
	mustRank("Embedding", "table", table, 2)
	v, d := table.Shape[0], table.Shape[1]
	for i, id := range ids {
		if id < 0 || int(id) >= v {
			panic(fmt.Sprintf("engine: Embedding: id %d at position %d outside vocabulary [0,%d)", id, i, v))
		}
	}
	rec := tp.recording(table)
	y := tp.output(rec, len(ids), d)
	for i, id := range ids {
		copy(y.Data[i*d:(i+1)*d], table.Data[int(id)*d:])
	}
	if !rec {
		return y
	}
	ids = append([]int32(nil), ids...) // the caller may reuse its slice
	tp.record(func() {
		for i, id := range ids {
			row := table.Grad[int(id)*d : (int(id)+1)*d]
			for j, g := range y.Grad[i*d : (i+1)*d] {
				row[j] += g
			}
		}
	})
	return y
}
