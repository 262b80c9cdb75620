package statedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"

	"golang.org/x/sys/unix"

	// The only package of the module allowed to link SQLite.
	_ "github.com/mattn/go-sqlite3"
)

// File and folder names inside a state directory.
const (
	DBFile        = "state.db"    // the SQLite database
	LockFile      = "lock"        // flock(2)ed by the single writer
	CheckpointDir = "checkpoints" // safetensors checkpoint files
)

// DefaultKeepCheckpoints is how many of the newest checkpoints SaveCheckpoint
// keeps when Options.KeepCheckpoints is zero.
const DefaultKeepCheckpoints = 3

// Options tunes OpenWith. The zero value gives Open's behaviour.
type Options struct {
	// KeepCheckpoints is how many of the newest checkpoints to keep
	// (0 means DefaultKeepCheckpoints; negative is invalid).
	KeepCheckpoints int
	// AllowNetworkFS opens a writer even when the directory is on NFS,
	// Lustre, GPFS, CephFS, SMB or another network filesystem. Only safe
	// when a single node ever touches the directory.
	AllowNetworkFS bool
}

// DB is a job's consistency state: one SQLite file DIR/state.db plus the
// checkpoint files under DIR/checkpoints. A DB opened with Open is the single
// writer of its directory; one opened with OpenReadOnly only reads. A DB is
// safe for concurrent use by several goroutines (its connection pool has one
// connection, so calls are serialised).
type DB struct {
	dir      string
	sql      *sql.DB
	readOnly bool
	keep     int
	lock     *dirLock // nil for readers
	create   func(path string) (checkpointFile, error)
}

// Open opens the state directory dir for writing, creating dir (mode 0700)
// and its database if needed, applying schema migrations, taking the
// exclusive writer lock DIR/lock and removing leftovers of interrupted
// checkpoint writes (*.tmp files and checkpoint files the database does not
// record). Errors wrap ErrLocked (another writer is running, *LockedError
// names it), ErrNetworkFS (*NetworkFSError), ErrSchemaTooNew, or the
// underlying filesystem/SQLite error.
func Open(dir string) (*DB, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, opts Options) (*DB, error) {
	keep := opts.KeepCheckpoints
	if keep < 0 {
		return nil, invalidf("Options.KeepCheckpoints is %d, want >= 0", keep)
	}
	if keep == 0 {
		keep = DefaultKeepCheckpoints
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving state directory %q: %w", dir, err)
	}
	if err := refuseInsideAState(abs); err != nil {
		return nil, err
	}
	if err := refuseUnwritable(abs); err != nil {
		return nil, err
	}
	if err := refuseOrphanCheckpoints(abs); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(abs, CheckpointDir), 0o700); err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
			return nil, fmt.Errorf("creating state directory: %w (%s)", err, unwritableFix)
		}
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	if !opts.AllowNetworkFS {
		if err := sqlitefile.CheckLocalFS(abs, sqlitefile.StatfsType); err != nil {
			return nil, err
		}
	}
	lock, err := lockDir(abs)
	if err != nil {
		return nil, err
	}
	db := &DB{dir: abs, keep: keep, lock: lock, create: createFile}
	if err := db.openWriter(); err != nil {
		lock.release()
		return nil, err
	}
	return db, nil
}

// refuseInsideAState refuses a directory that is part of another state
// directory: its checkpoints/ or its superseded/ (a tester's: `--state
// STATE/superseded` started a run inside the folder of kept runs, which
// status then listed as a kept run). A kept run, superseded/NAME, is a
// state directory of its own (KeptRunOf).
//
// A new directory under superseded/ is refused too (a run there would be a
// new job listed as a kept run), and a path is judged where its symbolic
// links lead (a tester's: a link to STATE/superseded was taken).
func refuseInsideAState(dir string) error {
	dir = whereLinksLead(dir)
	base, parent := filepath.Base(dir), filepath.Dir(dir)
	if isStateDir(parent) && (base == CheckpointDir || base == SupersededDir) {
		return invalidf("%s is the %s/ directory of the state directory %s, not a state directory: give %s to continue that job, "+
			"or a new directory", dir, base, parent, parent)
	}
	if filepath.Base(parent) == SupersededDir && isStateDir(filepath.Dir(parent)) && !isStateDir(dir) {
		return invalidf("%s is under the kept runs of the state directory %s (%s/) but is not one of them: give %s to continue "+
			"that job, one of its kept runs, or a new directory elsewhere", dir, filepath.Dir(parent), SupersededDir, filepath.Dir(parent))
	}
	return nil
}

// unwritableFix is what a user who may not write a state directory can
// do.
const unwritableFix = "a run writes its state directory: run as a user who may write it, or copy the directory to one " +
	"you may write; easyscale status and verify only read it"

// refuseUnwritable refuses a state directory, its database or its
// checkpoint directory that this process may not write (access(2): a
// read-only file system, or another user's files), naming the fix, before
// anything is written (a tester's: such runs failed midway with "attempt
// to write a readonly database", leaving files of their own).
func refuseUnwritable(dir string) error {
	for _, p := range []string{dir, filepath.Join(dir, DBFile), filepath.Join(dir, CheckpointDir)} {
		if err := unix.Access(p, unix.W_OK); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("this user may not write %s (%w): %s", p, err, unwritableFix)
		}
	}
	return nil
}

// whereLinksLead is dir with its symbolic links followed, also when the
// last one leads to a directory not made yet (Open makes it), or dir as
// it is when that cannot be told.
func whereLinksLead(dir string) string {
	for range 16 {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return real
		}
		target, err := os.Readlink(dir)
		if err != nil { // not a link: it does not exist yet, its parent may
			if real, err := filepath.EvalSymlinks(filepath.Dir(dir)); err == nil {
				return filepath.Join(real, filepath.Base(dir))
			}
			return dir
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(dir), target)
		}
		dir = target
	}
	return dir
}

// isStateDir reports whether dir holds a state database.
func isStateDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, DBFile))
	return err == nil
}

// refuseOrphanCheckpoints refuses a directory that has checkpoint files
// but no state.db (a lost or deleted database): opening it would start a
// new job and delete those files as unrecorded leftovers.
func refuseOrphanCheckpoints(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, DBFile)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(dir, CheckpointDir))
	if err != nil || len(entries) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s holds %d file(s) in %s/ but no %s; restore %s or choose another --state directory (nothing was changed)",
		ErrOrphanCheckpoints, dir, len(entries), CheckpointDir, DBFile, DBFile)
}

func (db *DB) openWriter() error {
	dsn := sqlitefile.DSN(filepath.Join(db.dir, DBFile), url.Values{
		"_journal_mode": {"WAL"},
		"_synchronous":  {"NORMAL"},
		"_txlock":       {"immediate"},
		"_foreign_keys": {"1"},
	})
	s, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return fmt.Errorf("opening %s: %w", DBFile, err)
	}
	// One connection: the writer's calls are serialised anyway, and
	// per-connection pragmas (synchronous=FULL around checkpoint records)
	// then apply to every statement.
	s.SetMaxOpenConns(1)
	db.sql = s
	if err := db.checkWAL(); err != nil {
		s.Close()
		return err
	}
	if err := migrate(s); err != nil {
		s.Close()
		return fmt.Errorf("migrating %s in %s: %w", DBFile, db.dir, err)
	}
	if err := db.recoverStartOver(); err != nil {
		s.Close()
		return err
	}
	if err := db.cleanCheckpointDir(); err != nil {
		s.Close()
		return err
	}
	return nil
}

func (db *DB) checkWAL() error {
	var mode string
	if err := db.sql.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("opening %s in %s: %w", DBFile, db.dir, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("opening %s in %s: journal_mode is %q, want wal", DBFile, db.dir, mode)
	}
	return nil
}

// OpenReadOnly opens an existing state directory for reading without taking
// the writer lock, so it works while a writer runs (`easyscale verify`,
// `easyscale status`). Writing methods return an error. Errors wrap
// ErrNoState when dir holds no state.db, ErrSchemaTooNew, or the SQLite error.
func OpenReadOnly(dir string) (*DB, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving state directory %q: %w", dir, err)
	}
	path := filepath.Join(abs, DBFile)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("opening %s read-only: %w (no %s; is this a --state directory?)", abs, ErrNoState, DBFile)
		}
		return nil, fmt.Errorf("opening %s read-only: %w", abs, err)
	}
	params := url.Values{"mode": {"ro"}, "_txlock": {"deferred"}}
	if !writable(abs) || (exists(path+"-shm") && !writable(path+"-shm")) {
		// SQLite's WAL mode needs to write the -shm index even to read. On a
		// directory (or index) this user cannot write, read the database as
		// immutable: it then ignores a WAL that a running writer has not yet
		// checkpointed, which a cleanly closed state never has.
		params.Set("immutable", "1")
	}
	s, err := sql.Open("sqlite3", sqlitefile.DSN(path, params))
	if err != nil {
		return nil, fmt.Errorf("opening %s read-only: %w", path, err)
	}
	s.SetMaxOpenConns(1)
	v, err := sqlitefile.SchemaVersion(s)
	if err == nil && v > len(migrations) {
		err = fmt.Errorf("%w: version %d, this binary knows up to %d", ErrSchemaTooNew, v, len(migrations))
	}
	if err == nil && v < len(migrations) {
		err = fmt.Errorf("schema version %d is older than %d; open it once for writing to migrate", v, len(migrations))
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("opening %s read-only: %w", path, err)
	}
	return &DB{dir: abs, sql: s, readOnly: true, keep: DefaultKeepCheckpoints}, nil
}

// Dir returns the absolute path of the state directory.
func (db *DB) Dir() string { return db.dir }

// Close closes the database and releases the writer lock. It is safe to
// call once; the DB must not be used afterwards.
func (db *DB) Close() error {
	err := db.sql.Close()
	if db.lock != nil {
		if lerr := db.lock.release(); err == nil {
			err = lerr
		}
	}
	if err != nil {
		return fmt.Errorf("closing state database in %s: %w", db.dir, err)
	}
	return nil
}

// IntegrityCheck runs SQLite's `PRAGMA integrity_check` and returns nil when
// it reports "ok", else an error listing the problems it found.
func (db *DB) IntegrityCheck() error {
	rows, err := db.sql.Query("PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("checking integrity of %s: %w", DBFile, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("checking integrity of %s: %w", DBFile, err)
		}
		problems = append(problems, line)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("checking integrity of %s: %w", DBFile, err)
	}
	if len(problems) == 1 && problems[0] == "ok" {
		return nil
	}
	return fmt.Errorf("integrity check of %s in %s failed: %s", DBFile, db.dir, strings.Join(problems, "; "))
}

func (db *DB) writable(what string) error {
	if db.readOnly {
		return fmt.Errorf("%s: state database in %s is open read-only", what, db.dir)
	}
	return nil
}

// immediate runs fn in one BEGIN IMMEDIATE transaction (the writer DSN sets
// _txlock=immediate), committing when fn returns nil.
func (db *DB) immediate(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func writable(path string) bool { return unix.Access(path, unix.W_OK) == nil }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
