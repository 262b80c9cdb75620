package statedb

import (
	"database/sql"
	"fmt"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"
)

// migrations[i] brings the schema from user_version i to i+1. Append only:
// never edit a migration that has shipped.
var migrations = []string{
	// 1: initial schema (documented in doc.go).
	`CREATE TABLE job (
		singleton       INTEGER PRIMARY KEY CHECK (singleton = 1),
		job_id          TEXT    NOT NULL,
		name            TEXT    NOT NULL,
		spec            TEXT    NOT NULL,
		logical_workers INTEGER NOT NULL,
		created_ns      INTEGER NOT NULL
	);
	CREATE TABLE ledger (
		step           INTEGER PRIMARY KEY,
		digest         TEXT    NOT NULL,
		tensor_digests TEXT    NOT NULL,
		loss           REAL,
		wall_seconds   REAL    NOT NULL,
		workers        INTEGER NOT NULL,
		placement      TEXT    NOT NULL,
		samples_hash   TEXT    NOT NULL,
		redo           INTEGER NOT NULL,
		redo_count     INTEGER NOT NULL DEFAULT 0,
		time_ns        INTEGER NOT NULL
	);
	CREATE TABLE allocations (
		seq       INTEGER PRIMARY KEY AUTOINCREMENT,
		step      INTEGER NOT NULL,
		workers   INTEGER NOT NULL,
		speeds    TEXT    NOT NULL,
		placement TEXT    NOT NULL,
		reason    TEXT    NOT NULL,
		time_ns   INTEGER NOT NULL
	);
	CREATE TABLE checkpoints (
		step    INTEGER PRIMARY KEY,
		file    TEXT    NOT NULL,
		sha256  TEXT    NOT NULL,
		size    INTEGER NOT NULL,
		time_ns INTEGER NOT NULL
	);
	CREATE TABLE est_contexts (
		step INTEGER NOT NULL REFERENCES checkpoints(step) ON DELETE CASCADE,
		est  INTEGER NOT NULL,
		blob BLOB    NOT NULL,
		PRIMARY KEY (step, est)
	);`,
	// 2: row checksums (checksum.go). Rows written before get theirs from
	// fillChecksums in the same transaction.
	`ALTER TABLE ledger ADD COLUMN checksum TEXT NOT NULL DEFAULT '';
	ALTER TABLE checkpoints ADD COLUMN checksum TEXT NOT NULL DEFAULT '';`,
	// 3: the job's training data (JSON list of {name, size, sha256}, in
	// load order; '' for a job stored before this migration).
	`ALTER TABLE job ADD COLUMN data_files TEXT NOT NULL DEFAULT '';`,
	// 4: the job row's checksum (checksum.go), filled for a row written before.
	`ALTER TABLE job ADD COLUMN checksum TEXT NOT NULL DEFAULT '';`,
	// 5: ledger rows of steps whose digest was not computed (the torch
	// engine hashes every K steps when hashing costs more than 1 % of a
	// step): unhashed = 1 and digest ''. The row checksum now covers the
	// column; fillUnhashedChecksums re-checksums the rows written before
	// whose old checksum matches (a row changed before stays corrupt).
	`ALTER TABLE ledger ADD COLUMN unhashed INTEGER NOT NULL DEFAULT 0;`,
}

// migrationFills[i] runs after migrations[i], in its transaction, to fill
// what SQL alone cannot compute.
var migrationFills = map[int]func(*sql.Tx) error{
	1: fillChecksums,
	3: fillJobChecksum,
	4: fillUnhashedChecksums,
}

// migrate applies the migrations the database has not seen yet, each in its
// own immediate transaction together with its user_version bump.
func migrate(s *sql.DB) error {
	v, err := sqlitefile.SchemaVersion(s)
	if err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("%w: version %d, this binary knows up to %d", ErrSchemaTooNew, v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		if err := applyMigration(s, i); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(s *sql.DB, i int) error {
	tx, err := s.Begin()
	if err != nil {
		return fmt.Errorf("starting migration %d: %w", i+1, err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(migrations[i]); err != nil {
		return fmt.Errorf("applying migration %d: %w", i+1, err)
	}
	if fill := migrationFills[i]; fill != nil {
		if err := fill(tx); err != nil {
			return fmt.Errorf("applying migration %d: %w", i+1, err)
		}
	}
	// PRAGMA does not take bound parameters; i+1 is our own integer.
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
		return fmt.Errorf("recording schema version %d: %w", i+1, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing migration %d: %w", i+1, err)
	}
	return nil
}
