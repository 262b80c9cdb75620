package workload

import (
	"fmt"
	"path/filepath"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
)

// CharLM trains models.CharLM to predict the next character of Newton's
// Opticks (the public-domain text shipped with Go).
type CharLM struct {
	corpus *data.TextCorpus
	spec   *jobspec.Spec
	seqLen int
	files  data.Manifest
}

// opticksFile is the text's file name inside data.dir when that is set.
const opticksFile = "Isaac.Newton-Opticks.txt"

// NewCharLM loads the corpus: data.dir/Isaac.Newton-Opticks.txt when the
// job sets data.dir, else the copy in the Go installation.
func NewCharLM(spec *jobspec.Spec) (*CharLM, error) {
	path := filepath.Join(spec.Data.Dir, opticksFile)
	if spec.Data.Dir == "" {
		p, err := datasets.LocateOpticks()
		if err != nil {
			return nil, fmt.Errorf("locating the Opticks text: %w", err)
		}
		path = p
	}
	files, err := data.HashFiles(path)
	if err != nil {
		return nil, fmt.Errorf("hashing the text corpus: %w", err)
	}
	c, err := data.LoadText(path)
	if err != nil {
		return nil, err
	}
	w := &CharLM{corpus: c, spec: spec, seqLen: spec.Data.SeqLen, files: files}
	if w.TrainLen() < spec.LogicalWorkers || w.TestLen() < 1 {
		return nil, fmt.Errorf("data.seq_len %d leaves too few windows in %s; lower it", w.seqLen, path)
	}
	return w, nil
}

// Data implements Workload: the one text file.
func (c *CharLM) Data() data.Manifest { return c.files }

// TrainLen implements Workload: the number of training windows.
func (c *CharLM) TrainLen() int { return data.NumWindows(c.corpus.Train, c.seqLen) }

// TestLen implements Workload: the number of test windows.
func (c *CharLM) TestLen() int { return data.NumWindows(c.corpus.Test, c.seqLen) }

// NewNet implements Workload.
func (c *CharLM) NewNet() models.Net {
	m := c.spec.Model
	return models.NewCharLM(c.corpus.VocabSize(), c.seqLen, m.DModel, m.Heads, m.Layers, m.Dropout)
}

// InitNet implements Workload.
func (c *CharLM) InitNet(net models.Net, seed uint64) {
	net.(*models.CharLM).Init(initSource(seed))
}

// TrainBatch implements Workload; text windows get no augmentation.
func (c *CharLM) TrainBatch(indices []int, _ uint64, _ int, _ int64) *models.MicroBatch {
	return c.batch(c.corpus.Train, indices)
}

// TestBatch implements Workload.
func (c *CharLM) TestBatch(indices []int) *models.MicroBatch {
	return c.batch(c.corpus.Test, indices)
}

func (c *CharLM) batch(ids []int32, indices []int) *models.MicroBatch {
	mb := &models.MicroBatch{Batch: len(indices), SeqLen: c.seqLen,
		IDs: make([]int32, 0, len(indices)*c.seqLen), Targets: make([]int32, 0, len(indices)*c.seqLen)}
	for _, i := range indices {
		in, tg := data.Window(ids, c.seqLen, i)
		mb.IDs = append(mb.IDs, in...)
		mb.Targets = append(mb.Targets, tg...)
	}
	return mb
}
