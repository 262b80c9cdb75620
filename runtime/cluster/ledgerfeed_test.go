package cluster

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// fakeLedger is a ledger of the given steps read as statedb.DB.LedgerPage
// reads: corrupt steps count against the limit and are named in a
// *statedb.CorruptLedgerError returned with the intact rows.
func fakeLedger(have func(s int64) bool, corrupt map[int64]bool) func(from, to int64, limit int) ([]statedb.LedgerEntry, error) {
	return func(from, to int64, limit int) ([]statedb.LedgerEntry, error) {
		var out []statedb.LedgerEntry
		var bad []int64
		for s := max(from, 1); s <= to && (limit < 0 || len(out)+len(bad) < limit); s++ {
			switch {
			case !have(s):
			case corrupt[s]:
				bad = append(bad, s)
			default:
				out = append(out, statedb.LedgerEntry{Step: s, Digest: "sha256:00", Loss: float64(s), Time: time.Unix(1700000000, s)})
			}
		}
		if len(bad) > 0 {
			return out, &statedb.CorruptLedgerError{Steps: bad}
		}
		return out, nil
	}
}

func upTo(last int64) func(int64) bool { return func(s int64) bool { return s <= last } }

func steps(rows []LedgerRow) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.Step)
	}
	return out
}

// TestLedgerFeedSendsEachStandbyEveryRowOnce checks which rows go with each
// standby message: the rows before the message's step not yet sent to that
// standby, a backlog capped per message, and all again for a new standby.
func TestLedgerFeedSendsEachStandbyEveryRowOnce(t *testing.T) {
	a, b := &member{}, &member{}
	var f LedgerFeed
	if rows, err := f.Rows(a, 5); rows != nil || err != nil {
		t.Fatalf("a feed without a ledger sent %v, %v", rows, err)
	}
	f.Follow(fakeLedger(upTo(MaxLedgerRowsPerMessage+10), nil))
	cases := []struct {
		name    string
		standby *member
		step    int64
		first   int64 // first step sent (0: none)
		n       int
	}{
		{"the first message: rows up to its step", a, 3, 1, 3},
		{"the same step again (a redo): nothing new", a, 3, 0, 0},
		{"the next step: its row", a, 4, 4, 1},
		{"a new standby gets the rows from the start", b, 5, 1, 5},
		{"back to the first: from the start again", a, 5, 1, 5},
		{"a backlog: at most MaxLedgerRowsPerMessage rows", a, MaxLedgerRowsPerMessage + 10, 6, MaxLedgerRowsPerMessage},
		{"the rest of the backlog", a, MaxLedgerRowsPerMessage + 10, MaxLedgerRowsPerMessage + 6, 5},
		{"a step not recorded yet is sent later", a, MaxLedgerRowsPerMessage + 20, 0, 0},
	}
	for _, c := range cases {
		rows, err := f.Rows(c.standby, c.step)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(rows) != c.n || (c.n > 0 && rows[0].Step != c.first) {
			t.Fatalf("%s: sent steps %v, want %d rows from %d", c.name, steps(rows), c.n, c.first)
		}
	}
	f.Follow(func(from, to int64, limit int) ([]statedb.LedgerEntry, error) { return nil, errors.New("disk gone") })
	if _, err := f.Rows(a, 10000); err == nil {
		t.Fatal("a failed read was not returned")
	}
}

// TestLedgerFeedPassesOverGapsAndCorruptRows: a ledger that starts at a
// takeover (no rows 1..999) and one with a corrupt row still reach the
// standby whole, the corrupt row reported and left out.
func TestLedgerFeedPassesOverGapsAndCorruptRows(t *testing.T) {
	a := &member{}
	var f LedgerFeed
	f.Follow(fakeLedger(func(s int64) bool { return s >= 1000 }, map[int64]bool{1500: true}))
	var got []int64
	var reported bool
	for step := int64(1000); step <= 3000; step++ {
		rows, err := f.Rows(a, step)
		var ce *statedb.CorruptLedgerError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("step %d: %v", step, err)
		}
		reported = reported || err != nil
		got = append(got, steps(rows)...)
	}
	if len(got) != 2000 || got[0] != 1000 || got[len(got)-1] != 3000 || slices.Contains(got, 1500) || !reported {
		t.Fatalf("sent %d rows (%v … %v), corrupt reported %v; want steps 1000-3000 but 1500, and the corrupt row reported",
			len(got), got[:min(3, len(got))], got[max(0, len(got)-3):], reported)
	}
}

// TestStandbyLedgerKeepsTheLatestRows checks the standby's copy: rows in
// step order, a re-sent range replacing what it covers and what follows,
// and Through cutting at the copy's step; the wire form keeps every bit.
func TestStandbyLedgerKeepsTheLatestRows(t *testing.T) {
	row := func(s int64, d string) LedgerRow { return LedgerRow{Step: s, Digest: "sha256:" + d, TimeNS: 1} }
	var l StandbyLedger
	l.Add([]LedgerRow{row(1, "a"), row(2, "a"), row(3, "a")})
	l.Add(nil)
	l.Add([]LedgerRow{row(4, "a")})
	l.Add([]LedgerRow{row(1, "b"), row(2, "b")}) // designated again: re-sent from the start
	got := l.Through(10)
	if len(got) != 4 || got[0].Digest != "sha256:b" || got[1].Digest != "sha256:b" || got[3].Digest != "sha256:a" {
		t.Fatalf("after a re-send of steps 1-2: %+v, want steps 1-2 replaced and 3-4 kept", got)
	}
	l.Add([]LedgerRow{row(6, "b"), row(5, "b")})
	if got := l.Through(5); len(got) != 5 || got[4].Step != 5 || l.Count(6) != 6 {
		t.Fatalf("Through(5) = %+v (Count(6) %d), want steps 1-5 in order", got, l.Count(6))
	}
	if c := l.Copy(3); c.Count(100) != 3 {
		t.Fatalf("Copy(3) holds %d rows, want 3", c.Count(100))
	}
	var none *StandbyLedger
	if none.Through(5) != nil {
		t.Fatal("a nil ledger returned rows")
	}

	e := statedb.LedgerEntry{Step: 7, Digest: "sha256:ab", Loss: math.Copysign(0, -1), WallSeconds: 0.25, Workers: 3,
		Placement: "0-1|2-3|4-7", SamplesHash: "h", Redo: true, Redos: 2, Time: time.Unix(1764000000, 123456789),
		TensorDigests: []statedb.TensorDigest{{Name: "w", Digest: "cd"}}}
	nan := statedb.LedgerEntry{Step: 8, Unhashed: true, Loss: math.NaN(), Time: time.Unix(0, math.MaxInt64)}
	for _, in := range []statedb.LedgerEntry{e, nan} {
		b, err := json.Marshal(NewLedgerRow(in))
		if err != nil {
			t.Fatal(err)
		}
		// as the torch relay reads a frame header: numbers as float64
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		b, _ = json.Marshal(generic)
		var r LedgerRow
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out := r.Entry()
		if math.Float64bits(out.Loss) != math.Float64bits(in.Loss) || !out.Time.Equal(in.Time) {
			t.Fatalf("row of step %d: loss %v time %v after the wire, want %v %v", in.Step, out.Loss, out.Time, in.Loss, in.Time)
		}
		out.Loss, in.Loss, out.Time, in.Time = 0, 0, time.Time{}, time.Time{}
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("row after the wire:\n%+v\nwant\n%+v", out, in)
		}
	}
}
