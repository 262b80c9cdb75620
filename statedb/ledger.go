package statedb

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// DigestPrefix starts every digest the ledger accepts: "sha256:<hex>".
const DigestPrefix = "sha256:"

// TensorDigest is the digest of one parameter or buffer tensor: its
// canonical name and a (possibly shortened) hex hash of its bytes.
type TensorDigest struct{ Name, Digest string }

// LedgerEntry is the record of one completed training step.
type LedgerEntry struct {
	// Step is the completed step's index (>= 0).
	Step int64
	// Digest is "sha256:<hex>" over all parameters and buffers after the
	// step, in canonical order; empty when Unhashed.
	Digest string
	// Unhashed marks a step whose digest was not computed: the engine
	// hashes every K steps because hashing costs more than 1 % of a step
	// (the torch engine with large models; the native engine hashes every
	// step). Digest and TensorDigests are then empty. Stored as
	// ledger.unhashed = 1 (schema 5), covered by the row's checksum.
	Unhashed bool
	// TensorDigests are per-tensor digests in canonical order, used to name
	// the tensors that differ when two ledgers disagree. May be empty.
	TensorDigests []TensorDigest
	// Loss is the step's mean training loss, stored as an SQLite REAL:
	// exact for every value except that NaN is stored as SQL NULL (and
	// read back as NaN) and -0 reads back as +0.
	Loss float64
	// WallSeconds is the step's wall-clock time in seconds.
	WallSeconds float64
	// Workers is the number of physical workers that ran the step.
	Workers int
	// Placement is the EST placement, e.g. "0-3|4-7" (ESTs per worker).
	Placement string
	// SamplesHash is a hash of the sample indices each EST consumed in the
	// step, so tests can prove nothing was skipped or repeated.
	SamplesHash string
	// Redo marks a step that was executed more than once (redone after a
	// crash, or re-executed after a resume). AppendLedger sets it when it
	// replaces an existing row or Redos is positive.
	Redo bool
	// Redos counts the step's executions beyond the first: the caller
	// passes how often it redid the step before recording it (workers lost
	// mid-step), and AppendLedger adds the stored row's count plus one when
	// it replaces that row (re-executed after a resume). Negative is
	// invalid.
	Redos int
	// Time is when the step completed; zero means now.
	Time time.Time
}

// Validate reports what makes e unfit to be recorded (wrapping
// ErrInvalid): a negative step, worker or redo count, or a digest that
// disagrees with Unhashed. AppendLedger and ImportLedger check it.
func (e LedgerEntry) Validate() error { return e.validate() }

func (e LedgerEntry) validate() error {
	if e.Step < 0 {
		return invalidf("LedgerEntry.Step is %d, want >= 0", e.Step)
	}
	switch {
	case e.Unhashed && (e.Digest != "" || len(e.TensorDigests) > 0):
		return invalidf("LedgerEntry.Digest is %q with Unhashed set: an unhashed step has no digest", e.Digest)
	case !e.Unhashed:
		if err := checkDigest(e.Digest); err != nil {
			return invalidf("LedgerEntry.Digest: %v (set Unhashed for a step whose digest was not computed)", err)
		}
	}
	if e.Workers < 0 {
		return invalidf("LedgerEntry.Workers is %d, want >= 0", e.Workers)
	}
	if e.Redos < 0 {
		return invalidf("LedgerEntry.Redos is %d, want >= 0", e.Redos)
	}
	if math.IsNaN(e.WallSeconds) || math.IsInf(e.WallSeconds, 0) {
		return invalidf("LedgerEntry.WallSeconds is %v, want a finite number", e.WallSeconds)
	}
	return nil
}

func checkDigest(d string) error {
	h, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || h == "" {
		return fmt.Errorf("%q does not have the form %s<hex>", d, DigestPrefix)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return fmt.Errorf("%q does not have the form %s<hex>: %w", d, DigestPrefix, err)
	}
	return nil
}

// AppendLedger records a completed step. When the step is already in the
// ledger (it was re-executed after a resume or a crash), the row is replaced
// only if the digests agree; its redo counter is then incremented and Redo
// set. When either the stored row or e is Unhashed there is nothing to
// compare: the row is replaced (counted as a redo), and a stored digest is
// kept only by recording e hashed (the trainer hashes every step it
// re-executes whose row is hashed). When they differ the ledger keeps the old row and AppendLedger returns
// a *DivergenceError (matching ErrDivergence) naming the differing tensors;
// what to do about it is the caller's decision. A stored row that does not
// match its checksum (ErrCorruptRow) holds no digest to compare with: it is
// replaced, counted as one redo. Invalid entries wrap ErrInvalid.
func (db *DB) AppendLedger(e LedgerEntry) error {
	if err := db.writable("appending to ledger"); err != nil {
		return err
	}
	if err := e.validate(); err != nil {
		return fmt.Errorf("appending step %d to ledger: %w", e.Step, err)
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	tds, err := json.Marshal(orEmpty(e.TensorDigests))
	if err != nil {
		return fmt.Errorf("appending step %d to ledger: encoding tensor digests: %w", e.Step, err)
	}
	err = db.immediate(context.Background(), func(tx *sql.Tx) error {
		return appendLedgerTx(tx, e, string(tds))
	})
	if err != nil {
		return fmt.Errorf("appending step %d to ledger: %w", e.Step, err)
	}
	return nil
}

func appendLedgerTx(tx *sql.Tx, e LedgerEntry, tds string) error {
	old, err := scanLedger(tx.QueryRow(ledgerSelect+` WHERE step = ?`, e.Step))
	redos := e.Redos
	var corrupt *CorruptRowError
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case errors.As(err, &corrupt):
		// The stored row cannot be trusted, so there is no digest to
		// compare with: the recomputed step replaces it, counted as
		// one redo (the stored count is unknown).
		redos++
	case err != nil:
		return err
	case old.Unhashed || e.Unhashed:
		redos += old.Redos + 1
	case old.Digest != e.Digest:
		return &DivergenceError{Step: e.Step, Stored: old.Digest, Got: e.Digest,
			Tensors: DivergentTensors(old.TensorDigests, e.TensorDigests)}
	default:
		redos += old.Redos + 1
	}
	e.Redos = redos
	vals := ledgerValues(e, tds)
	_, err = tx.Exec(`INSERT OR REPLACE INTO ledger (`+ledgerColumns+`, checksum) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		append(vals, ledgerChecksum(vals))...)
	return err
}

// ledgerValues is row e as the ledger's columns (ledgerColumns), its
// tensor digests encoded as tds: Redo is set when Redos is positive, a NaN
// loss is SQL NULL.
func ledgerValues(e LedgerEntry, tds string) []any {
	var loss any
	if !math.IsNaN(e.Loss) {
		loss = e.Loss
	}
	var redo, unhashed int64
	if e.Redo || e.Redos > 0 {
		redo = 1
	}
	if e.Unhashed {
		unhashed = 1
	}
	return []any{e.Step, e.Digest, tds, loss, e.WallSeconds, int64(e.Workers), e.Placement,
		e.SamplesHash, redo, int64(e.Redos), e.Time.UnixNano(), unhashed}
}

// DivergentTensors returns the names whose digests differ between a and b,
// matching by name, in a's order followed by names only b has. Tensors
// present on one side only count as differing.
func DivergentTensors(a, b []TensorDigest) []string {
	bm := make(map[string]string, len(b))
	for _, t := range b {
		bm[t.Name] = t.Digest
	}
	var diff []string
	seen := make(map[string]bool, len(a))
	for _, t := range a {
		seen[t.Name] = true
		if d, ok := bm[t.Name]; !ok || d != t.Digest {
			diff = append(diff, t.Name)
		}
	}
	for _, t := range b {
		if !seen[t.Name] {
			diff = append(diff, t.Name)
		}
	}
	return diff
}

const ledgerSelect = `SELECT ` + ledgerColumns + `, checksum FROM ledger`

type scanner interface{ Scan(dest ...any) error }

// scanLedger reads one row of ledgerSelect and checks it against its
// checksum before decoding it: a mismatch gives a *CorruptRowError (without
// Dir), never a decode error.
func scanLedger(row scanner) (LedgerEntry, error) {
	vals := make([]any, ledgerWidth+1)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := row.Scan(ptrs...); err != nil {
		return LedgerEntry{}, err
	}
	step, _ := vals[0].(int64) // INTEGER PRIMARY KEY: always an integer
	stored, _ := vals[ledgerWidth].(string)
	if got := ledgerChecksum(vals[:ledgerWidth]); got != stored {
		return LedgerEntry{}, &CorruptRowError{Table: "ledger", Step: step, Want: stored, Got: got}
	}
	return decodeLedger(vals[:ledgerWidth])
}

// decodeLedger converts the stored values of a ledger row (checked against
// their checksum) into an entry.
func decodeLedger(v []any) (LedgerEntry, error) {
	d := storedValues{values: v, names: strings.Fields(strings.ReplaceAll(ledgerColumns, ",", " "))}
	e := LedgerEntry{
		Step: d.int(0), Digest: d.str(1), WallSeconds: d.float(4), Workers: int(d.int(5)),
		Placement: d.str(6), SamplesHash: d.str(7), Redo: d.int(8) != 0, Redos: int(d.int(9)),
		Unhashed: d.int(11) != 0,
	}
	tds := d.str(2)
	ns := d.int(10)
	e.Loss = math.NaN()
	if v[3] != nil {
		e.Loss = d.float(3)
	}
	if d.err != nil {
		return LedgerEntry{}, fmt.Errorf("decoding ledger row of step %d: %w", e.Step, d.err)
	}
	if err := json.Unmarshal([]byte(tds), &e.TensorDigests); err != nil {
		return LedgerEntry{}, fmt.Errorf("decoding tensor digests of step %d: %w", e.Step, err)
	}
	if len(e.TensorDigests) == 0 {
		e.TensorDigests = nil
	}
	e.Time = time.Unix(0, ns).UTC()
	return e, nil
}

// storedValues converts scanned column values, remembering the first
// value of an unexpected storage class.
type storedValues struct {
	values []any
	names  []string
	err    error
}

func (d *storedValues) fail(i int, want string) {
	if d.err == nil {
		d.err = fmt.Errorf("column %s holds %T, want %s", d.names[i], d.values[i], want)
	}
}

func (d *storedValues) int(i int) int64 {
	v, ok := d.values[i].(int64)
	if !ok {
		d.fail(i, "an integer")
	}
	return v
}

func (d *storedValues) float(i int) float64 {
	switch v := d.values[i].(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	}
	d.fail(i, "a real number")
	return 0
}

func (d *storedValues) str(i int) string {
	switch v := d.values[i].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	d.fail(i, "text")
	return ""
}

// Ledger returns the entries with from <= Step <= to in step order (empty,
// not an error, when there are none). Rows that do not match their
// checksums are left out and named by a *CorruptLedgerError (matching
// ErrCorruptRow) returned with the intact entries; any other error returns
// no entries.
func (db *DB) Ledger(from, to int64) ([]LedgerEntry, error) {
	return db.LedgerPage(from, to, -1)
}

// LedgerPage is Ledger reading at most limit stored rows (a negative limit:
// all), the first in step order: for a reader that pages through a long
// ledger (a standby's copy, runtime/cluster ledgerfeed.go). Corrupt rows
// count against the limit; a *CorruptLedgerError names them.
func (db *DB) LedgerPage(from, to int64, limit int) ([]LedgerEntry, error) {
	rows, err := db.sql.Query(ledgerSelect+` WHERE step BETWEEN ? AND ? ORDER BY step LIMIT ?`, from, to, limit)
	if err != nil {
		return nil, fmt.Errorf("reading ledger steps %d..%d: %w", from, to, err)
	}
	defer rows.Close()
	var out []LedgerEntry
	var corrupt []int64
	for rows.Next() {
		e, err := scanLedger(rows)
		var ce *CorruptRowError
		if errors.As(err, &ce) {
			corrupt = append(corrupt, ce.Step)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading ledger steps %d..%d: %w", from, to, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading ledger steps %d..%d: %w", from, to, err)
	}
	if len(corrupt) > 0 {
		return out, &CorruptLedgerError{Dir: db.dir, Steps: corrupt}
	}
	return out, nil
}

// CheckLedger checks every ledger row against its checksum without
// decoding it (memory stays bounded by one row) and returns the steps of
// the rows that do not match, in increasing order. err is non-nil only when
// the database cannot be read.
func (db *DB) CheckLedger() (corrupt []int64, err error) {
	rows, err := db.sql.Query(ledgerSelect + ` ORDER BY step`)
	if err != nil {
		return nil, fmt.Errorf("checking ledger rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := scanAny(rows, ledgerWidth+1)
		if err != nil {
			return nil, fmt.Errorf("checking ledger rows: %w", err)
		}
		if stored, _ := vals[ledgerWidth].(string); ledgerChecksum(vals[:ledgerWidth]) != stored {
			step, _ := vals[0].(int64)
			corrupt = append(corrupt, step)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("checking ledger rows: %w", err)
	}
	return corrupt, nil
}

// StepRange is the steps From..To, both included.
type StepRange struct{ From, To int64 }

func (r StepRange) String() string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// MissingLedgerSteps returns the steps between 1 and the last recorded one
// that have no ledger row, as ranges in increasing order. A run records every
// step it completes (a resumed run rewrites the steps after its checkpoint),
// so a gap means rows were deleted outside easyscale: checksums cover
// changed rows, this covers deleted ones. err is non-nil only when the
// database cannot be read.
func (db *DB) MissingLedgerSteps() ([]StepRange, error) {
	rows, err := db.sql.Query(`SELECT step FROM ledger ORDER BY step`)
	if err != nil {
		return nil, fmt.Errorf("checking ledger steps: %w", err)
	}
	defer rows.Close()
	var gaps []StepRange
	next := int64(1)
	for rows.Next() {
		var step int64
		if err := rows.Scan(&step); err != nil {
			return nil, fmt.Errorf("checking ledger steps: %w", err)
		}
		if step > next {
			gaps = append(gaps, StepRange{next, step - 1})
		}
		next = max(next, step+1)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("checking ledger steps: %w", err)
	}
	return gaps, nil
}

// LastStep returns the highest step in the ledger; ok is false when the
// ledger is empty.
func (db *DB) LastStep() (step int64, ok bool, err error) {
	var s sql.NullInt64
	if err := db.sql.QueryRow(`SELECT MAX(step) FROM ledger`).Scan(&s); err != nil {
		return 0, false, fmt.Errorf("reading last ledger step: %w", err)
	}
	return s.Int64, s.Valid, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ImportLedger adds rows of another copy of this job's ledger (a standby's
// copy of the coordinator's, runtime/cluster standby.go) in one
// transaction and returns how many it added. A row whose step this ledger
// holds already is left as stored (the rows describe the same committed
// steps; the stored row is this directory's own record), so importing
// twice adds nothing. Each added row keeps its fields (time, redo count,
// digests) and gets this database's checksum. An invalid row (ErrInvalid)
// adds nothing of the whole import.
func (db *DB) ImportLedger(rows []LedgerEntry) (added int, err error) {
	if err := db.writable("importing ledger rows"); err != nil {
		return 0, err
	}
	tds := make([]string, len(rows))
	for i, e := range rows {
		if err := e.validate(); err != nil {
			return 0, fmt.Errorf("importing ledger step %d: %w", e.Step, err)
		}
		if e.Time.IsZero() {
			return 0, fmt.Errorf("importing ledger step %d: %w", e.Step, invalidf("LedgerEntry.Time is zero: an imported row keeps its own time"))
		}
		b, err := json.Marshal(orEmpty(e.TensorDigests))
		if err != nil {
			return 0, fmt.Errorf("importing ledger step %d: encoding tensor digests: %w", e.Step, err)
		}
		tds[i] = string(b)
	}
	err = db.immediate(context.Background(), func(tx *sql.Tx) error {
		// One prepared INSERT OR IGNORE a row: a stored step (the
		// primary key) is left as stored, without reading it back.
		stmt, err := tx.Prepare(`INSERT OR IGNORE INTO ledger (` + ledgerColumns + `, checksum) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		added = 0
		for i, e := range rows {
			res, err := stmt.Exec(append(ledgerValues(e, tds[i]), ledgerChecksum(ledgerValues(e, tds[i])))...)
			if err != nil {
				return fmt.Errorf("step %d: %w", e.Step, err)
			}
			if n, err := res.RowsAffected(); err == nil {
				added += int(n)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("importing %d ledger rows: %w", len(rows), err)
	}
	return added, nil
}
