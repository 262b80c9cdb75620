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
	// step, in canonical order.
	Digest string
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

func (e LedgerEntry) validate() error {
	if e.Step < 0 {
		return invalidf("LedgerEntry.Step is %d, want >= 0", e.Step)
	}
	if err := checkDigest(e.Digest); err != nil {
		return invalidf("LedgerEntry.Digest: %v", err)
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
// set. When they differ the ledger keeps the old row and AppendLedger returns
// a *DivergenceError (matching ErrDivergence) naming the differing tensors;
// what to do about it is the caller's decision. Invalid entries wrap
// ErrInvalid.
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
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case old.Digest != e.Digest:
		return &DivergenceError{Step: e.Step, Stored: old.Digest, Got: e.Digest,
			Tensors: DivergentTensors(old.TensorDigests, e.TensorDigests)}
	default:
		redos += old.Redos + 1
	}
	e.Redo = e.Redo || redos > 0
	_, err = tx.Exec(`INSERT OR REPLACE INTO ledger (step, digest, tensor_digests, loss, wall_seconds,
		workers, placement, samples_hash, redo, redo_count, time_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		e.Step, e.Digest, tds, nullableFloat(e.Loss), e.WallSeconds, e.Workers, e.Placement,
		e.SamplesHash, e.Redo, redos, e.Time.UnixNano())
	return err
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

const ledgerSelect = `SELECT step, digest, tensor_digests, loss, wall_seconds, workers, placement,
	samples_hash, redo, redo_count, time_ns FROM ledger`

type scanner interface{ Scan(dest ...any) error }

func scanLedger(row scanner) (LedgerEntry, error) {
	var e LedgerEntry
	var tds string
	var loss sql.NullFloat64
	var ns int64
	err := row.Scan(&e.Step, &e.Digest, &tds, &loss, &e.WallSeconds, &e.Workers, &e.Placement,
		&e.SamplesHash, &e.Redo, &e.Redos, &ns)
	if err != nil {
		return LedgerEntry{}, err
	}
	if err := json.Unmarshal([]byte(tds), &e.TensorDigests); err != nil {
		return LedgerEntry{}, fmt.Errorf("decoding tensor digests of step %d: %w", e.Step, err)
	}
	if len(e.TensorDigests) == 0 {
		e.TensorDigests = nil
	}
	e.Loss = math.NaN()
	if loss.Valid {
		e.Loss = loss.Float64
	}
	e.Time = time.Unix(0, ns).UTC()
	return e, nil
}

// Ledger returns the entries with from <= Step <= to in step order (empty,
// not an error, when there are none).
func (db *DB) Ledger(from, to int64) ([]LedgerEntry, error) {
	rows, err := db.sql.Query(ledgerSelect+` WHERE step BETWEEN ? AND ? ORDER BY step`, from, to)
	if err != nil {
		return nil, fmt.Errorf("reading ledger steps %d..%d: %w", from, to, err)
	}
	defer rows.Close()
	var out []LedgerEntry
	for rows.Next() {
		e, err := scanLedger(rows)
		if err != nil {
			return nil, fmt.Errorf("reading ledger steps %d..%d: %w", from, to, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading ledger steps %d..%d: %w", from, to, err)
	}
	return out, nil
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

func nullableFloat(f float64) sql.NullFloat64 {
	return sql.NullFloat64{Float64: f, Valid: !math.IsNaN(f)}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
