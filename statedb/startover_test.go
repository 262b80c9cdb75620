package statedb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// startOverState is a state directory with a job, a ledger of steps 1..8
// and checkpoints at steps 4 and 8.
func startOverState(t *testing.T) (*DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.InitJob(Job{ID: "j1", Name: "j", LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordAllocation(Allocation{Step: 0, Workers: 2, Placement: "0|1", Reason: "schedule"}); err != nil {
		t.Fatal(err)
	}
	for s := int64(1); s <= 8; s++ {
		if err := db.AppendLedger(entry(s, "a")); err != nil {
			t.Fatal(err)
		}
		if s%4 == 0 {
			if err := db.SaveCheckpoint(s, stepTensors(s, 16), []ESTContext{{0, []byte{1}}, {1, []byte{2}}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db, dir
}

func TestStartOverKeepsTheSupersededStateAndBeginsAtStepZero(t *testing.T) {
	db, dir := startOverState(t)
	if err := db.AppendLedger(entry(1, "other numerics")); !errors.Is(err, ErrDivergence) {
		t.Fatalf("before the start-over a step recomputed with other bits: %v, want ErrDivergence", err)
	}
	archive, err := db.StartOver()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(archive) != filepath.Join(dir, SupersededDir) {
		t.Fatalf("superseded state in %s, want under %s", archive, filepath.Join(dir, SupersededDir))
	}
	// The live state: the same job, no steps, no checkpoints.
	if _, ok, err := db.LastStep(); err != nil || ok {
		t.Fatalf("LastStep after the start-over: ok %v, %v; want an empty ledger", ok, err)
	}
	if ck, _, err := db.LatestCheckpoint(); err != nil || ck != nil {
		t.Fatalf("LatestCheckpoint after the start-over: %v, %v; want none", ck, err)
	}
	if j, err := db.Job(); err != nil || j.ID != "j1" {
		t.Fatalf("job after the start-over: %+v, %v", j, err)
	}
	if allocs, err := db.Allocations(); err != nil || len(allocs) != 0 {
		t.Fatalf("allocations after the start-over: %+v, %v; want the new run's only (none yet)", allocs, err)
	}
	if files, _ := os.ReadDir(filepath.Join(dir, CheckpointDir)); len(files) != 0 {
		t.Fatalf("live checkpoint files left: %v", files)
	}
	if err := db.AppendLedger(entry(1, "other numerics")); err != nil {
		t.Fatalf("step 1 of the new run: %v", err)
	}
	// The superseded state reads as a state directory of its own.
	old, err := OpenReadOnly(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	rows, err := old.Ledger(1, 8)
	if err != nil || len(rows) != 8 || rows[0].Digest != digest("a") {
		t.Fatalf("superseded ledger: %d rows, %v", len(rows), err)
	}
	if allocs, err := old.Allocations(); err != nil || len(allocs) != 1 {
		t.Fatalf("the copy's allocations: %+v, %v; want the old run's one", allocs, err)
	}
	ck, skipped, err := old.LatestCheckpoint()
	if err != nil || len(skipped) != 0 || ck == nil || ck.Step != 8 || len(ck.Contexts) != 2 {
		t.Fatalf("superseded checkpoint: %+v, skipped %v, %v", ck, skipped, err)
	}
	checkStepTensors(t, ck)
	// A second start-over keeps a second copy beside the first.
	second, err := db.StartOver()
	if err != nil || second == archive {
		t.Fatalf("second start-over: %s, %v (first %s)", second, err, archive)
	}
	// Reopened, the live state is the new run's.
	db.Close()
	db2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if _, ok, _ := db2.LastStep(); ok {
		t.Fatal("the reopened state has steps after two start-overs")
	}
}

func TestStartOverThatCannotKeepTheOldStateChangesNothing(t *testing.T) {
	db, dir := startOverState(t)
	// A file where the superseded directory goes: nothing can be kept.
	if err := os.WriteFile(filepath.Join(dir, SupersededDir), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartOver(); err == nil {
		t.Fatal("StartOver succeeded without a place to keep the superseded state")
	}
	if last, ok, err := db.LastStep(); err != nil || !ok || last != 8 {
		t.Fatalf("after a failed start-over the ledger ends at %d (ok %v, %v), want 8", last, ok, err)
	}
	if ck, _, err := db.LatestCheckpoint(); err != nil || ck == nil || ck.Step != 8 {
		t.Fatalf("after a failed start-over the newest checkpoint is %+v (%v), want step 8", ck, err)
	}
}

func TestStartOverIsRefusedReadOnly(t *testing.T) {
	_, dir := startOverState(t)
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.StartOver(); err == nil {
		t.Fatal("a read-only state started over")
	}
}

// TestStartOverWithALostCheckpointFileKeepsTheRest: a recorded checkpoint
// whose file is gone (LatestCheckpoint skips it) does not stop the
// start-over (a tester's: every attempt failed linking it, and left a
// partial copy behind); the copy keeps the files that are there.
func TestStartOverWithALostCheckpointFileKeepsTheRest(t *testing.T) {
	db, dir := startOverState(t)
	if err := os.Remove(filepath.Join(dir, CheckpointDir, checkpointName(8))); err != nil {
		t.Fatal(err)
	}
	archive, err := db.StartOver()
	if err != nil {
		t.Fatal(err)
	}
	old, err := OpenReadOnly(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if ck, skipped, err := old.LatestCheckpoint(); err != nil || ck == nil || ck.Step != 4 || len(skipped) != 1 {
		t.Fatalf("the copy's newest checkpoint: %+v, skipped %v, %v; want step 4, step 8 skipped as lost", ck, skipped, err)
	}
}

// TestSupersededListsCompleteCopiesOldestFirst: the kept copies are listed
// in the order they were made.
func TestSupersededListsCompleteCopiesOldestFirst(t *testing.T) {
	db, dir := startOverState(t)
	if got, err := Superseded(dir); err != nil || len(got) != 0 {
		t.Fatalf("Superseded before any start-over: %v, %v", got, err)
	}
	first, err := db.StartOver()
	if err != nil {
		t.Fatal(err)
	}
	second, err := db.StartOver()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Superseded(dir); err != nil || len(got) != 2 || got[0] != first || got[1] != second {
		t.Fatalf("Superseded: %v, %v; want [%s %s]", got, err, first, second)
	}
}

// TestOpenSettlesAnInterruptedStartOver: what a start-over killed at each
// point leaves is settled by the next Open, and only a start-over that
// cleared the live state is listed (a tester's: a kill after the copy was
// named, before the ledger was cleared, listed a start-over that never
// happened, and the job resumed).
func TestOpenSettlesAnInterruptedStartOver(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prefix  string // the copy's name as the kill left it
		cleared bool   // the transaction committed
		kept    bool
	}{
		{"killed while copying", incompletePrefix, false, false},
		{"killed after the copy, before the transaction", copiedPrefix, false, false},
		{"killed after the transaction, before the copy was named", copiedPrefix, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, dir := startOverState(t)
			files, _ := queryStrings(db.sql, `SELECT file FROM checkpoints`)
			copyDir := filepath.Join(dir, SupersededDir, tc.prefix+"20261206T170000.000000000Z")
			if err := os.MkdirAll(filepath.Dir(copyDir), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(copyDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := db.copyInto(copyDir, files); err != nil {
				t.Fatal(err)
			}
			if tc.cleared {
				if err := db.clearSteps(); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := Superseded(dir); len(got) != 0 {
				t.Fatalf("listed before the next open: %v", got)
			}
			db.Close()
			// Before the next open, a read-only reader (easyscale status)
			// sees the interrupted start-over that cleared the state.
			ro, err := OpenReadOnly(dir)
			if err != nil {
				t.Fatal(err)
			}
			unnamed, err := ro.InterruptedStartOvers()
			ro.Close()
			if err != nil || tc.kept != (len(unnamed) == 1) || (tc.kept && (unnamed[0].Path != copyDir ||
				unnamed[0].Final != filepath.Join(dir, SupersededDir, "20261206T170000.000000000Z"))) {
				t.Fatalf("interrupted start-overs before the next open: %+v, %v; want one (%s) %v", unnamed, err, copyDir, tc.kept)
			}
			db2, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			got, _ := Superseded(dir)
			if tc.kept != (len(got) == 1) {
				t.Fatalf("after the next open: %v, want kept %v", got, tc.kept)
			}
			left, _ := filepath.Glob(filepath.Join(dir, SupersededDir, ".*"))
			if len(left) != 0 {
				t.Fatalf("left unsettled: %v", left)
			}
			if unnamed, err := db2.InterruptedStartOvers(); err != nil || len(unnamed) != 0 {
				t.Fatalf("interrupted start-overs after the next open: %+v, %v; want none", unnamed, err)
			}
			if _, rows, _ := db2.LastStep(); rows == tc.cleared {
				t.Fatalf("the live ledger has rows: %v, want %v", rows, !tc.cleared)
			}
		})
	}
}

func TestKeptRunOfNamesTheLiveStateOfAKeptRun(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kept := filepath.Join(dir, SupersededDir, "20261206T170000.000000000Z")
	copying := filepath.Join(dir, SupersededDir, ".copied-20261206T170000.000000000Z")
	other := filepath.Join(t.TempDir(), SupersededDir, "x") // no state database above it
	empty := filepath.Join(dir, SupersededDir, "empty")     // no state database in it
	for _, d := range []string{kept, copying, other, empty} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{kept, copying, other} {
		if err := os.WriteFile(filepath.Join(d, DBFile), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(kept, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir  string
		want string
		ok   bool
	}{
		{kept, dir, true},
		{kept + "/", dir, true},
		{link, dir, true},
		{dir, "", false},
		{other, "", false},
		{empty, "", false},
		{copying, "", false},
		{filepath.Join(dir, SupersededDir), "", false},
	} {
		if got, ok := KeptRunOf(tc.dir); ok != tc.ok || got != tc.want {
			t.Errorf("KeptRunOf(%s) = %q, %v; want %q, %v", tc.dir, got, ok, tc.want, tc.ok)
		}
	}
}

// TestAStateDirectorysOwnFoldersAreRefusedAsStateDirectories: a tester's
// `--state STATE/superseded` started a run inside the folder of kept runs
// (status then listed its checkpoints/ as a kept run); STATE/checkpoints
// was taken too. Both are refused naming STATE; a kept run, and a folder
// of that name outside any state directory, are state directories.
func TestAStateDirectorysOwnFoldersAreRefusedAsStateDirectories(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, sub := range []string{SupersededDir, CheckpointDir} {
		_, err := Open(filepath.Join(dir, sub))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "give "+dir) {
			t.Errorf("Open(%s/%s): %v, want a refusal naming %s", dir, sub, err, dir)
		}
	}
	// Where a symbolic link leads counts, and a new directory under
	// superseded/ is not a kept run (a second tester's findings).
	links := t.TempDir()
	for _, sub := range []string{SupersededDir, CheckpointDir, filepath.Join(SupersededDir, "new")} {
		link := filepath.Join(links, strings.ReplaceAll(sub, "/", "-"))
		target := filepath.Join(dir, sub)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{link, target} {
			if _, err := Open(d); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "give "+dir) {
				t.Errorf("Open(%s): %v, want a refusal naming %s", d, err, dir)
			}
		}
	}
	if got, _ := Superseded(dir); len(got) != 0 {
		t.Fatalf("kept runs %v after the refusals, want none", got)
	}
	outside := filepath.Join(t.TempDir(), SupersededDir)
	db, err = Open(outside)
	if err != nil {
		t.Fatalf("Open(%s): %v", outside, err)
	}
	db.Close()
}
