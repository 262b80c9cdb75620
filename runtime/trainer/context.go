package trainer

import (
	"encoding/json"
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/models"
)

// estContext is everything that makes logical worker ID's computation
// independent of where it runs (EasyScale §3.2, "EST context").
type estContext struct {
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

func (c *estContext) marshal() []byte {
	b, _ := json.Marshal(savedContext{ID: c.ID, Epoch: c.Cursor.Epoch, Pos: c.Cursor.Pos})
	return b
}

func (c *estContext) unmarshal(b []byte) error {
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
