package statedb

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestLedgerAppendAndRead(t *testing.T) {
	db := openTest(t, Options{})
	if _, ok, err := db.LastStep(); ok || err != nil {
		t.Fatalf("LastStep of empty ledger: ok=%v err=%v", ok, err)
	}
	var want []LedgerEntry
	for s := int64(0); s < 5; s++ {
		e := entry(s, "d")
		if err := db.AppendLedger(e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	got, err := db.Ledger(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want[1:4]) {
		t.Fatalf("Ledger(1,3) =\n%+v\nwant\n%+v", got, want[1:4])
	}
	if last, ok, _ := db.LastStep(); !ok || last != 4 {
		t.Fatalf("LastStep = %d, %v; want 4", last, ok)
	}
	if got, _ := db.Ledger(10, 20); len(got) != 0 {
		t.Fatalf("Ledger beyond the end returned %d rows", len(got))
	}
}

func TestLedgerKeepsSpecialLossValues(t *testing.T) {
	cases := []struct {
		name      string
		loss, out float64
	}{
		{"NaN survives as NaN", math.NaN(), math.NaN()},
		{"+Inf survives", math.Inf(1), math.Inf(1)},
		{"the smallest subnormal survives", 5e-324, 5e-324},
		{"an inexact decimal survives bit for bit", 0.1 + 0.2, 0.1 + 0.2},
		{"negative zero becomes zero, as SQLite stores it", math.Copysign(0, -1), 0},
	}
	db := openTest(t, Options{})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := entry(int64(i), "l")
			e.Loss = c.loss
			if err := db.AppendLedger(e); err != nil {
				t.Fatal(err)
			}
			got, err := db.Ledger(int64(i), int64(i))
			if err != nil || len(got) != 1 {
				t.Fatalf("Ledger = %v, %v", got, err)
			}
			if math.Float64bits(got[0].Loss) != math.Float64bits(c.out) && !(math.IsNaN(c.out) && math.IsNaN(got[0].Loss)) {
				t.Fatalf("loss %v came back as %v, want %v", c.loss, got[0].Loss, c.out)
			}
		})
	}
}

func TestLedgerReexecutedStep(t *testing.T) {
	t.Run("an equal digest replaces the row and counts a redo", func(t *testing.T) {
		db := openTest(t, Options{})
		db.AppendLedger(entry(7, "same"))
		again := entry(7, "same")
		again.Workers, again.Placement, again.WallSeconds = 3, "0-2|3-5|6-7", 9
		for i := 1; i <= 2; i++ {
			if err := db.AppendLedger(again); err != nil {
				t.Fatalf("re-append %d: %v", i, err)
			}
			got, _ := db.Ledger(7, 7)
			if len(got) != 1 || got[0].Redos != i || !got[0].Redo || got[0].Workers != 3 || got[0].WallSeconds != 9 {
				t.Fatalf("after re-append %d row = %+v; want Redos=%d, Redo, the new allocation", i, got, i)
			}
		}
	})
	t.Run("a different digest is a divergence and keeps the old row", func(t *testing.T) {
		db := openTest(t, Options{})
		db.AppendLedger(entry(7, "old"))
		err := db.AppendLedger(entry(7, "new"))
		var de *DivergenceError
		if !errors.As(err, &de) || !errors.Is(err, ErrDivergence) {
			t.Fatalf("err = %v, want DivergenceError", err)
		}
		if de.Step != 7 || de.Stored != digest("old") || de.Got != digest("new") ||
			!slices.Equal(de.Tensors, []string{"fc1.weight"}) {
			t.Fatalf("DivergenceError = %+v", de)
		}
		got, _ := db.Ledger(7, 7)
		if got[0].Digest != digest("old") || got[0].Redos != 0 {
			t.Fatalf("row after divergence = %+v", got[0])
		}
	})
	t.Run("a step first recorded as redone keeps its flag without a count", func(t *testing.T) {
		db := openTest(t, Options{})
		e := entry(2, "r")
		e.Redo = true
		db.AppendLedger(e)
		got, _ := db.Ledger(2, 2)
		if !got[0].Redo || got[0].Redos != 0 {
			t.Fatalf("row = %+v", got[0])
		}
	})
	t.Run("a step redone before it was recorded keeps the caller's count", func(t *testing.T) {
		db := openTest(t, Options{})
		e := entry(3, "r")
		e.Redos = 2
		db.AppendLedger(e)
		got, _ := db.Ledger(3, 3)
		if !got[0].Redo || got[0].Redos != 2 {
			t.Fatalf("row = %+v, want Redo and Redos=2", got[0])
		}
		e.Redos = 1 // re-executed after a resume, redone once more there
		db.AppendLedger(e)
		got, _ = db.Ledger(3, 3)
		if !got[0].Redo || got[0].Redos != 4 {
			t.Fatalf("row after replacement = %+v, want Redos=2+1+1", got[0])
		}
	})
}

func TestLedgerRejectsInvalidEntries(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*LedgerEntry)
	}{
		{"a negative step", func(e *LedgerEntry) { e.Step = -1 }},
		{"a digest without the sha256 prefix", func(e *LedgerEntry) { e.Digest = "abcd" }},
		{"a digest with non-hex characters", func(e *LedgerEntry) { e.Digest = "sha256:xyz" }},
		{"an empty digest", func(e *LedgerEntry) { e.Digest = "" }},
		{"negative workers", func(e *LedgerEntry) { e.Workers = -2 }},
		{"an infinite wall time", func(e *LedgerEntry) { e.WallSeconds = math.Inf(1) }},
		{"a negative redo count", func(e *LedgerEntry) { e.Redos = -1 }},
	}
	db := openTest(t, Options{})
	for _, c := range cases {
		t.Run(c.name+" is rejected", func(t *testing.T) {
			e := entry(1, "v")
			c.modify(&e)
			if err := db.AppendLedger(e); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if _, ok, _ := db.LastStep(); ok {
		t.Fatal("an invalid entry was stored")
	}
}

func TestDivergentTensors(t *testing.T) {
	a := []TensorDigest{{"w", "1"}, {"b", "2"}, {"only_a", "3"}}
	b := []TensorDigest{{"b", "2"}, {"w", "9"}, {"only_b", "4"}}
	cases := []struct {
		name string
		a, b []TensorDigest
		want []string
	}{
		{"identical lists differ nowhere", a, a, nil},
		{"changed and one-sided names are listed in order", a, b, []string{"w", "only_a", "only_b"}},
		{"empty lists differ nowhere", nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DivergentTensors(c.a, c.b); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestAllocations(t *testing.T) {
	db := openTest(t, Options{})
	want := []Allocation{
		{Step: 0, Workers: 1, Placement: "0-7", Reason: "start", Time: time.Unix(10, 0).UTC()},
		{Step: 20, Workers: 3, Speeds: []float64{3.1, 2.4, 1}, Placement: "0-2|3-5|6-7", Reason: "schedule", Time: time.Unix(20, 0).UTC()},
	}
	for _, a := range want {
		if err := db.RecordAllocation(a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Allocations()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Allocations = %+v, %v; want %+v", got, err, want)
	}
	bad := []struct {
		name string
		a    Allocation
	}{
		{"zero workers", Allocation{Workers: 0}},
		{"a speed per worker missing", Allocation{Workers: 2, Speeds: []float64{1}}},
		{"a zero speed", Allocation{Workers: 1, Speeds: []float64{0}}},
		{"a NaN speed", Allocation{Workers: 1, Speeds: []float64{math.NaN()}}},
		{"a negative step", Allocation{Step: -1, Workers: 1}},
	}
	for _, c := range bad {
		t.Run(c.name+" is rejected", func(t *testing.T) {
			if err := db.RecordAllocation(c.a); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestMissingLedgerStepsNamesDeletedRows(t *testing.T) {
	db := openTest(t, Options{})
	for s := int64(1); s <= 12; s++ {
		if err := db.AppendLedger(entry(s, fmt.Sprint(s))); err != nil {
			t.Fatal(err)
		}
	}
	if gaps, err := db.MissingLedgerSteps(); err != nil || len(gaps) != 0 {
		t.Fatalf("a complete ledger: gaps %v, err %v", gaps, err)
	}
	if _, err := db.sql.Exec(`DELETE FROM ledger WHERE step BETWEEN 7 AND 9 OR step = 1 OR step = 11`); err != nil {
		t.Fatal(err)
	}
	gaps, err := db.MissingLedgerSteps()
	if err != nil {
		t.Fatal(err)
	}
	want := []StepRange{{1, 1}, {7, 9}, {11, 11}}
	if fmt.Sprint(gaps) != fmt.Sprint(want) {
		t.Fatalf("gaps %v, want %v", gaps, want)
	}
}
