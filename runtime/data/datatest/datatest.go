// Package datatest makes copies of the real data sets, intact or with one
// sample changed, for tests of data provenance (a resume or a joining
// worker with other data must be refused).
package datatest

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
)

// CopyMNIST copies the four MNIST files (found by datasets.LocateMNIST) into a
// new temporary directory and returns it; t is skipped when MNIST is not
// available.
func CopyMNIST(t testing.TB) string {
	t.Helper()
	src, err := datasets.LocateMNIST("")
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	dir := t.TempDir()
	for _, f := range data.MNISTFiles {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ChangeFirstLabel rewrites the gzip IDX label file at path with the label
// of sample 0 moved to the next digit: still a valid file, one byte of
// training data different. It returns path.
func ChangeFirstLabel(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil || len(raw) < 9 {
		t.Fatalf("reading %s: %d bytes, %v", path, len(raw), err)
	}
	raw[8] = (raw[8] + 1) % 10 // the first label, after the 8-byte IDX header
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// MNISTWithOneLabelChanged is CopyMNIST with the first training label
// changed (ChangeFirstLabel on its train-labels file).
func MNISTWithOneLabelChanged(t testing.TB) string {
	t.Helper()
	dir := CopyMNIST(t)
	ChangeFirstLabel(t, filepath.Join(dir, data.TrainLabelsFile))
	return dir
}
