package trainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/data/datatest"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// copyFile copies src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResumeWithOtherTrainingDataIsRefused: a job stopped, its training
// file changed by one byte, then resumed: the resume is refused with an
// error naming the file, and the state directory is untouched.
func TestResumeWithOtherTrainingDataIsRefused(t *testing.T) {
	opticks, err := datasets.LocateOpticks()
	if err != nil {
		t.Skipf("Opticks not available: %v", err)
	}
	cases := []struct {
		name, job, file string
		copyData        func(t *testing.T) string
		change          func(t *testing.T, path string)
	}{
		{name: "MNIST with one training label changed", job: mnistSmall, file: data.TrainLabelsFile,
			copyData: func(t *testing.T) string { return datatest.CopyMNIST(t) },
			change:   func(t *testing.T, path string) { datatest.ChangeFirstLabel(t, path) }},
		{name: "charlm with one byte of the text changed", job: charlmSmall, file: "Isaac.Newton-Opticks.txt",
			copyData: func(t *testing.T) string {
				dir := t.TempDir()
				copyFile(t, opticks, filepath.Join(dir, "Isaac.Newton-Opticks.txt"))
				return dir
			},
			change: func(t *testing.T, path string) {
				b, _ := os.ReadFile(path)
				b[1000] ^= 1
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			dataDir, state := tc.copyData(t), t.TempDir()
			spec, err := jobspec.Parse(tc.job)
			if err != nil {
				t.Fatal(err)
			}
			spec.Data.Dir = dataDir
			newWorkload := func() workload.Workload {
				wl, err := workload.New(spec)
				if err != nil {
					t.Fatal(err)
				}
				return wl
			}
			opts := Options{Spec: spec, Workload: newWorkload(), StateDir: state, StopAfter: 2, SkipEval: true}
			if _, err := Run(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
			// The same data resumes.
			opts.StopAfter, opts.Workload = 3, newWorkload()
			if _, err := Run(context.Background(), opts); err != nil {
				t.Fatalf("resuming with the same data: %v", err)
			}
			path := filepath.Join(dataDir, tc.file)
			tc.change(t, path)
			opts.StopAfter, opts.Workload = 4, newWorkload()
			_, err = Run(context.Background(), opts)
			var me *statedb.DataMismatchError
			if !errors.As(err, &me) || me.File != tc.file {
				t.Fatalf("resuming with %s changed: err = %v, want a DataMismatchError naming it", tc.file, err)
			}
			if testing.Verbose() {
				t.Log(err)
			}
			for _, want := range []string{path, state} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			db, err := statedb.OpenReadOnly(state)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if rows, err := db.Ledger(0, 1<<40); err != nil || len(rows) != 3 {
				t.Fatalf("ledger after the refusal: %d rows, %v; want the 3 steps of the first runs", len(rows), err)
			}
		})
	}
}
