package main

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// TestIssue60JobsAreTheDescribedWorkload checks what issue60Jobs promises:
// the same draw for the same arguments, 60 jobs in submission order
// within 2,400 s, sizes and durations in range, the d1 share pinned to a
// type that holds the job, and each range's columns.
func TestIssue60JobsAreTheDescribedWorkload(t *testing.T) {
	caps := map[string]int{"v100": 32, "p100": 16, "t4": 16}
	for _, c := range []struct {
		rng        string
		d1         float64
		lw, lo, hi func(g int) int
		wantAllD1  bool
		wantNoneD1 bool
	}{
		{"paper", 0, func(g int) int { return g }, func(int) int { return 1 }, func(g int) int { return g }, false, true},
		{"wide", 1, func(g int) int { return 2 * g }, func(int) int { return 1 }, func(g int) int { return 2 * g }, true, false},
		{"default", 0.4, func(int) int { return 0 }, func(int) int { return 0 }, func(int) int { return 0 }, false, false},
	} {
		t.Run(c.rng, func(t *testing.T) {
			jobs := issue60Jobs(7, c.rng, c.d1)
			if again := issue60Jobs(7, c.rng, c.d1); !reflect.DeepEqual(jobs, again) {
				t.Fatal("two draws with the same seed differ")
			}
			if other := issue60Jobs(8, c.rng, c.d1); reflect.DeepEqual(jobs, other) {
				t.Fatal("seeds 7 and 8 drew the same workload")
			}
			if len(jobs) != 60 {
				t.Fatalf("%d jobs, want 60", len(jobs))
			}
			if !slices.IsSortedFunc(jobs, func(a, b trace.Job) int { return int(a.Submit - b.Submit) }) {
				t.Error("jobs are not in submission order")
			}
			d1 := 0
			for _, j := range jobs {
				if j.Submit < 0 || j.Submit >= 2400 || j.Duration < 120 || j.Duration > 20000 || !slices.Contains([]int{1, 2, 4, 8, 16, 32}, j.GPUs) {
					t.Errorf("%s: submit %d, duration %d, %d GPUs out of range", j.ID, j.Submit, j.Duration, j.GPUs)
				}
				if j.LogicalWorkers != c.lw(j.GPUs) || j.MinGPUs != c.lo(j.GPUs) || j.MaxGPUs != c.hi(j.GPUs) {
					t.Errorf("%s (%d GPUs): range %d / %d..%d", j.ID, j.GPUs, j.LogicalWorkers, j.MinGPUs, j.MaxGPUs)
				}
				switch j.Determinism {
				case "d1":
					d1++
					if caps[j.GPUType] < j.GPUs {
						t.Errorf("%s: d1 job of %d GPUs pinned to %q", j.ID, j.GPUs, j.GPUType)
					}
				case "d2":
					if j.GPUType != "" {
						t.Errorf("%s: d2 job pinned to %q", j.ID, j.GPUType)
					}
				default:
					t.Errorf("%s: determinism %q", j.ID, j.Determinism)
				}
			}
			if c.wantAllD1 && d1 != 60 || c.wantNoneD1 && d1 != 0 || !c.wantAllD1 && !c.wantNoneD1 && (d1 < 12 || d1 > 36) {
				t.Errorf("%d d1 jobs at share %v", d1, c.d1)
			}
		})
	}
}

// TestIssue60WorkloadsRoundTripThroughAJobTable: what
// $EASYSCALE_ISSUE60_DIR writes is what easyscale-simulate reads back.
func TestIssue60WorkloadsRoundTripThroughAJobTable(t *testing.T) {
	jobs := issue60Jobs(3, "paper", 0.4)
	path := filepath.Join(t.TempDir(), "w.csv")
	if err := writeIssue60(path, jobs); err != nil {
		t.Fatal(err)
	}
	back, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, jobs) {
		t.Fatalf("read back differs:\n got %+v\nwant %+v", back[:2], jobs[:2])
	}
}
