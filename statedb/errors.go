package statedb

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"
)

// Sentinel errors. Every error statedb returns that matches one of these
// wraps it, so callers test with errors.Is; the typed errors below carry the
// details and are reachable with errors.As.
var (
	// ErrJobMismatch: the state directory belongs to a different job
	// (see JobMismatchError).
	ErrJobMismatch = errors.New("state directory belongs to another job")
	// ErrDataMismatch: the state directory's job was trained on other data
	// (see DataMismatchError).
	ErrDataMismatch = errors.New("training data differs from the state directory's")
	// ErrNoJob: no job has been stored yet (InitJob was never called).
	ErrNoJob = errors.New("no job stored in state directory")
	// ErrDivergence: a re-executed step produced a different digest than
	// the one already in the ledger (see DivergenceError).
	ErrDivergence = errors.New("re-executed step diverged from the ledger")
	// ErrLocked: another process holds the state directory's writer lock
	// (see LockedError).
	ErrLocked = sqlitefile.ErrLocked
	// ErrNetworkFS: the state directory is on a network filesystem where
	// SQLite locking and WAL shared memory are unsafe (see NetworkFSError).
	ErrNetworkFS = sqlitefile.ErrNetworkFS
	// ErrChecksumMismatch: a checkpoint file's SHA-256 differs from the one
	// recorded when it was written (see CheckpointError).
	ErrChecksumMismatch = errors.New("checkpoint checksum mismatch")
	// ErrNoState: OpenReadOnly found no state database in the directory.
	ErrNoState = errors.New("no state database")
	// ErrSchemaTooNew: the database was written by a newer binary whose
	// schema this one does not know.
	ErrSchemaTooNew = sqlitefile.ErrSchemaTooNew
	// ErrInvalid: an argument failed validation (the message names the
	// field).
	ErrInvalid = sqlitefile.ErrInvalid
	// ErrCorruptRow: a row of state.db does not match the checksum stored
	// beside it; it was changed outside statedb (see CorruptRowError,
	// CorruptLedgerError).
	ErrCorruptRow = errors.New("state database row does not match its checksum")
	// ErrOrphanCheckpoints: a writer refused a directory that holds
	// checkpoint files but no state.db (opening it would delete them).
	ErrOrphanCheckpoints = errors.New("checkpoints without a state database")
)

// JobMismatchError reports that InitJob was called with a job whose identity
// differs from the one already stored in the state directory. It matches
// ErrJobMismatch.
type JobMismatchError struct {
	Dir                  string // state directory
	StoredID, StoredName string // identity already in state.db
	GivenID, GivenName   string // identity passed to InitJob
}

func (e *JobMismatchError) Error() string {
	return fmt.Sprintf("state directory %s belongs to job %q (id %s), not to job %q (id %s): "+
		"use a new --state directory for a different job, or rerun the original job file to resume it",
		e.Dir, e.StoredName, e.StoredID, e.GivenName, e.GivenID)
}

// Unwrap returns ErrJobMismatch.
func (e *JobMismatchError) Unwrap() error { return ErrJobMismatch }

// DataMismatchError reports that InitJob was given the stored job with
// other training data: File is the name of the first file (in load order)
// whose size or SHA-256 differs, or that one side lacks (its DataFile is
// then zero). It matches ErrDataMismatch.
type DataMismatchError struct {
	Dir           string // state directory
	File          string
	Stored, Given DataFile
}

func (e *DataMismatchError) Error() string {
	side := func(f DataFile) string {
		if f.Name == "" {
			return "no such file"
		}
		return fmt.Sprintf("%d bytes, sha256 %s", f.Size, f.SHA256)
	}
	return fmt.Sprintf("state directory %s was trained on other data: file %s is now %s, but was %s when the job started: "+
		"restore the original file to resume, or use a new --state directory to train on this data",
		e.Dir, e.File, side(e.Given), side(e.Stored))
}

// Unwrap returns ErrDataMismatch.
func (e *DataMismatchError) Unwrap() error { return ErrDataMismatch }

// DivergenceError reports that a step re-executed after a resume produced a
// digest different from the one recorded in the ledger. Tensors lists the
// names whose per-tensor digests differ (empty when the entries carry no
// per-tensor digests). It matches ErrDivergence.
type DivergenceError struct {
	Step        int64
	Stored, Got string // "sha256:<hex>" digests
	Tensors     []string
}

func (e *DivergenceError) Error() string {
	msg := fmt.Sprintf("step %d re-executed with digest %s but the ledger has %s", e.Step, e.Got, e.Stored)
	if len(e.Tensors) > 0 {
		msg += " (differing tensors: " + strings.Join(e.Tensors, ", ") + ")"
	}
	return msg
}

// Unwrap returns ErrDivergence.
func (e *DivergenceError) Unwrap() error { return ErrDivergence }

// LockedError reports that another writer holds DIR/lock. PID and Host are
// what that writer wrote into the lock file; they are zero/empty when the
// file could not be read. It matches ErrLocked.
type LockedError struct {
	Dir  string
	PID  int
	Host string
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d on host %q", e.PID, e.Host)
	}
	return fmt.Sprintf("state directory %s is open for writing by %s: "+
		"only one writer may run per state directory (stop it, or use another --state directory)", e.Dir, holder)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// NetworkFSError reports that the state directory lives on a network or
// cluster filesystem (FS names it, e.g. "nfs", "lustre"), where SQLite's
// POSIX locks and WAL shared memory are unreliable. It matches ErrNetworkFS.
type NetworkFSError = sqlitefile.NetworkFSError

// CheckpointError reports a checkpoint that LatestCheckpoint skipped: its
// rows in state.db do not match their checksum (Err is then a
// *CorruptRowError), its file is missing or unreadable, its SHA-256
// differs from the recorded one (Err is then ErrChecksumMismatch), or it
// does not parse. WantSHA256 is the
// recorded hex checksum; GotSHA256 is the file's actual one, empty when the
// file could not be read.
type CheckpointError struct {
	Step       int64
	Path       string
	WantSHA256 string
	GotSHA256  string
	Err        error
}

func (e *CheckpointError) Error() string {
	var ce *CorruptRowError
	if errors.As(e.Err, &ce) {
		return fmt.Sprintf("checkpoint of step %d (%s) skipped: its checkpoints and est_contexts rows in %s do not match their checksum%s",
			e.Step, e.Path, ce.dbPath(), ce.detail())
	}
	got := e.GotSHA256
	if got == "" {
		got = "unreadable"
	}
	return fmt.Sprintf("checkpoint of step %d (%s) skipped: expected sha256 %s, actual %s: %v",
		e.Step, e.Path, e.WantSHA256, got, e.Err)
}

// Unwrap returns the underlying cause.
func (e *CheckpointError) Unwrap() error { return e.Err }

// CorruptRowError reports a row of state.db whose content does not match
// the checksum stored beside it (a bit flipped on disk, an edit by hand):
// Table is "ledger" or "checkpoints" (a checkpoint's row together with its
// est_contexts rows), Step the row's step, Want the stored and Got the
// recomputed hex SHA-256. It matches ErrCorruptRow.
type CorruptRowError struct {
	Dir       string
	Table     string
	Step      int64
	Want, Got string
}

func (e *CorruptRowError) Error() string {
	what := fmt.Sprintf("ledger row of step %d in %s does not match its checksum", e.Step, e.dbPath())
	switch e.Table {
	case "ledger":
	case "job":
		what = fmt.Sprintf("the job row (identity and training data) in %s does not match its checksum", e.dbPath())
	default:
		what = fmt.Sprintf("the checkpoints and est_contexts rows of checkpoint %d in %s do not match their checksum", e.Step, e.dbPath())
	}
	return what + e.detail()
}

// detail is the part of the message after what was changed.
func (e *CorruptRowError) detail() string {
	return fmt.Sprintf(" (stored %s, computed %s): changed outside easyscale (disk corruption or an edit)", short(e.Want), short(e.Got))
}

func (e *CorruptRowError) dbPath() string {
	if e.Dir == "" {
		return DBFile
	}
	return filepath.Join(e.Dir, DBFile)
}

// Unwrap returns ErrCorruptRow.
func (e *CorruptRowError) Unwrap() error { return ErrCorruptRow }

// CorruptLedgerError lists the ledger rows that do not match their
// checksums (Steps, increasing). Ledger returns it beside the intact rows.
// It matches ErrCorruptRow.
type CorruptLedgerError struct {
	Dir   string
	Steps []int64
}

func (e *CorruptLedgerError) Error() string {
	steps := make([]string, len(e.Steps))
	for i, s := range e.Steps {
		steps[i] = fmt.Sprint(s)
	}
	what, verb := "row of step", "does not match its checksum"
	if len(steps) > 1 {
		what, verb = "rows of steps", "do not match their checksums"
	}
	return fmt.Sprintf("ledger %s %s in %s %s: changed outside easyscale (disk corruption or an edit), "+
		"so the digests recorded there cannot be trusted; a resumed run rewrites the steps after its checkpoint "+
		"when it recomputes them", what, strings.Join(steps, ", "), filepath.Join(e.Dir, DBFile), verb)
}

// Unwrap returns ErrCorruptRow.
func (e *CorruptLedgerError) Unwrap() error { return ErrCorruptRow }

// short shortens a hex checksum for messages ("" when none was stored).
func short(sum string) string {
	switch {
	case sum == "":
		return "none"
	case len(sum) > 16:
		return sum[:16] + "…"
	}
	return sum
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
