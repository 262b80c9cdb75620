package statedb

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// openTest opens a writer on a fresh temporary state directory and closes
// it when the test ends.
func openTest(t testing.TB, opts Options) *DB {
	t.Helper()
	db, err := OpenWith(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("OpenWith: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// digest returns a valid ledger digest derived from s.
func digest(s string) string { return fmt.Sprintf("%s%x", DigestPrefix, []byte(s)) }

func entry(step int64, d string) LedgerEntry {
	return LedgerEntry{
		Step: step, Digest: digest(d), Loss: 2.5 / float64(step+1), WallSeconds: 0.125,
		Workers: 2, Placement: "0-3|4-7", SamplesHash: "s" + d,
		TensorDigests: []TensorDigest{{"fc1.weight", "aa" + d}, {"fc1.bias", "bb"}},
		Time:          time.Unix(1700000000, int64(step)).UTC(),
	}
}

// stepTensors returns tensors whose values are a function of step, so a
// loaded checkpoint can be checked against the step it claims.
func stepTensors(step int64, n int) []Tensor {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(step)*1000 + float32(i)
	}
	return []Tensor{
		{Name: "fc.weight", Shape: []int{n / 4, 4}, Data: w},
		{Name: "bn.running_mean", Shape: []int{2}, Data: []float32{float32(step), -float32(step)}},
	}
}

func checkStepTensors(t testing.TB, cp *Checkpoint) {
	t.Helper()
	if len(cp.Tensors) != 2 || cp.Tensors[0].Name != "fc.weight" {
		t.Fatalf("checkpoint %d has tensors %v", cp.Step, tensorNames(cp.Tensors))
	}
	want := stepTensors(cp.Step, len(cp.Tensors[0].Data))
	for i := range want {
		if !bitsEqual(cp.Tensors[i].Data, want[i].Data) {
			t.Fatalf("checkpoint %d tensor %q does not hold step %d's values", cp.Step, want[i].Name, cp.Step)
		}
	}
}

func tensorNames(ts []Tensor) []string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return n
}

// bitsEqual compares float32 slices bit for bit (NaN payloads and -0
// included).
func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
