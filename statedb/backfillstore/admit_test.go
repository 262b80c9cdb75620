package backfillstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestAdmitShrinksRoundTripAndSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	want := AdmitShrink{Job: "7", Queued: "9", User: "alice", Partition: "normal", OrigNodes: 4, FromNodes: 4, ToNodes: 2,
		OldLimit: 30 * time.Minute, NewLimit: 58 * time.Minute, Time: time.Unix(1700000000, 0)}
	seq, err := db.RecordAdmitShrink(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MarkAdmitShrink(ctx, seq, AdmitDone, ""); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.AdmitShrinks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want.Seq, want.State = seq, AdmitDone
	if len(got) != 1 || got[0] != want {
		t.Fatalf("after reopening: %+v, want [%+v]", got, want)
	}
}

func TestAdmitShrinkRecordsThatCannotBeAppliedAreRefused(t *testing.T) {
	db := openBackfillTest(t)
	for _, a := range []AdmitShrink{
		{Job: "7", Queued: "9", User: "alice", OrigNodes: 2, FromNodes: 2, ToNodes: 2},
		{Job: "7", Queued: "9", User: "alice", OrigNodes: 2, FromNodes: 2, ToNodes: 0},
		{Job: "7", Queued: "9", User: "alice", OrigNodes: 2, FromNodes: 3, ToNodes: 1},
		{Job: "", Queued: "9", User: "alice", OrigNodes: 2, FromNodes: 2, ToNodes: 1},
	} {
		if _, err := db.RecordAdmitShrink(context.Background(), a); !errors.Is(err, ErrInvalid) {
			t.Errorf("RecordAdmitShrink(%+v) = %v, want ErrInvalid", a, err)
		}
	}
	if err := db.MarkAdmitShrink(context.Background(), 42, AdmitDone, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("marking an unknown record: %v, want ErrInvalid", err)
	}
}
