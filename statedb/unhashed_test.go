package statedb

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"
)

// unhashedEntry is entry(step) for a step whose digest was not computed.
func unhashedEntry(step int64) LedgerEntry {
	e := entry(step, "u")
	e.Digest, e.TensorDigests, e.Unhashed = "", nil, true
	return e
}

func TestUnhashedLedgerRowsRoundTripAndStayChecksummed(t *testing.T) {
	db := openTest(t, Options{})
	for _, e := range []LedgerEntry{entry(1, "a"), unhashedEntry(2), unhashedEntry(3), entry(4, "d")} {
		if err := db.AppendLedger(e); err != nil {
			t.Fatalf("AppendLedger(step %d): %v", e.Step, err)
		}
	}
	rows, err := db.Ledger(0, 10)
	if err != nil || len(rows) != 4 {
		t.Fatalf("Ledger = %d rows, %v; want 4", len(rows), err)
	}
	for _, r := range rows {
		wantUnhashed := r.Step == 2 || r.Step == 3
		if r.Unhashed != wantUnhashed || (r.Digest == "") != wantUnhashed {
			t.Errorf("step %d: Unhashed %v, digest %q; want unhashed %v with an empty digest exactly then", r.Step, r.Unhashed, r.Digest, wantUnhashed)
		}
	}
	// Marking an unhashed row hashed (or the reverse) behind statedb's back is detected.
	tamperSQL(t, db, `UPDATE ledger SET unhashed = 0 WHERE step = 2`)
	tamperSQL(t, db, `UPDATE ledger SET unhashed = 1, digest = '' WHERE step = 4`)
	if bad, err := db.CheckLedger(); err != nil || !slices.Equal(bad, []int64{2, 4}) {
		t.Fatalf("CheckLedger = %v, %v; want [2 4]", bad, err)
	}
	// An unhashed row is a row: deleting one is still named.
	tamperSQL(t, db, `DELETE FROM ledger WHERE step = 3`)
	if gaps, err := db.MissingLedgerSteps(); err != nil || !slices.Equal(gaps, []StepRange{{3, 3}}) {
		t.Fatalf("MissingLedgerSteps = %v, %v; want [3]", gaps, err)
	}
}

func TestLedgerEntriesMustSayWhetherTheyAreHashed(t *testing.T) {
	db := openTest(t, Options{})
	withDigest := unhashedEntry(1)
	withDigest.Digest = digest("x")
	noDigest := entry(1, "x")
	noDigest.Digest = ""
	for _, c := range []struct {
		name string
		e    LedgerEntry
		want string
	}{
		{"an unhashed entry with a digest is refused", withDigest, "an unhashed step has no digest"},
		{"an empty digest not marked unhashed is refused", noDigest, "set Unhashed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := db.AppendLedger(c.e)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("AppendLedger = %v; want ErrInvalid saying %q", err, c.want)
			}
		})
	}
}

func TestReplacingWithOrByAnUnhashedRowIsARedoNotADivergence(t *testing.T) {
	db := openTest(t, Options{})
	if err := db.AppendLedger(entry(1, "a")); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendLedger(unhashedEntry(2)); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendLedger(unhashedEntry(1)); err != nil {
		t.Fatalf("an unhashed recomputation of a hashed step: %v", err)
	}
	if err := db.AppendLedger(entry(2, "b")); err != nil {
		t.Fatalf("a hashed recomputation of an unhashed step: %v", err)
	}
	rows, err := db.Ledger(1, 2)
	if err != nil || len(rows) != 2 || !rows[0].Unhashed || rows[1].Unhashed || rows[0].Redos != 1 || rows[1].Redos != 1 {
		t.Fatalf("Ledger = %+v, %v; want step 1 unhashed and step 2 hashed, one redo each", rows, err)
	}
}

// TestMigrationToUnhashedKeepsChangedRowsCorrupt: a state directory of
// schema 4 is refused by a reader until a writer migrates it; migration 5
// re-checksums the rows that matched their schema-4 checksum and leaves a
// row changed before the migration corrupt, naming its step.
func TestMigrationToUnhashedKeepsChangedRowsCorrupt(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for s := int64(1); s <= 3; s++ {
		if err := db.AppendLedger(entry(s, "m")); err != nil {
			t.Fatal(err)
		}
	}
	// What a schema-4 binary left: no unhashed column, checksums over the 11 columns.
	tamperSQL(t, db, `ALTER TABLE ledger DROP COLUMN unhashed`)
	rows, err := db.sql.Query(`SELECT ` + ledgerColumnsV1 + ` FROM ledger ORDER BY step`)
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for rows.Next() {
		vals, err := scanAny(rows, 11)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, ledgerChecksumV1(vals))
	}
	rows.Close()
	for i, sum := range sums {
		tamperSQL(t, db, `UPDATE ledger SET checksum = ? WHERE step = ?`, sum, i+1)
	}
	tamperSQL(t, db, `PRAGMA user_version = 4`)
	tamperSQL(t, db, `UPDATE ledger SET loss = 0 WHERE step = 2`) // changed under schema 4
	db.Close()

	if _, err := OpenReadOnly(dir); err == nil || !strings.Contains(err.Error(), "open it once for writing") {
		t.Fatalf("OpenReadOnly of a schema-4 database: err = %v, want a request to migrate", err)
	}
	db, err = Open(dir)
	if err != nil {
		t.Fatalf("migrating: %v", err)
	}
	defer db.Close()
	if v, _ := sqlitefile.SchemaVersion(db.sql); v != 5 || len(migrations) != 5 {
		t.Fatalf("schema version %d after Open (binary knows %d), want 5", v, len(migrations))
	}
	if bad, err := db.CheckLedger(); err != nil || !slices.Equal(bad, []int64{2}) {
		t.Fatalf("CheckLedger after migration = %v, %v; want [2] (changed before the migration)", bad, err)
	}
	got, err := db.Ledger(0, 10)
	if len(got) != 2 || got[0].Unhashed || got[1].Unhashed || got[0].Digest != digest("m") {
		t.Fatalf("Ledger after migration = %+v, %v; want steps 1 and 3 hashed, as written", got, err)
	}
}
