// Package workload ties a dataset to a network: it is what a job file's
// `task` names ("mnist", "charlm"). A Workload turns dataset indices into
// micro-batches (applying the logical worker's augmentation) and builds and
// initialises networks, all as pure functions of the job seed and the
// logical identity (EST id, step), never of the physical worker.
package workload

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
)

// Workload is a dataset plus a network family.
type Workload interface {
	// TrainLen and TestLen are the numbers of training and test samples.
	TrainLen() int
	TestLen() int
	// NewNet returns a network replica with zero parameters.
	NewNet() models.Net
	// InitNet initialises net's parameters from the job seed (Philox
	// streams with purpose Init, one per parameter).
	InitNet(net models.Net, seed uint64)
	// TrainBatch builds logical worker est's micro-batch at step from the
	// training samples at indices, applying its augmentation.
	TrainBatch(indices []int, seed uint64, est int, step int64) *models.MicroBatch
	// TestBatch builds a micro-batch of the test samples at indices.
	TestBatch(indices []int) *models.MicroBatch
	// Data is the digest of every file the workload read, in its fixed
	// load order: part of the job's identity (a resume or a joining
	// worker with other data is refused, naming the file).
	Data() data.Manifest
}

// New builds the workload a job file names, loading its data.
func New(spec *jobspec.Spec) (Workload, error) {
	switch spec.Task {
	case "mnist":
		return NewMNIST(spec)
	case "charlm":
		return NewCharLM(spec)
	}
	return nil, fmt.Errorf("task %q: no such workload; use mnist or charlm", spec.Task)
}

// initSource returns the Init stream of parameter i for seed.
func initSource(seed uint64) func(int) engine.Uniform {
	return func(i int) engine.Uniform {
		return rng.NewStream(rng.StreamKey{Seed: seed, Purpose: rng.Init, Sub: uint16(i)})
	}
}
