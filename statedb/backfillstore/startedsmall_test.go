package backfillstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A start-small record survives a reopen, is replaced whole, is forgotten
// on request, and a record that could not describe a start-small is
// refused.
func TestStartedSmallRoundTrips(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := StartedSmall{Job: "7", User: "alice", FromNodes: 3, ToNodes: 2, GPUs: 8, OldLimit: 10 * time.Minute, NewLimit: 17 * time.Minute,
		At: time.Unix(1700000000, 0)}
	if err := db.PutStartedSmall(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := db.StartedSmallJobs(ctx); err != nil || len(got) != 1 || got["7"] != s {
		t.Fatalf("after reopening: %+v, %v; want %+v", got, err, s)
	}
	s.Restored = true
	if err := db.PutStartedSmall(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, err := db.StartedSmallJobs(ctx); err != nil || got["7"] != s {
		t.Fatalf("after the update: %+v, %v; want %+v", got, err, s)
	}
	if err := db.ForgetStartedSmall(ctx, "7"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.StartedSmallJobs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after forgetting: %+v, %v; want none", got, err)
	}
	ok := StartedSmall{Job: "9", User: "bob", FromNodes: 2, ToNodes: 1, OldLimit: time.Minute, NewLimit: 2 * time.Minute}
	for name, bad := range map[string]func(*StartedSmall){
		"no job id":        func(s *StartedSmall) { s.Job = "" },
		"no user":          func(s *StartedSmall) { s.User = "" },
		"zero nodes":       func(s *StartedSmall) { s.ToNodes = 0 },
		"more nodes":       func(s *StartedSmall) { s.ToNodes = 3 },
		"negative GPUs":    func(s *StartedSmall) { s.GPUs = -1 },
		"no old limit":     func(s *StartedSmall) { s.OldLimit = 0 },
		"negative new one": func(s *StartedSmall) { s.NewLimit = -time.Minute },
	} {
		b := ok
		bad(&b)
		if err := db.PutStartedSmall(ctx, b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: PutStartedSmall(%+v) = %v, want ErrInvalid", name, b, err)
		}
	}
}

// A start-small record of schema version 7 (no GPU count) reads as 0 GPUs
// (not known) once the file is migrated.
func TestAVersion7StartSmallRecordReadsWithItsGPUsUnknown(t *testing.T) {
	path := oldBackfillFile(t, 7, `INSERT INTO started_small VALUES ('7','alice',3,2,600,1020,1,0)`)
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := StartedSmall{Job: "7", User: "alice", FromNodes: 3, ToNodes: 2, OldLimit: 10 * time.Minute, NewLimit: 17 * time.Minute, At: time.Unix(0, 1)}
	if got, err := db.StartedSmallJobs(context.Background()); err != nil || got["7"] != want {
		t.Errorf("version 7 record after migration: %+v, %v; want %+v", got["7"], err, want)
	}
}
