package statedb_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/easyscale/easyscale-slurm/statedb"
)

func Example() {
	dir, _ := os.MkdirTemp("", "state")
	defer os.RemoveAll(dir)

	db, err := statedb.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	existing, err := db.InitJob(statedb.Job{ID: "3f2a", Name: "mnist", Spec: "{}", LogicalWorkers: 8})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resuming:", existing)

	db.RecordAllocation(statedb.Allocation{Step: 0, Workers: 2, Placement: "0-3|4-7", Reason: "start"})
	for step := int64(0); step < 3; step++ {
		err := db.AppendLedger(statedb.LedgerEntry{Step: step, Digest: "sha256:0123abcd", Loss: 2.3, Workers: 2})
		if err != nil {
			log.Fatal(err)
		}
	}
	last, _, _ := db.LastStep()
	fmt.Println("last step:", last)

	// The same step re-executed with another digest is a divergence.
	err = db.AppendLedger(statedb.LedgerEntry{Step: 2, Digest: "sha256:ffff"})
	fmt.Println("divergence:", errors.Is(err, statedb.ErrDivergence))

	// A different job is refused.
	_, err = db.InitJob(statedb.Job{ID: "9e1b", Name: "charlm", LogicalWorkers: 4})
	fmt.Println("other job refused:", errors.Is(err, statedb.ErrJobMismatch))
	// Output:
	// resuming: false
	// last step: 2
	// divergence: true
	// other job refused: true
}

func ExampleDB_SaveCheckpoint() {
	dir, _ := os.MkdirTemp("", "state")
	defer os.RemoveAll(dir)
	db, err := statedb.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	weights := []statedb.Tensor{{Name: "fc.weight", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}}
	contexts := []statedb.ESTContext{{EST: 0, Blob: []byte("rng=17")}, {EST: 1, Blob: []byte("rng=42")}}
	if err := db.SaveCheckpoint(100, weights, contexts, map[string]string{"seed": "1"}); err != nil {
		log.Fatal(err)
	}

	cp, skipped, err := db.LatestCheckpoint()
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range skipped {
		fmt.Println("skipped:", s) // damaged newer checkpoints, if any
	}
	fmt.Println(cp.Step, cp.Tensors[0].Name, cp.Tensors[0].Shape, cp.Tensors[0].Data, string(cp.Contexts[1].Blob), cp.Meta["seed"])
	// Output:
	// 100 fc.weight [2 2] [1 2 3 4] rng=42 1
}

func ExampleOpenReadOnly() {
	dir, _ := os.MkdirTemp("", "state")
	defer os.RemoveAll(dir)
	w, err := statedb.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	w.AppendLedger(statedb.LedgerEntry{Step: 0, Digest: "sha256:aa"})

	// A reader works while the writer holds the lock; a second writer does not.
	r, err := statedb.OpenReadOnly(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	entries, _ := r.Ledger(0, 10)
	fmt.Println(len(entries), entries[0].Digest)
	_, err = statedb.Open(dir)
	fmt.Println("second writer locked out:", errors.Is(err, statedb.ErrLocked))
	// Output:
	// 1 sha256:aa
	// second writer locked out: true
}
