package backfillstore

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// A job's kept-off nodes survive a reopen, are replaced whole (a record
// without nodes but with a start or released is kept), are forgotten by an
// empty record, and a name that would corrupt the comma-separated list is
// refused.
func TestKeptOffRoundTripsAndIsReplacedWhole(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	k := KeptOff{Job: "7", Nodes: []string{"n1", "n2"}, Set: []string{"n4", "n1", "n2"}, Types: []string{"v100"}, Since: at}
	if err := db.PutKeptOff(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := db.PutKeptOff(ctx, KeptOff{Job: "8", Nodes: []string{"n3"}, Types: []string{"t4"}, Since: at}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.KeptOffJobs(ctx)
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got["7"], k) {
		t.Fatalf("after reopening: %+v, %v; want job 7 %+v and job 8", got, err, k)
	}
	k2 := KeptOff{Job: "7", Since: at, Released: true} // a spell over: kept, without nodes
	if err := db.PutKeptOff(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if err := db.PutKeptOff(ctx, KeptOff{Job: "8"}); err != nil {
		t.Fatal(err)
	}
	if got, err = db.KeptOffJobs(ctx); err != nil || len(got) != 1 || !reflect.DeepEqual(got["7"], k2) {
		t.Fatalf("after replacing job 7 and forgetting job 8: %+v, %v; want only %+v", got, err, k2)
	}
	for _, bad := range []KeptOff{{Nodes: []string{"n1"}}, {Job: "9", Nodes: []string{"n1,n2"}}, {Job: "9", Nodes: []string{""}}, {Job: "9", Nodes: []string{"n1"}, Types: []string{"a,b"}}} {
		if err := db.PutKeptOff(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutKeptOff(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}
