package trainer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// expensiveDigests is the native engine made to look like an engine whose
// hashing costs a third of a step: it reports a quarter of each step's
// time as hashing, and leaves the digest uncomputed when told to.
type expensiveDigests struct {
	Engine
	hash  bool
	took  float64
	every int // DigestEvery: 0 measures
}

var _ SparseDigester = (*expensiveDigests)(nil)

func (e *expensiveDigests) HashNext(hash bool) { e.hash = hash }
func (e *expensiveDigests) DigestEvery() int   { return e.every }
func (e *expensiveDigests) HashSeconds() float64 {
	if !e.hash {
		return 0
	}
	return e.took / 4
}

func (e *expensiveDigests) Step(ctx context.Context, step int64, plan placement.Plan) (StepReport, error) {
	t0 := time.Now()
	rep, err := e.Engine.Step(ctx, step, plan)
	e.took = time.Since(t0).Seconds()
	return rep, err
}

func (e *expensiveDigests) Digest() (string, []statedb.TensorDigest) {
	if !e.hash {
		return "", nil
	}
	return e.Engine.Digest()
}

func ledgerOf(t *testing.T, dir string) []statedb.LedgerEntry {
	t.Helper()
	db, err := statedb.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Ledger(0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestExpensiveHashingIsSkippedButFinalAndCheckpointStepsAreHashed(t *testing.T) {
	refDir, dir := t.TempDir(), t.TempDir()
	ref := run(t, mnistSmall, "0:3", func(o *Options) { o.StateDir = refDir })
	got := run(t, mnistSmall, "0:3", func(o *Options) {
		o.StateDir = dir
		native, err := NativeEngine(*o)
		if err != nil {
			t.Fatal(err)
		}
		o.Engine = &expensiveDigests{Engine: native}
	})
	if ref.DigestEvery != 1 || ref.DigestCostPct != nil || ref.HashedSteps != testSteps {
		t.Fatalf("native summary: digest_every_steps %d, cost %v, hashed %d; want 1, not measured, %d", ref.DigestEvery, ref.DigestCostPct, ref.HashedSteps, testSteps)
	}
	if got.DigestEvery < 2 || got.DigestCostPct == nil || *got.DigestCostPct < 10 {
		t.Fatalf("hashing at a third of a step: digest_every_steps %d, cost %v %%; want K > 1 and the cost measured", got.DigestEvery, got.DigestCostPct)
	}
	if got.Digest != ref.Digest {
		t.Fatalf("final digest %s with K = %d, %s with K = 1", got.Digest, got.DigestEvery, ref.Digest)
	}
	want := map[int64]string{}
	for _, e := range ledgerOf(t, refDir) {
		want[e.Step] = e.Digest
	}
	var hashed []int64
	for _, e := range ledgerOf(t, dir) {
		mustHash := e.Step <= digestSamples || e.Step%5 == 0 || e.Step == testSteps || e.Step%int64(got.DigestEvery) == 0
		if e.Unhashed == mustHash {
			t.Errorf("step %d: unhashed %v, want %v (K = %d, checkpoint_every 5, last step %d)", e.Step, e.Unhashed, !mustHash, got.DigestEvery, testSteps)
		}
		if !e.Unhashed {
			hashed = append(hashed, e.Step)
			if e.Digest != want[e.Step] {
				t.Errorf("step %d: digest %s, %s with K = 1", e.Step, e.Digest, want[e.Step])
			}
		}
	}
	if len(hashed) != got.HashedSteps || !slices.Contains(hashed, testSteps) {
		t.Fatalf("hashed steps %v, summary says %d; want the last step among them", hashed, got.HashedSteps)
	}
}

// TestRecomputedStepsAreHashedToBeCompared: a resume that recomputes steps
// the ledger already holds (here its newest checkpoint is damaged, so it
// resumes 4 steps earlier) hashes them even where the interval (fixed at
// 1000: no measurement) would not, so each is compared with, or replaces,
// its recorded row.
func TestRecomputedStepsAreHashedToBeCompared(t *testing.T) {
	dir := t.TempDir()
	sparse := func(o *Options) {
		o.StateDir = dir
		native, err := NativeEngine(*o)
		if err != nil {
			t.Fatal(err)
		}
		o.Engine = &expensiveDigests{Engine: native, every: 1000}
	}
	first := run(t, mnistSmall, "0:3", sparse)
	if first.DigestEvery != 1000 || first.DigestCostPct == nil {
		t.Fatalf("digest_every_steps %d, cost %v: want the fixed 1000 and the cost of the hashed steps", first.DigestEvery, first.DigestCostPct)
	}
	before := map[int64]bool{}
	for _, e := range ledgerOf(t, dir) {
		before[e.Step] = e.Unhashed
	}
	if !before[21] || !before[23] {
		t.Fatalf("steps 21 and 23 hashed in the first run (K = %d); the test needs them unhashed", first.DigestEvery)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoints", fmt.Sprintf("step-%d.safetensors", testSteps)), []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := run(t, mnistSmall, "0:2", sparse)
	if second.ResumedFrom != 20 || second.Digest != first.Digest {
		t.Fatalf("resumed from %d with digest %s; want 20 and %s", second.ResumedFrom, second.Digest, first.Digest)
	}
	for _, e := range ledgerOf(t, dir) {
		if e.Step > 20 && (e.Unhashed || e.Redos < 1) {
			t.Errorf("recomputed step %d: unhashed %v, redos %d; want it hashed and counted as a redo", e.Step, e.Unhashed, e.Redos)
		}
	}
}
