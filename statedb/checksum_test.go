package statedb

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"
)

// cursor is an EST context blob as the trainer writes it.
func cursor(est, pos int) []byte {
	return []byte(fmt.Sprintf(`{"est":%d,"epoch":0,"pos":%d}`, est, pos))
}

// tamperSQL runs a statement on the writer's own connection: the same kind of
// UPDATE that the sqlite3 shell or a disk error makes behind statedb's back.
func tamperSQL(t *testing.T, db *DB, query string, args ...any) {
	t.Helper()
	res, err := db.sql.Exec(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("%s changed no row", query)
	}
}

// TestChangedCheckpointRowsFallBackToThePreviousCheckpoint: every change
// to a checkpoint's rows in state.db (its EST contexts included), even one
// bit, makes LatestCheckpoint skip it for the previous one and say why.
func TestChangedCheckpointRowsFallBackToThePreviousCheckpoint(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, db *DB)
	}{
		{"one digit of an EST cursor changed (pos 3072 -> 3073)", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `UPDATE est_contexts SET blob = CAST(replace(CAST(blob AS TEXT), '"pos":3072', '"pos":3073') AS BLOB) WHERE step = 20 AND est = 1`)
		}},
		{"one bit of an EST cursor flipped, the blob kept a blob", func(t *testing.T, db *DB) {
			b := cursor(1, 3072)
			b[len(b)-2] ^= 0x01
			tamperSQL(t, db, `UPDATE est_contexts SET blob = ? WHERE step = 20 AND est = 1`, b)
		}},
		{"an EST cursor rewritten as text", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `UPDATE est_contexts SET blob = CAST(blob AS TEXT) WHERE step = 20 AND est = 1`)
		}},
		{"an EST's context moved to another EST", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `UPDATE est_contexts SET est = 5 WHERE step = 20 AND est = 1`)
		}},
		{"an EST context deleted", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `DELETE FROM est_contexts WHERE step = 20 AND est = 0`)
		}},
		{"an EST context added", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `INSERT INTO est_contexts (step, est, blob) VALUES (20, 2, X'00')`)
		}},
		{"the recorded file checksum changed", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `UPDATE checkpoints SET sha256 = replace(sha256, substr(sha256, 1, 1), 'x') WHERE step = 20`)
		}},
		{"the recorded size stored as text", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `UPDATE checkpoints SET size = 'x' || size WHERE step = 20`)
		}},
		{"the checksum column emptied", func(t *testing.T, db *DB) {
			tamperSQL(t, db, `UPDATE checkpoints SET checksum = '' WHERE step = 20`)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := openTest(t, Options{})
			for _, s := range []int64{10, 20} {
				ctxs := []ESTContext{{EST: 0, Blob: cursor(0, int(s)*256)}, {EST: 1, Blob: cursor(1, 3072)}}
				if err := db.SaveCheckpoint(s, stepTensors(s, 64), ctxs, nil); err != nil {
					t.Fatal(err)
				}
			}
			c.tamper(t, db)
			if err := db.IntegrityCheck(); err != nil {
				t.Fatalf("the change broke SQLite's own integrity, so the test shows nothing: %v", err)
			}
			cp, skipped, err := db.LatestCheckpoint()
			if err != nil || cp == nil {
				t.Fatalf("LatestCheckpoint = %v, %v, %v", cp, skipped, err)
			}
			if cp.Step != 10 || !slices.Equal(cp.Contexts[0].Blob, cursor(0, 2560)) {
				t.Fatalf("loaded step %d contexts %v, want the step-10 checkpoint", cp.Step, cp.Contexts)
			}
			var ce *CheckpointError
			var re *CorruptRowError
			if len(skipped) != 1 || !errors.As(skipped[0], &ce) || !errors.As(skipped[0], &re) || !errors.Is(skipped[0], ErrCorruptRow) {
				t.Fatalf("skipped = %v, want one CheckpointError wrapping a CorruptRowError", skipped)
			}
			if ce.Step != 20 || re.Step != 20 || re.Table != "checkpoints" {
				t.Fatalf("skipped %+v / %+v, want step 20", ce, re)
			}
			if msg := skipped[0].Error(); !strings.Contains(msg, "step 20") || !strings.Contains(msg, "do not match their checksum") {
				t.Fatalf("message %q does not say which checkpoint and why", msg)
			}
		})
	}
}

// TestChangedLedgerRowsAreNamed: a ledger row changed behind statedb's back
// is reported by step (never as a decode error or a false divergence), the
// other rows stay readable, and recomputing the step rewrites it.
func TestChangedLedgerRowsAreNamed(t *testing.T) {
	cases := []struct {
		name   string
		tamper string
	}{
		{"one hex digit of the digest changed", `UPDATE ledger SET digest = substr(digest, 1, 10) || (CASE substr(digest, 11, 1) WHEN '0' THEN '1' ELSE '0' END) || substr(digest, 12) WHERE step = 2`},
		{"a byte of the tensor digests changed (no longer JSON)", `UPDATE ledger SET tensor_digests = replace(tensor_digests, '[', '{') WHERE step = 2`},
		{"the loss changed", `UPDATE ledger SET loss = loss + 1e-9 WHERE step = 2`},
		{"the loss nulled", `UPDATE ledger SET loss = NULL WHERE step = 2`},
		{"workers stored as text", `UPDATE ledger SET workers = 'two' WHERE step = 2`},
		{"the redo count changed", `UPDATE ledger SET redo_count = 5 WHERE step = 2`},
		{"the time changed", `UPDATE ledger SET time_ns = time_ns + 1 WHERE step = 2`},
		{"the checksum itself changed", `UPDATE ledger SET checksum = 'ab' || substr(checksum, 3) WHERE step = 2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := openTest(t, Options{})
			for s := int64(1); s <= 3; s++ {
				if err := db.AppendLedger(entry(s, "d")); err != nil {
					t.Fatal(err)
				}
			}
			tamperSQL(t, db, c.tamper)
			got, err := db.Ledger(0, 10)
			var le *CorruptLedgerError
			if !errors.As(err, &le) || !errors.Is(err, ErrCorruptRow) || !slices.Equal(le.Steps, []int64{2}) {
				t.Fatalf("Ledger err = %v, want a CorruptLedgerError naming step 2", err)
			}
			if !strings.Contains(err.Error(), "row of step 2 ") {
				t.Fatalf("message %q does not name step 2", err)
			}
			if len(got) != 2 || got[0].Step != 1 || got[1].Step != 3 {
				t.Fatalf("Ledger returned %d intact rows, want steps 1 and 3", len(got))
			}
			if bad, err := db.CheckLedger(); err != nil || !slices.Equal(bad, []int64{2}) {
				t.Fatalf("CheckLedger = %v, %v, want [2]", bad, err)
			}
			// A resumed run recomputes step 2: the row is rewritten.
			if err := db.AppendLedger(entry(2, "d")); err != nil {
				t.Fatalf("recomputing step 2: %v", err)
			}
			if bad, err := db.CheckLedger(); err != nil || len(bad) != 0 {
				t.Fatalf("after recomputing, CheckLedger = %v, %v", bad, err)
			}
			row, err := db.Ledger(2, 2)
			if err != nil || len(row) != 1 || !row[0].Redo || row[0].Redos != 1 {
				t.Fatalf("recomputed row = %+v, %v; want Redo with one redo", row, err)
			}
		})
	}
}

// TestChecksumsOfSpecialValuesRoundTrip: values SQLite stores differently
// from how Go passed them (NaN as NULL, -0 as +0, integral reals) still
// match their checksums when read back.
func TestChecksumsOfSpecialValuesRoundTrip(t *testing.T) {
	db := openTest(t, Options{})
	for i, loss := range []float64{math.NaN(), math.Copysign(0, -1), math.Inf(1), math.Inf(-1), 2, 1e300, math.SmallestNonzeroFloat64} {
		e := entry(int64(i), "v")
		e.Loss = loss
		e.WallSeconds = math.Copysign(0, -1)
		e.TensorDigests = nil
		if err := db.AppendLedger(e); err != nil {
			t.Fatal(err)
		}
	}
	if bad, err := db.CheckLedger(); err != nil || len(bad) != 0 {
		t.Fatalf("CheckLedger = %v, %v; want every row intact", bad, err)
	}
	if _, err := db.Ledger(0, 100); err != nil {
		t.Fatalf("Ledger: %v", err)
	}
}

// TestMigrationToChecksumsCoversExistingRows: a state directory written by
// a binary of schema version 1 gets checksums for its rows when a writer
// opens it; the rows then read as before and later changes are detected.
func TestMigrationToChecksumsCoversExistingRows(t *testing.T) {
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
	if err := db.SaveCheckpoint(3, stepTensors(3, 64), []ESTContext{{EST: 0, Blob: cursor(0, 24)}}, nil); err != nil {
		t.Fatal(err)
	}
	// Turn it into what a version-1 binary left: no checksum columns (and
	// no data_files, which migration 3 adds, nor the job's checksum, 4, nor
	// the ledger's unhashed column, 5).
	for _, q := range []string{
		`ALTER TABLE ledger DROP COLUMN unhashed`,
		`ALTER TABLE job DROP COLUMN checksum`,
		`ALTER TABLE job DROP COLUMN data_files`,
		`ALTER TABLE ledger DROP COLUMN checksum`,
		`ALTER TABLE checkpoints DROP COLUMN checksum`,
		`PRAGMA user_version = 1`,
	} {
		if _, err := db.sql.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	if _, err := OpenReadOnly(dir); err == nil || !strings.Contains(err.Error(), "open it once for writing") {
		t.Fatalf("OpenReadOnly of a version-1 database: err = %v, want a request to migrate", err)
	}
	db, err = Open(dir)
	if err != nil {
		t.Fatalf("migrating: %v", err)
	}
	defer db.Close()
	if v, _ := sqlitefile.SchemaVersion(db.sql); v != len(migrations) {
		t.Fatalf("schema version %d after Open, want %d", v, len(migrations))
	}
	rows, err := db.Ledger(0, 10)
	if err != nil || len(rows) != 3 {
		t.Fatalf("Ledger after migration = %d rows, %v", len(rows), err)
	}
	cp, skipped, err := db.LatestCheckpoint()
	if err != nil || len(skipped) != 0 || cp == nil || cp.Step != 3 {
		t.Fatalf("LatestCheckpoint after migration = %v, %v, %v", cp, skipped, err)
	}
	tamperSQL(t, db, `UPDATE est_contexts SET blob = X'00' WHERE step = 3`)
	tamperSQL(t, db, `UPDATE ledger SET loss = 0 WHERE step = 1`)
	if _, skipped, _ := db.LatestCheckpoint(); len(skipped) != 1 || !errors.Is(skipped[0], ErrCorruptRow) {
		t.Fatalf("a change after migration: skipped = %v, want the checkpoint reported", skipped)
	}
	if bad, _ := db.CheckLedger(); !slices.Equal(bad, []int64{1}) {
		t.Fatalf("a change after migration: CheckLedger = %v, want [1]", bad)
	}
}

// FuzzLedgerChecksumRoundTrip: whatever valid entry AppendLedger stores
// reads back matching its checksum (the checksum is computed over what
// SQLite gives back, so storage conversions such as -0, NaN, integral
// reals, NUL bytes or invalid UTF-8 in text must not break it), and
// changing any one stored column is detected.
func FuzzLedgerChecksumRoundTrip(f *testing.F) {
	f.Add(int64(3), []byte{0xab}, 0.5, 0.25, 2, "0-3|4-7", "s", int64(1700000000))
	f.Add(int64(0), []byte{0}, math.Copysign(0, -1), 0.0, 0, "", "\x00\xff", int64(-1))
	f.Add(int64(1<<40), []byte{1, 2}, math.NaN(), 1e300, 1<<30, "é", "", int64(math.MaxInt64))
	db := openTest(f, Options{})
	f.Fuzz(func(t *testing.T, step int64, d []byte, loss, wall float64, workers int, placement, samples string, ns int64) {
		e := LedgerEntry{Step: step, Digest: fmt.Sprintf("%s%x", DigestPrefix, d), Loss: loss, WallSeconds: wall,
			Workers: workers, Placement: placement, SamplesHash: samples, Time: time.Unix(0, ns)}
		if e.validate() != nil || e.Time.IsZero() {
			return
		}
		if _, err := db.sql.Exec(`DELETE FROM ledger`); err != nil {
			t.Fatal(err)
		}
		if err := db.AppendLedger(e); err != nil {
			t.Fatalf("AppendLedger(%+v): %v", e, err)
		}
		got, err := db.Ledger(step, step)
		if err != nil || len(got) != 1 {
			t.Fatalf("Ledger after storing %+v: %v, %v", e, got, err)
		}
		if got[0].Digest != e.Digest || got[0].Placement != placement || got[0].SamplesHash != samples {
			t.Fatalf("read back %+v, stored %+v", got[0], e)
		}
		tamperSQL(t, db, `UPDATE ledger SET placement = placement || 'x'`)
		if bad, err := db.CheckLedger(); err != nil || !slices.Equal(bad, []int64{step}) {
			t.Fatalf("after changing placement: CheckLedger = %v, %v", bad, err)
		}
	})
}
