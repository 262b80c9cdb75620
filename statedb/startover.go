package statedb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// SupersededDir is the directory under a state directory that keeps the
// state of runs a job started over from (StartOver): one subdirectory per
// start-over, itself a complete state directory (state.db and
// checkpoints/) that OpenReadOnly, `easyscale status` and `easyscale
// verify` read.
const SupersededDir = "superseded"

// StartOver sets the job back to step 0 and keeps what it replaces: it
// copies the database (SQLite's VACUUM INTO, a consistent snapshot) and
// hard-links every recorded checkpoint file into a new directory
// DIR/superseded/<UTC time>/, then removes the ledger, the checkpoints and
// their logical-worker contexts in one transaction committed with
// synchronous=FULL, and last deletes the checkpoint files. The job row and
// the allocation history stay (the job is the same job). It returns the
// new directory's path.
//
// A job starts over when its checkpoints were computed with other numerics
// than this run's (torchengine.ResumeError: another GPU type, CPU ISA or
// torch release) and its owner accepts a restart (easyscale run
// --on-other-numerics=start-over): its result is then bit-identical to a
// fixed run in the new environment, from step 0.
//
// Crash safety: until the transaction commits the live state is unchanged
// (a crash leaves an incomplete superseded directory beside it, and the
// next StartOver makes a new one); after it, the copy is complete and the
// live files not yet deleted are unrecorded leftovers that Open removes.
// Errors name what was being done; nothing live is changed when the copy or
// a link fails (a full disk, a filesystem without hard links).
func (db *DB) StartOver() (string, error) {
	if err := db.writable("starting over"); err != nil {
		return "", err
	}
	files, err := queryStrings(db.sql, `SELECT file FROM checkpoints ORDER BY step`)
	if err != nil {
		return "", fmt.Errorf("starting over: listing recorded checkpoints: %w", err)
	}
	parent := filepath.Join(db.dir, SupersededDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("starting over: creating %s: %w", parent, err)
	}
	archive, err := os.MkdirTemp(parent, time.Now().UTC().Format("20060102T150405Z")+"-")
	if err != nil {
		return "", fmt.Errorf("starting over: creating the directory that keeps the superseded state: %w", err)
	}
	if err := db.copyInto(archive, files); err != nil {
		return "", fmt.Errorf("starting over: keeping the superseded state in %s (the live state is unchanged): %w", archive, err)
	}
	if err := db.clearSteps(); err != nil {
		return "", fmt.Errorf("starting over: clearing the ledger and checkpoints (the superseded state is kept in %s): %w", archive, err)
	}
	for _, f := range files {
		path := filepath.Join(db.dir, CheckpointDir, filepath.Base(f))
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return archive, fmt.Errorf("starting over: removing %s (unrecorded now; the next open removes it): %w", path, err)
		}
	}
	return archive, nil
}

// copyInto writes a snapshot of the database and links of the checkpoint
// files into dir, syncing both directories.
func (db *DB) copyInto(dir string, files []string) error {
	if _, err := db.sql.Exec(`VACUUM INTO ?`, filepath.Join(dir, DBFile)); err != nil {
		return fmt.Errorf("copying %s: %w", DBFile, err)
	}
	ckdir := filepath.Join(dir, CheckpointDir)
	if err := os.Mkdir(ckdir, 0o700); err != nil {
		return err
	}
	for _, f := range files {
		name := filepath.Base(f)
		if err := os.Link(filepath.Join(db.dir, CheckpointDir, name), filepath.Join(ckdir, name)); err != nil {
			return fmt.Errorf("linking checkpoint %s: %w", name, err)
		}
	}
	if err := syncDir(ckdir); err != nil {
		return err
	}
	return syncDir(dir)
}

// clearSteps deletes the ledger, the checkpoints and their contexts in one
// transaction committed with synchronous=FULL.
func (db *DB) clearSteps() error {
	ctx := context.Background()
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
		return err
	}
	defer conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`DELETE FROM est_contexts; DELETE FROM checkpoints; DELETE FROM ledger`); err != nil {
		return err
	}
	return tx.Commit()
}
