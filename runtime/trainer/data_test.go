package trainer

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/data"
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

// changeOneLabel rewrites the gzip label file at path with the label of
// sample 0 moved to the next digit: still a valid file, one byte of
// training data different.
func changeOneLabel(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	raw[8] = (raw[8] + 1) % 10 // after the 8-byte IDX header of a label file
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw)
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResumeWithOtherTrainingDataIsRefused: a job stopped, its training
// file changed by one byte, then resumed: the resume is refused with an
// error naming the file, and the state directory is untouched.
func TestResumeWithOtherTrainingDataIsRefused(t *testing.T) {
	mnistDir, err := data.LocateMNIST("")
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	opticks, err := data.LocateOpticks()
	if err != nil {
		t.Skipf("Opticks not available: %v", err)
	}
	cases := []struct {
		name, job, file string
		copyData        func(t *testing.T, dir string)
		change          func(t *testing.T, path string)
	}{
		{name: "MNIST with one training label changed", job: mnistSmall, file: data.TrainLabelsFile,
			copyData: func(t *testing.T, dir string) {
				for _, f := range data.MNISTFiles {
					copyFile(t, filepath.Join(mnistDir, f), filepath.Join(dir, f))
				}
			}, change: changeOneLabel},
		{name: "charlm with one byte of the text changed", job: charlmSmall, file: "Isaac.Newton-Opticks.txt",
			copyData: func(t *testing.T, dir string) { copyFile(t, opticks, filepath.Join(dir, "Isaac.Newton-Opticks.txt")) },
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
			dataDir, state := t.TempDir(), t.TempDir()
			tc.copyData(t, dataDir)
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
