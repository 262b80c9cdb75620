package backfillstore

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// A move record survives a reopen, is replaced whole as the move goes on,
// is forgotten on request, and a bad state or a name that would corrupt
// the comma-separated lists is refused.
func TestMovedRoundTripsThroughItsStates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m := Moved{Job: "7", From: []string{"n3"}, Since: time.Unix(1700000000, 0), State: MoveRequeued}
	if err := db.PutMoved(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := db.MovedJobs(ctx); err != nil || len(got) != 1 || !reflect.DeepEqual(got["7"], m) {
		t.Fatalf("after reopening: %+v, %v; want %+v", got, err, m)
	}
	m.Owner, m.Set, m.State = []string{"n9"}, []string{"n9", "n3"}, MoveExcluded
	if err := db.PutMoved(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, err := db.MovedJobs(ctx); err != nil || !reflect.DeepEqual(got["7"], m) {
		t.Fatalf("after the update: %+v, %v; want %+v", got, err, m)
	}
	if err := db.ForgetMoved(ctx, "7"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.MovedJobs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after forgetting: %+v, %v; want none", got, err)
	}
	for _, bad := range []Moved{{State: MoveRan}, {Job: "9", State: "lost"}, {Job: "9", State: MoveRan, From: []string{"n1,n2"}},
		{Job: "9", State: MoveRan, Set: []string{""}}} {
		if err := db.PutMoved(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutMoved(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}
