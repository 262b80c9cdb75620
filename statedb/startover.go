package statedb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
// hard-links every recorded checkpoint file that is there (a file already
// lost is left out, as LatestCheckpoint skips it) and the numerics record
// into a new directory, then removes the ledger, the checkpoints, their
// logical-worker contexts and the allocation history in one transaction
// committed with synchronous=FULL, and last deletes the checkpoint files.
// The job row stays (the job is the same job); the copy keeps the old
// run's allocations. It returns the copy's path,
// DIR/superseded/<UTC time to the nanosecond> (names sort oldest first).
//
// A job starts over when its state was computed with other numerics than
// this run's (torchengine.ResumeError: another GPU type, CPU ISA or torch
// release) and its owner accepts a restart (easyscale run
// --on-other-numerics=start-over): its result is then bit-identical to a
// fixed run in the new environment, from step 0.
//
// Crash safety: the copy is written as superseded/.incomplete-<time>,
// renamed .copied-<time> once complete and fsynced, and renamed <time>
// only after the transaction committed, so a listed copy (Superseded) is
// always a start-over that happened. Open finishes or undoes what a crash
// left (recoverStartOver): an incomplete copy is removed; a complete one
// is kept when the live ledger and checkpoints are empty (the transaction
// committed) and removed otherwise (the live state is unchanged). Errors
// name what was being done; nothing live is changed when the copy fails
// (a full disk, a filesystem without hard links).
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
	name := time.Now().UTC().Format("20060102T150405.000000000Z")
	tmp, copied, archive := filepath.Join(parent, incompletePrefix+name), filepath.Join(parent, copiedPrefix+name), filepath.Join(parent, name)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", fmt.Errorf("starting over: creating the directory that keeps the superseded state: %w", err)
	}
	if err := db.copyInto(tmp, files); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("starting over: keeping the superseded state (the live state is unchanged): %w", err)
	}
	if err := renameSynced(tmp, copied); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("starting over: keeping the superseded state (the live state is unchanged): %w", err)
	}
	if err := db.clearSteps(); err != nil {
		os.RemoveAll(copied)
		return "", fmt.Errorf("starting over: clearing the ledger and checkpoints (the live state is unchanged): %w", err)
	}
	if err := renameSynced(copied, archive); err != nil {
		return "", fmt.Errorf("starting over: naming the superseded state %s (the next open does): %w", archive, err)
	}
	for _, f := range files {
		path := filepath.Join(db.dir, CheckpointDir, filepath.Base(f))
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return archive, fmt.Errorf("starting over: removing %s (unrecorded now; the next open removes it): %w", path, err)
		}
	}
	return archive, nil
}

// renameSynced renames from to to and fsyncs their directory.
func renameSynced(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// The prefixes of a superseded copy's names while StartOver writes it
// (incomplete) and once it is complete but the live state not yet cleared
// (copied). Superseded skips both; recoverStartOver settles them.
const (
	incompletePrefix = ".incomplete-"
	copiedPrefix     = ".copied-"
)

// recoverStartOver settles what an interrupted StartOver left under
// DIR/superseded (see StartOver): it removes incomplete copies, and names
// a complete one when the live ledger and checkpoints are empty (its
// transaction committed), removing it otherwise.
func (db *DB) recoverStartOver() error {
	parent := filepath.Join(db.dir, SupersededDir)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil // none kept
	}
	var cleared *bool
	for _, e := range entries {
		path := filepath.Join(parent, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), incompletePrefix):
			if err := os.RemoveAll(path); err != nil {
				return fmt.Errorf("removing an interrupted start-over's copy %s: %w", path, err)
			}
		case strings.HasPrefix(e.Name(), copiedPrefix):
			if cleared == nil {
				empty, err := db.liveStateEmpty()
				if err != nil {
					return fmt.Errorf("settling an interrupted start-over: %w", err)
				}
				cleared = &empty
			}
			if *cleared {
				err = renameSynced(path, filepath.Join(parent, strings.TrimPrefix(e.Name(), copiedPrefix)))
			} else {
				err = os.RemoveAll(path)
			}
			if err != nil {
				return fmt.Errorf("settling an interrupted start-over's copy %s: %w", path, err)
			}
		}
	}
	return nil
}

// UnnamedCopy is the copy of a start-over killed after it cleared the live
// state but before it named the copy: Path (STATE/superseded/.copied-NAME)
// is renamed Final (STATE/superseded/NAME) by the next Open.
type UnnamedCopy struct{ Path, Final string }

// InterruptedStartOvers lists the copies of start-overs that cleared the
// live state but were killed before naming their copy (the live ledger
// and checkpoints empty); none otherwise. It reads only, so a read-only
// DB (easyscale status) can report them. Errors: the database does not
// read.
func (db *DB) InterruptedStartOvers() ([]UnnamedCopy, error) {
	parent := filepath.Join(db.dir, SupersededDir)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, nil // none kept
	}
	var copies []UnnamedCopy
	for _, e := range entries {
		if name, ok := strings.CutPrefix(e.Name(), copiedPrefix); ok {
			copies = append(copies, UnnamedCopy{Path: filepath.Join(parent, e.Name()), Final: filepath.Join(parent, name)})
		}
	}
	if len(copies) == 0 {
		return nil, nil
	}
	empty, err := db.liveStateEmpty()
	if err != nil {
		return nil, fmt.Errorf("reading whether a start-over was interrupted: %w", err)
	}
	if !empty {
		return nil, nil // interrupted before the state was cleared: the copy is dropped
	}
	return copies, nil
}

// liveStateEmpty reports whether the ledger and the checkpoint records
// are empty: a start-over that copied the state has cleared it.
func (db *DB) liveStateEmpty() (bool, error) {
	var rows int
	err := db.sql.QueryRow(`SELECT (SELECT COUNT(*) FROM ledger) + (SELECT COUNT(*) FROM checkpoints)`).Scan(&rows)
	return rows == 0, err
}

// Superseded lists the state directories a job in dir started over from
// (StartOver), oldest first; copies of a start-over not (yet) done, and
// directories without a state database, are left out. Errors: dir unreadable (none kept: an empty list and nil).
func Superseded(dir string) ([]string, error) {
	parent := filepath.Join(dir, SupersededDir)
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", parent, err)
	}
	var out []string
	for _, e := range entries { // ReadDir sorts by name: by time
		path := filepath.Join(parent, e.Name())
		if _, err := os.Stat(filepath.Join(path, DBFile)); e.IsDir() && !strings.HasPrefix(e.Name(), ".") && err == nil {
			out = append(out, path)
		}
	}
	return out, nil
}

// KeptRunOf returns the state directory whose start-over kept dir (dir,
// where its symbolic links lead, is STATE/superseded/NAME, NAME not a copy
// being made (.incomplete-, .copied-), and both STATE and dir hold a state
// database), and false for any other directory. Such a directory is a
// state directory of its own: a run given it resumes the old run, not the
// job's live state.
func KeptRunOf(dir string) (string, bool) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false
	}
	abs, err := filepath.Abs(real)
	if err != nil {
		return "", false
	}
	parent := filepath.Dir(abs)
	if filepath.Base(parent) != SupersededDir || strings.HasPrefix(filepath.Base(abs), ".") || !isStateDir(abs) {
		return "", false
	}
	state := filepath.Dir(parent)
	if !isStateDir(state) {
		return "", false
	}
	return state, true
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
		err := os.Link(filepath.Join(db.dir, CheckpointDir, name), filepath.Join(ckdir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // a lost file is lost in the copy too (LatestCheckpoint skips it)
			return fmt.Errorf("linking checkpoint %s: %w", name, err)
		}
	}
	// The record of the numerics the ledger was computed with goes along
	// (SetNumerics replaces the live one by a rename: the link keeps this).
	err := os.Link(filepath.Join(db.dir, NumericsFile), filepath.Join(dir, NumericsFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("linking %s: %w", NumericsFile, err)
	}
	if err := syncDir(ckdir); err != nil {
		return err
	}
	return syncDir(dir)
}

// clearSteps deletes the ledger, the checkpoints, their contexts and the
// allocation history in one transaction committed with synchronous=FULL.
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
	if _, err := tx.Exec(`DELETE FROM est_contexts; DELETE FROM checkpoints; DELETE FROM ledger; DELETE FROM allocations`); err != nil {
		return err
	}
	return tx.Commit()
}
