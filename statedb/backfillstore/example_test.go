package backfillstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "backfill")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := backfillstore.Open(filepath.Join(dir, "backfill.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	now := time.Unix(1700000000, 0)
	x := backfillstore.ExtraJob{ID: "43", Parent: "42", User: "alice", Partition: "low", Node: "n2",
		GPUType: "v100", GPUs: 4, Submitted: now, End: now.Add(20 * time.Minute)}
	if err := db.RecordExtra(ctx, x); err != nil {
		log.Fatal(err)
	}
	db.MarkSignalled(ctx, "43", now.Add(10*time.Minute), "reservation of job 50")
	active, _ := db.ActiveExtras(ctx)
	for _, a := range active {
		fmt.Println(a.ID, "lent to", a.Parent, "on", a.Node, a.State, "-", a.Reason)
	}
	// Output: 43 lent to 42 on n2 signalled - reservation of job 50
}
