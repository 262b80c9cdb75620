package statedb

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// NumericsFile is the file in a state directory that records what the
// job's ledger rows were computed with: the numerics record of the engine
// that wrote them (the torch engine's JSON of torch and Python versions,
// fingerprint and canary, the form of its checkpoints' numerics metadata),
// so that a run with no usable checkpoint can still tell whether the rows
// it would recompute and compare were computed with its own numerics.
// Engines whose bits do not depend on where they run (the native engine)
// write none.
const NumericsFile = "numerics.json"

// Numerics returns the numerics record of the ledger ("" and nil when
// none was written: a native job, or a state directory older than the
// record). Errors: the file exists but does not read.
func (db *DB) Numerics() (string, error) {
	b, err := os.ReadFile(filepath.Join(db.dir, NumericsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the ledger's numerics record: %w", err)
	}
	return string(b), nil
}

// SetNumerics records the numerics the ledger's rows are computed with
// from now on (a run that starts the job, resumes it, or starts it over):
// written to a temporary file, fsynced and renamed over NumericsFile.
// Nothing is written when the record is already record.
func (db *DB) SetNumerics(record string) error {
	if err := db.writable("recording the ledger's numerics"); err != nil {
		return err
	}
	if old, err := db.Numerics(); err == nil && old == record {
		return nil
	}
	_, _, err := db.writeFile(filepath.Join(db.dir, NumericsFile), func(w io.Writer) error {
		_, err := io.WriteString(w, record)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the ledger's numerics: %w", err)
	}
	return nil
}
