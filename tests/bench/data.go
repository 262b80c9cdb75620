package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
)

func init() { register("data", benchData) }

// dataRuns is how many times the data suite hashes MNIST each way; it
// reports the fastest run.
const dataRuns = 5

// benchData measures the cost of the training data's identity: hashing
// the four MNIST files (data.HashFiles, sha256 over 11.6 MB) the first
// time, in a fresh copy with no digest cache (the files are in the page
// cache: it measures the hash, not the disk), and again when the cache
// next to the data hits (only stat calls and one small JSON file). It
// also checks that the cached call read no file bytes.
func benchData() ([]figure, error) {
	src, err := datasets.LocateMNIST("")
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "data-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	os.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "user-cache"))
	first, cached := time.Duration(1<<62), time.Duration(1<<62)
	var size int64
	for run := range dataRuns {
		dir := filepath.Join(tmp, fmt.Sprint(run))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		for _, f := range data.MNISTFiles {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return nil, err
			}
		}
		paths := data.MNISTPaths(dir)
		before := data.HashedBytes()
		t0 := time.Now()
		if _, err := data.HashFiles(paths...); err != nil {
			return nil, err
		}
		first = min(first, time.Since(t0))
		size = data.HashedBytes() - before
		before = data.HashedBytes()
		t0 = time.Now()
		if _, err := data.HashFiles(paths...); err != nil {
			return nil, err
		}
		cached = min(cached, time.Since(t0))
		if n := data.HashedBytes() - before; n != 0 {
			return nil, fmt.Errorf("the cached hash read %d bytes, want 0", n)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return []figure{
		{Name: "mnist_data_sha256_ms_first", Value: ms(first), Unit: "ms"},
		{Name: "mnist_data_sha256_mb_per_s", Value: float64(size) / 1e6 / first.Seconds(), Unit: "MB/s"},
		{Name: "mnist_data_sha256_ms_cached", Value: ms(cached), Unit: "ms"},
	}, nil
}
