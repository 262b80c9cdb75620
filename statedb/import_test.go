package statedb

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestImportLedgerAddsMissingRowsAndKeepsStoredOnes(t *testing.T) {
	src := openTest(t, Options{})
	var rows []LedgerEntry
	for s := int64(0); s < 6; s++ {
		e := entry(s, "d")
		if s == 2 {
			e.Redos = 1 // a step redone by the coordinator: imported as recorded
		}
		if s == 3 {
			e.Loss = math.NaN()
		}
		if err := src.AppendLedger(e); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := src.Ledger(0, 5)
	if err != nil {
		t.Fatal(err)
	}

	dst := openTest(t, Options{})
	own := entry(4, "own") // this directory's own record of step 4
	if err := dst.AppendLedger(own); err != nil {
		t.Fatal(err)
	}
	added, err := dst.ImportLedger(rows)
	if err != nil || added != 5 {
		t.Fatalf("ImportLedger = %d, %v; want 5 rows added (step 4 kept)", added, err)
	}
	got, err := dst.Ledger(0, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]LedgerEntry{}, rows[:4]...), own)
	want[4].Redo = false
	want = append(want, rows[5])
	if len(got) != 6 {
		t.Fatalf("ledger after import has %d rows, want 6", len(got))
	}
	for i := range got {
		if i == 3 { // NaN != NaN: compare the rest
			if !math.IsNaN(got[i].Loss) {
				t.Errorf("step 3 loss = %v, want NaN", got[i].Loss)
			}
			got[i].Loss, want[i].Loss = 0, 0
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("step %d after import =\n%+v\nwant\n%+v", i, got[i], want[i])
		}
	}
	if !got[2].Redo || got[2].Redos != 1 {
		t.Errorf("step 2 imported as Redo=%v Redos=%d, want true, 1", got[2].Redo, got[2].Redos)
	}
	if bad, err := dst.CheckLedger(); err != nil || len(bad) != 0 {
		t.Fatalf("CheckLedger after import: %v, %v", bad, err)
	}
	if again, err := dst.ImportLedger(rows); err != nil || again != 0 {
		t.Fatalf("importing twice added %d rows (%v), want 0", again, err)
	}
}

func TestImportLedgerRefusesAnInvalidRowAndAddsNothing(t *testing.T) {
	db := openTest(t, Options{})
	good := entry(0, "d")
	for _, tc := range []struct {
		name string
		bad  LedgerEntry
	}{
		{"bad digest", LedgerEntry{Step: 1, Digest: "md5:xx", Time: good.Time}},
		{"no time", LedgerEntry{Step: 1, Digest: good.Digest}},
		{"negative step", func() LedgerEntry { e := entry(1, "d"); e.Step = -1; return e }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			added, err := db.ImportLedger([]LedgerEntry{good, tc.bad})
			if !errors.Is(err, ErrInvalid) || added != 0 {
				t.Fatalf("ImportLedger = %d, %v; want 0 and ErrInvalid", added, err)
			}
			if rows, _ := db.Ledger(0, 10); len(rows) != 0 {
				t.Fatalf("a refused import left %d rows", len(rows))
			}
		})
	}
}
