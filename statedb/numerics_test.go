package statedb

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNumericsRecordIsKeptAndGoesWithAStartOver: the ledger's numerics
// record reads back as written, is replaced whole, and the copy a
// start-over keeps holds the record of the rows it keeps.
func TestNumericsRecordIsKeptAndGoesWithAStartOver(t *testing.T) {
	db, dir := startOverState(t)
	if rec, err := db.Numerics(); err != nil || rec != "" {
		t.Fatalf("Numerics before any record: %q, %v", rec, err)
	}
	if err := db.SetNumerics(`{"torch":"1.13"}`); err != nil {
		t.Fatal(err)
	}
	archive, err := db.StartOver()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetNumerics(`{"torch":"2.6"}`); err != nil {
		t.Fatal(err)
	}
	if rec, err := db.Numerics(); err != nil || rec != `{"torch":"2.6"}` {
		t.Fatalf("Numerics after the new run's record: %q, %v", rec, err)
	}
	if b, err := os.ReadFile(filepath.Join(archive, NumericsFile)); err != nil || string(b) != `{"torch":"1.13"}` {
		t.Fatalf("the kept copy's record: %q, %v; want the old run's", b, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.SetNumerics("x"); err == nil {
		t.Fatal("a read-only state recorded numerics")
	}
}
