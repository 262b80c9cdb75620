package workload

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
)

// MNIST trains models.LeNet on the MNIST digits with random-shift
// augmentation.
type MNIST struct {
	ds       *data.MNIST
	spec     *jobspec.Spec
	channels [2]int
	files    data.Manifest
}

// NewMNIST locates and loads MNIST (datasets.LocateMNIST with the job's
// data.dir) for spec, and hashes its four files (data.HashFiles).
func NewMNIST(spec *jobspec.Spec) (*MNIST, error) {
	dir, err := datasets.LocateMNIST(spec.Data.Dir)
	if err != nil {
		return nil, fmt.Errorf("locating MNIST: %w", err)
	}
	files, err := data.HashFiles(data.MNISTPaths(dir)...)
	if err != nil {
		return nil, fmt.Errorf("hashing MNIST: %w", err)
	}
	ds, err := data.LoadMNIST(dir)
	if err != nil {
		return nil, fmt.Errorf("loading MNIST: %w", err)
	}
	return &MNIST{ds: ds, spec: spec, channels: [2]int{spec.Model.Channels[0], spec.Model.Channels[1]}, files: files}, nil
}

// Data implements Workload: the four MNIST files (train images, train
// labels, test images, test labels).
func (m *MNIST) Data() data.Manifest { return m.files }

// TrainLen implements Workload (60,000).
func (m *MNIST) TrainLen() int { return m.ds.Train.N }

// TestLen implements Workload (10,000).
func (m *MNIST) TestLen() int { return m.ds.Test.N }

// NewNet implements Workload.
func (m *MNIST) NewNet() models.Net {
	return models.NewLeNet(m.channels[0], m.channels[1], m.spec.Model.Hidden, m.spec.Model.Dropout)
}

// InitNet implements Workload.
func (m *MNIST) InitNet(net models.Net, seed uint64) {
	net.(*models.LeNet).Init(initSource(seed))
}

// TrainBatch implements Workload: normalised images, each shifted by up to
// data.augment_shift pixels with the stream (seed, est, step, Augment, k)
// of sample k of the micro-batch.
func (m *MNIST) TrainBatch(indices []int, seed uint64, est int, step int64) *models.MicroBatch {
	return m.batch(&m.ds.Train, indices, func(k int) *rng.Stream {
		if m.spec.Data.AugmentShift == 0 {
			return nil
		}
		return rng.NewStream(rng.StreamKey{Seed: seed, Worker: uint32(est), Step: uint64(step), Purpose: rng.Augment, Sub: uint16(k)})
	})
}

// TestBatch implements Workload (no augmentation).
func (m *MNIST) TestBatch(indices []int) *models.MicroBatch {
	return m.batch(&m.ds.Test, indices, func(int) *rng.Stream { return nil })
}

func (m *MNIST) batch(split *data.Split, indices []int, aug func(k int) *rng.Stream) *models.MicroBatch {
	side := split.Rows * split.Cols
	x := engine.NewTensor(len(indices), 1, split.Rows, split.Cols)
	y := make([]int32, len(indices))
	tmp := make([]float32, side)
	for k, i := range indices {
		dst := x.Data[k*side : (k+1)*side]
		if s := aug(k); s != nil {
			data.Normalize(tmp, split.Image(i))
			data.RandomShift(dst, tmp, split.Rows, split.Cols, m.spec.Data.AugmentShift, s)
		} else {
			data.Normalize(dst, split.Image(i))
		}
		y[k] = int32(split.Labels[i])
	}
	return &models.MicroBatch{X: x, Targets: y, Batch: len(indices)}
}
