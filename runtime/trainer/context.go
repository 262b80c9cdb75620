package trainer

import (
	"encoding/json"
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/models"
)

// ESTContext is everything that makes logical worker ID's computation
// independent of where it runs (EasyScale §3.2, "EST context"). The keys of
// its random streams are derived from (seed, ID, step), so they need no
// stored state; at a step boundary the generator position is 0.
type ESTContext struct {
	// ID is the logical worker id (data-parallel rank of the semantics).
	ID int
	// Cursor is the position in this logical worker's sampler shard.
	Cursor data.Cursor
	// Buffers are this logical worker's BatchNorm running statistics.
	Buffers []models.Named
}

// savedContext is the JSON form of the non-tensor part of a context, stored
// in the state database next to each checkpoint.
type savedContext struct {
	ID    int `json:"est"`
	Epoch int `json:"epoch"`
	Pos   int `json:"pos"`
}

// Marshal returns the JSON form of the context's cursor (buffers travel as tensors).
func (c *ESTContext) Marshal() []byte {
	b, _ := json.Marshal(savedContext{ID: c.ID, Epoch: c.Cursor.Epoch, Pos: c.Cursor.Pos})
	return b
}

// Unmarshal restores the cursor saved by Marshal.
func (c *ESTContext) Unmarshal(b []byte) error {
	var s savedContext
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding context of EST %d: %w", c.ID, err)
	}
	if s.ID != c.ID || s.Epoch < 0 || s.Pos < 0 {
		return fmt.Errorf("decoding context of EST %d: bad saved values %+v", c.ID, s)
	}
	c.Cursor = data.Cursor{Epoch: s.Epoch, Pos: s.Pos}
	return nil
}

// Clone returns a deep copy of c (cursor and buffer values).
func (c *ESTContext) Clone() *ESTContext {
	out := &ESTContext{ID: c.ID, Cursor: c.Cursor, Buffers: make([]models.Named, len(c.Buffers))}
	for i, b := range c.Buffers {
		t := *b.T
		t.Data = append([]float32(nil), b.T.Data...)
		t.Grad = nil
		out.Buffers[i] = models.Named{Name: b.Name, T: &t}
	}
	return out
}

// restoreFrom copies the cursor and buffer values of saved into c.
func (c *ESTContext) restoreFrom(saved *ESTContext) {
	c.Cursor = saved.Cursor
	for i, b := range saved.Buffers {
		copy(c.Buffers[i].T.Data, b.T.Data)
	}
}
