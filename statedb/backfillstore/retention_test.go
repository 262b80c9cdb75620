package backfillstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestLendHistoriesRoundTripAndAreReplacedWhole(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int64) time.Time { return time.Unix(1700000000+s, 0) }
	h := LendHistory{Job: "7", Failures: 3, Last: at(30), Status: "s1", Stopped: at(31),
		Nodes: []NodeFailures{{Node: "n1", Failures: 1, Last: at(10)}, {Node: "n2", Failures: 2, Last: at(30)}}}
	if err := db.PutLendHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := db.PutLendHistory(ctx, LendHistory{Job: "8", Failures: 1, Last: at(5), Nodes: []NodeFailures{{Node: "n3", Failures: 1, Last: at(5)}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.LendHistories(ctx)
	if err != nil || len(got) != 2 || !equalHistory(got["7"], h) {
		t.Fatalf("after reopening: %+v, %v; want job 7 %+v and job 8", got, err, h)
	}
	// A history without node n1 replaces the whole record.
	h2 := LendHistory{Job: "7", Status: "s1", Nodes: []NodeFailures{{Node: "n2", Failures: 2, Last: at(30)}}}
	if err := db.PutLendHistory(ctx, h2); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.LendHistories(ctx); !equalHistory(got["7"], h2) {
		t.Errorf("after replacing: %+v, want %+v", got["7"], h2)
	}
	if err := db.PutLendHistory(ctx, LendHistory{Job: "8"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.LendHistories(ctx); len(got) != 1 || got["8"].Job != "" {
		t.Errorf("an empty history did not delete job 8's: %+v", got)
	}
	for _, bad := range []LendHistory{{}, {Job: "7", Nodes: []NodeFailures{{Failures: 1}}}} {
		if err := db.PutLendHistory(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutLendHistory(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func equalHistory(a, b LendHistory) bool {
	if !a.Last.Equal(b.Last) || !a.Stopped.Equal(b.Stopped) || len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for i := range a.Nodes {
		if !a.Nodes[i].Last.Equal(b.Nodes[i].Last) {
			return false
		}
		a.Nodes[i].Last, b.Nodes[i].Last = time.Time{}, time.Time{}
	}
	a.Last, b.Last, a.Stopped, b.Stopped = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestPruneKeepsTheNewestRowsAndWhatTheDaemonStillNeeds(t *testing.T) {
	ctx := context.Background()
	db := openBackfillTest(t)
	now := time.Unix(1700100000, 0)
	// Ten ended extra jobs, 1 ended longest ago (an hour per job), and an
	// active one.
	for i := 1; i <= 10; i++ {
		id := fmt.Sprint(i)
		if err := db.RecordExtra(ctx, ExtraJob{ID: id, Parent: "7", Node: "n1", GPUs: 1}); err != nil {
			t.Fatal(err)
		}
		if err := db.MarkEnded(ctx, id, now.Add(time.Duration(i-10)*time.Hour), "FAILED"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RecordExtra(ctx, ExtraJob{ID: "11", Parent: "7", Node: "n1", GPUs: 1, Submitted: now.Add(-30 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := db.RecordDecision(ctx, Decision{Kind: "grow", Job: "7", Time: now.Add(time.Duration(i-19) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range []AdmitShrink{
		{Job: "50", State: AdmitDone, Time: now.Add(-48 * time.Hour)},     // old, job gone: pruned
		{Job: "60", State: AdmitDone, Time: now.Add(-48 * time.Hour)},     // old, job still listed (running or requeued): kept
		{Job: "50", State: AdmitIntent, Time: now.Add(-48 * time.Hour)},   // not finished: kept
		{Job: "50", State: AdmitAbandoned, Time: now.Add(-1 * time.Hour)}, // young: kept
	} {
		a.Queued, a.User, a.OrigNodes, a.FromNodes, a.ToNodes = fmt.Sprint(100+i), "alice", 2, 2, 1
		if _, err := db.RecordAdmitShrink(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	p, err := db.Prune(ctx, Retention{Decisions: 15, EndedExtras: 4, Before: now.Add(-12 * time.Hour),
		Listed: []string{"2", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if p != (Pruned{Decisions: 7, Extras: 5, AdmitShrinks: 1}) {
		t.Errorf("pruned %+v, want 7 decisions (5 beyond the newest 15, 2 more older than 12 h), 5 extra jobs, 1 shrink-to-admit", p)
	}
	xs, _ := db.Extras(ctx)
	var ids []string
	for _, x := range xs {
		ids = append(ids, x.ID)
	}
	// 7..10 are the newest four ended; 2 is listed by Slurm; 11 is active.
	if want := []string{"2", "7", "8", "9", "10", "11"}; !slices.Equal(ids, want) {
		t.Errorf("extra jobs kept %v, want %v", ids, want)
	}
	ds, _ := db.Decisions(ctx, 0, 0)
	if len(ds) != 13 || ds[0].Seq != 8 {
		t.Errorf("%d decisions kept from seq %d, want the newest 13 (from seq 8: the others are older than 12 h)", len(ds), ds[0].Seq)
	}
	as, _ := db.AdmitShrinks(ctx)
	if len(as) != 3 || as[0].Job != "60" {
		t.Errorf("shrink-to-admit records kept %+v, want those of listed job 60, the intent and the young one", as)
	}
	if _, err := db.Prune(ctx, Retention{Decisions: 0, EndedExtras: 4}); !errors.Is(err, ErrInvalid) {
		t.Errorf("keeping no decisions: %v, want ErrInvalid", err)
	}
	if p, err := db.Prune(ctx, Retention{Decisions: 15, EndedExtras: 4, Before: now.Add(-12 * time.Hour), Listed: []string{"2", "60"}}); err != nil || p != (Pruned{}) {
		t.Errorf("pruning again: %+v, %v; want nothing", p, err)
	}
}

func TestADryRunCopiesTheFailedLends(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	live, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	h := LendHistory{Job: "7", Failures: 5, Last: time.Unix(1700000000, 0), Status: "s", Stopped: time.Unix(1700000001, 0)}
	if err := live.PutLendHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	dry, err := OpenDryRun(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dry.Close()
	if got, err := dry.LendHistories(ctx); err != nil || !equalHistory(got["7"], h) {
		t.Errorf("dry-run copy: %+v, %v; want %+v", got, err, h)
	}
}
