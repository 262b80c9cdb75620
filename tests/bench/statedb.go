package main

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

func init() { register("statedb", benchStatedb) }

// statedbSteps is how many ledger commits the statedb suite times.
const statedbSteps = 500

// benchStatedb times statedbSteps AppendLedger commits (one step's row each,
// WAL, synchronous=NORMAL) on a fresh state directory under $TMPDIR and
// reports the median and 99th percentile in milliseconds. Goal: p50 < 1 ms.
func benchStatedb() ([]figure, error) {
	dir, err := os.MkdirTemp("", "statedb-bench")
	if err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	defer os.RemoveAll(dir)
	db, err := statedb.Open(dir)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.InitJob(statedb.Job{ID: "bench", Name: "bench", LogicalWorkers: 8}); err != nil {
		return nil, err
	}
	durs := make([]float64, statedbSteps)
	for i := range durs {
		e := statedb.LedgerEntry{
			Step: int64(i), Digest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			TensorDigests: []statedb.TensorDigest{{Name: "conv1.weight", Digest: "9f86d081"}, {Name: "fc.bias", Digest: "2cd15d6c"}},
			Loss:          0.25, WallSeconds: 0.05, Workers: 2, Placement: "0-3|4-7", SamplesHash: "a1b2c3d4",
		}
		start := time.Now()
		if err := db.AppendLedger(e); err != nil {
			return nil, err
		}
		durs[i] = float64(time.Since(start)) / float64(time.Millisecond)
	}
	slices.Sort(durs)
	return []figure{
		{Name: "statedb_commit_ms", Value: durs[len(durs)/2], Unit: "ms"},
		{Name: "statedb_commit_p99_ms", Value: durs[len(durs)*99/100], Unit: "ms"},
	}, nil
}
