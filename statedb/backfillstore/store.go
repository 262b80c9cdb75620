package backfillstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"

	"golang.org/x/sys/unix"

	// Only packages under statedb/ link SQLite.
	_ "github.com/mattn/go-sqlite3"
)

// Errors a store returns besides ErrNoExtra: the same values as statedb's,
// so errors.Is matches either.
var (
	// ErrLocked: another easyscale-backfilld holds the database (the
	// message names its PID and host).
	ErrLocked = sqlitefile.ErrLocked
	// ErrNetworkFS: the database's directory is on a network filesystem.
	ErrNetworkFS = sqlitefile.ErrNetworkFS
	// ErrSchemaTooNew: the database was written by a newer binary.
	ErrSchemaTooNew = sqlitefile.ErrSchemaTooNew
	// ErrInvalid: a record failed validation (the message names the field).
	ErrInvalid = sqlitefile.ErrInvalid
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ErrNoExtra is returned by [DB.Extra] for an extra job the database
// does not record.
var ErrNoExtra = errors.New("no such extra job in the backfill database")

// ExtraState is where an extra job is in its life, as the daemon last saw it.
type ExtraState string

// Extra job states.
const (
	// ExtraSubmitted: sbatch accepted it; it is pending or running.
	ExtraSubmitted ExtraState = "submitted"
	// ExtraSignalled: the daemon sent SIGTERM (scancel --signal=TERM) to give
	// the GPUs back; it is cancelled outright after the grace period.
	ExtraSignalled ExtraState = "signalled"
	// ExtraEnded: Slurm no longer runs it (Reason says how it ended).
	ExtraEnded ExtraState = "ended"
)

// ExtraJob is one extra Slurm job lent to an elastic job.
type ExtraJob struct {
	// ID is the extra job's Slurm job id; Parent the elastic job's id.
	ID, Parent string
	// User owns both jobs (its name as squeue printed it) and UID is the
	// owner's numeric uid (squeue's UserId; "" in rows written before schema
	// version 10); Partition is where the extra job runs.
	User, UID, Partition string
	// Node, GPUType and GPUs say what it holds ("" type for untyped GPUs).
	Node, GPUType string
	GPUs          int
	// Submitted is when sbatch returned; End is when its time limit ends.
	Submitted, End time.Time
	// State is its lifecycle state; Signalled and Ended are zero until then.
	State            ExtraState
	Signalled, Ended time.Time
	// Reason says why it was signalled or how it ended ("reservation of job
	// 42", "COMPLETED", "PREEMPTED", "parent gone", ...).
	Reason string
	// Adopted is true when a restarted daemon found it in Slurm without a
	// record and took it over (matching an [Intent]).
	Adopted bool
	// Name and Comment are the job name and comment it was submitted with
	// ("" in rows written by schema version 1).
	Name, Comment string
	// Lent is the time limit it was submitted with (sbatch --time), whole
	// seconds; 0 when not known: rows written before schema version 9, and
	// adoptions of their intents, where End − Submitted stands for it, or,
	// adopted, End is what squeue printed and no limit is known.
	Lent time.Duration
}

// Intent is a submission the daemon is about to make: written before sbatch
// runs and deleted once the extra job is recorded, so that after a crash in
// between the job Slurm lists can be matched to it.
type Intent struct {
	// Seq is assigned by the database; ignored by RecordIntent.
	Seq int64
	// Parent, User, Name, Comment, Partition and Node are what the extra job
	// is submitted with; UID is User's numeric uid as squeue printed it for
	// the parent ("" in intents written before schema version 10).
	Parent, User, UID, Name, Comment, Partition, Node string
	// Lent is its time limit (sbatch --time, whole seconds) and GPUs its
	// GPUs on Node, so that an adopted job is held to what was lent, not
	// to what its owner changed before the restart; 0: not known (intents
	// written before schema version 9).
	Lent time.Duration
	GPUs int
	// Time is when sbatch was about to run.
	Time time.Time
}

// Decision is one logged decision of a daemon cycle.
type Decision struct {
	// Seq is assigned by the database (ascending); ignored by RecordDecision.
	Seq int64
	// Time is when the decision was taken.
	Time time.Time
	// Kind is "grow", "signal", "cancel", "adopt", "skip", ...
	Kind string
	// Job is the elastic job, Extra the extra job ("" when none yet).
	Job, Extra, Node string
	GPUs             int
	// DryRun is true when the daemon only logged the decision.
	DryRun bool
	// Detail is free text: the reason, the error, the time limit.
	Detail string
}

// DB is easyscale-backfilld's SQLite store. It is opened by one
// daemon at a time (flocks on the database file and on PATH.lock, see
// backfillLock) and is safe for concurrent use by several goroutines.
type DB struct {
	path string
	sql  *sql.DB
	lock *backfillLock // nil for a dry run
}

var backfillMigrations = []string{
	`CREATE TABLE extras (
		job_id       TEXT    PRIMARY KEY,
		parent_id    TEXT    NOT NULL,
		user_name    TEXT    NOT NULL,
		node         TEXT    NOT NULL,
		gpu_type     TEXT    NOT NULL,
		gpus         INTEGER NOT NULL,
		partition    TEXT    NOT NULL,
		submitted_ns INTEGER NOT NULL,
		end_ns       INTEGER NOT NULL,
		state        TEXT    NOT NULL,
		signalled_ns INTEGER NOT NULL DEFAULT 0,
		ended_ns     INTEGER NOT NULL DEFAULT 0,
		reason       TEXT    NOT NULL DEFAULT '',
		adopted      INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX extras_state ON extras(state);
	CREATE TABLE decisions (
		seq      INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ns  INTEGER NOT NULL,
		kind     TEXT    NOT NULL,
		job_id   TEXT    NOT NULL,
		extra_id TEXT    NOT NULL,
		node     TEXT    NOT NULL,
		gpus     INTEGER NOT NULL,
		dry_run  INTEGER NOT NULL,
		detail   TEXT    NOT NULL
	);`,
	`ALTER TABLE extras ADD COLUMN job_name TEXT NOT NULL DEFAULT '';
	ALTER TABLE extras ADD COLUMN comment TEXT NOT NULL DEFAULT '';
	CREATE TABLE intents (
		seq       INTEGER PRIMARY KEY AUTOINCREMENT,
		parent_id TEXT    NOT NULL,
		user_name TEXT    NOT NULL,
		job_name  TEXT    NOT NULL,
		comment   TEXT    NOT NULL,
		partition TEXT    NOT NULL,
		node      TEXT    NOT NULL,
		time_ns   INTEGER NOT NULL
	);`,
	`CREATE TABLE admit_shrinks (
		seq          INTEGER PRIMARY KEY AUTOINCREMENT,
		job_id       TEXT    NOT NULL,
		queued_id    TEXT    NOT NULL,
		user_name    TEXT    NOT NULL,
		partition    TEXT    NOT NULL,
		orig_nodes   INTEGER NOT NULL,
		from_nodes   INTEGER NOT NULL,
		to_nodes     INTEGER NOT NULL,
		old_limit_s  INTEGER NOT NULL,
		new_limit_s  INTEGER NOT NULL,
		state        TEXT    NOT NULL,
		time_ns      INTEGER NOT NULL,
		detail       TEXT    NOT NULL DEFAULT ''
	);
	CREATE INDEX admit_shrinks_job ON admit_shrinks(job_id);`,
	`CREATE TABLE lend_failures (
		job_id     TEXT    NOT NULL,
		node       TEXT    NOT NULL,
		failures   INTEGER NOT NULL,
		last_ns    INTEGER NOT NULL,
		status     TEXT    NOT NULL DEFAULT '',
		stopped_ns INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (job_id, node)
	);
	CREATE INDEX decisions_time ON decisions(time_ns);
	CREATE INDEX extras_ended ON extras(state, ended_ns);`,
	`CREATE TABLE kept_off (
		job_id   TEXT    PRIMARY KEY,
		nodes    TEXT    NOT NULL,
		set_to   TEXT    NOT NULL,
		types    TEXT    NOT NULL,
		since_ns INTEGER NOT NULL,
		released INTEGER NOT NULL
	);`,
	`CREATE TABLE moved (
		job_id   TEXT    PRIMARY KEY,
		from_nodes TEXT  NOT NULL,
		owner    TEXT    NOT NULL,
		set_to   TEXT    NOT NULL,
		since_ns INTEGER NOT NULL,
		state    TEXT    NOT NULL
	);`,
	`CREATE TABLE started_small (
		job_id      TEXT    PRIMARY KEY,
		user        TEXT    NOT NULL,
		from_nodes  INTEGER NOT NULL,
		to_nodes    INTEGER NOT NULL,
		old_limit_s INTEGER NOT NULL,
		new_limit_s INTEGER NOT NULL,
		at_ns       INTEGER NOT NULL,
		restored    INTEGER NOT NULL
	);`,
	`ALTER TABLE started_small ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0;`,
	`ALTER TABLE extras ADD COLUMN lent_s INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE intents ADD COLUMN lent_s INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE intents ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0;`,
	`ALTER TABLE extras ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE intents ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE admit_shrinks ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE started_small ADD COLUMN user_id TEXT NOT NULL DEFAULT '';`,
}

// Open opens (creating if needed, mode 0600, parent directory 0700)
// the backfill daemon's database at path and takes exclusive, non-blocking
// flocks on the file itself and on path+".lock" (deleting the latter lets
// no second daemon in). Errors wrap ErrLocked when another daemon holds the
// lock (the message names its PID and host), ErrNetworkFS
// when the directory is on a network filesystem, ErrSchemaTooNew for a
// database written by a newer binary, or the filesystem/SQLite error.
func Open(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving backfill database path %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("creating directory of backfill database: %w", err)
	}
	if err := sqlitefile.CheckLocalFS(filepath.Dir(abs), sqlitefile.StatfsType); err != nil {
		return nil, fmt.Errorf("opening backfill database %s: %w", abs, err)
	}
	lock, err := lockBackfill(abs)
	if err != nil {
		return nil, err
	}
	db := &DB{path: abs, lock: lock}
	if err := db.open(); err != nil {
		lock.release()
		return nil, err
	}
	return db, nil
}

// OpenDryRun opens an in-memory backfill database for a dry run
// (easyscale-backfilld --dry-run): nothing is created or written on disk and
// no lock is taken, so a dry run may run beside the daemon that owns path.
// When the file at path exists, its extra jobs are copied in through a
// read-only attach (the dry run then reconciles against what the daemon
// recorded); a missing file gives an empty store. Path returns path with
// " (dry run: in-memory copy)". Errors wrap ErrSchemaTooNew for a file
// written by a newer binary, or the SQLite error.
func OpenDryRun(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving backfill database path %q: %w", path, err)
	}
	s, err := sql.Open("sqlite3", "file::memory:?"+url.Values{"_busy_timeout": {fmt.Sprint(sqlitefile.BusyTimeoutMS)}}.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening in-memory backfill database: %w", err)
	}
	// One connection that never closes: the in-memory database lives in it.
	s.SetMaxOpenConns(1)
	s.SetMaxIdleConns(1)
	s.SetConnMaxLifetime(0)
	s.SetConnMaxIdleTime(0)
	if err := migrateBackfill(s); err != nil {
		s.Close()
		return nil, fmt.Errorf("creating in-memory backfill database: %w", err)
	}
	if _, err := os.Stat(abs); err == nil {
		if err := copyExtrasReadOnly(s, abs); err != nil {
			s.Close()
			return nil, fmt.Errorf("copying extra jobs of %s for a dry run: %w", abs, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		s.Close()
		return nil, fmt.Errorf("reading backfill database %s for a dry run: %w", abs, err)
	}
	return &DB{path: abs + " (dry run: in-memory copy)", sql: s}, nil
}

// copyExtrasReadOnly copies the extras table of the file at path into s.
// The file is attached read-only; without a -wal file (no daemon has it
// open, everything is in the main file) it is attached immutable, so SQLite
// creates no -wal or -shm file beside it either.
func copyExtrasReadOnly(s *sql.DB, path string) error {
	params := url.Values{"mode": {"ro"}}
	if _, err := os.Stat(path + "-wal"); errors.Is(err, os.ErrNotExist) {
		params.Set("immutable", "1")
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if _, err := s.Exec(`ATTACH DATABASE ? AS src`, "file:"+esc+"?"+params.Encode()); err != nil {
		return fmt.Errorf("attaching read-only: %w", err)
	}
	defer s.Exec(`DETACH DATABASE src`)
	var v int
	if err := s.QueryRow(`PRAGMA src.user_version`).Scan(&v); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if v > len(backfillMigrations) {
		return fmt.Errorf("%w: version %d, this binary knows up to %d", ErrSchemaTooNew, v, len(backfillMigrations))
	}
	if v == 0 {
		return nil // an empty file: nothing recorded yet
	}
	cols := extraColumns
	switch {
	case v < 2:
		cols = extraColumnsV1
	case v < 9:
		cols = extraColumnsV2
	case v < 10:
		cols = extraColumnsV9
	}
	if _, err := s.Exec(`INSERT INTO extras (` + cols + `) SELECT ` + cols + ` FROM src.extras`); err != nil {
		return fmt.Errorf("copying extra jobs: %w", err)
	}
	if v >= 2 {
		cols := intentColumnsV2
		switch {
		case v >= 10:
			cols = intentColumns
		case v >= 9:
			cols = intentColumnsV9
		}
		if _, err := s.Exec(`INSERT INTO intents (` + cols + `) SELECT ` + cols + ` FROM src.intents`); err != nil {
			return fmt.Errorf("copying submission intents: %w", err)
		}
	}
	if v >= 3 {
		cols := admitColumnsV3
		if v >= 10 {
			cols = admitColumns
		}
		if _, err := s.Exec(`INSERT INTO admit_shrinks (` + cols + `) SELECT ` + cols + ` FROM src.admit_shrinks`); err != nil {
			return fmt.Errorf("copying shrink-to-admit records: %w", err)
		}
	}
	if v >= 4 {
		if _, err := s.Exec(`INSERT INTO lend_failures SELECT * FROM src.lend_failures`); err != nil {
			return fmt.Errorf("copying failed lends: %w", err)
		}
	}
	return nil
}

func (db *DB) open() error {
	// Create the file first so that it gets mode 0600, not SQLite's 0644.
	f, err := os.OpenFile(db.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("creating backfill database: %w", err)
	}
	f.Close()
	s, err := sql.Open("sqlite3", sqlitefile.DSN(db.path, url.Values{
		"_journal_mode": {"WAL"},
		"_synchronous":  {"FULL"},
		"_txlock":       {"immediate"},
	}))
	if err != nil {
		return fmt.Errorf("opening backfill database %s: %w", db.path, err)
	}
	s.SetMaxOpenConns(1)
	if err := migrateBackfill(s); err != nil {
		s.Close()
		return fmt.Errorf("migrating backfill database %s: %w", db.path, err)
	}
	db.sql = s
	return nil
}

func migrateBackfill(s *sql.DB) error {
	v, err := sqlitefile.SchemaVersion(s)
	if err != nil {
		return err
	}
	if v > len(backfillMigrations) {
		return fmt.Errorf("%w: version %d, this binary knows up to %d", ErrSchemaTooNew, v, len(backfillMigrations))
	}
	for i := v; i < len(backfillMigrations); i++ {
		tx, err := s.Begin()
		if err != nil {
			return fmt.Errorf("starting migration %d: %w", i+1, err)
		}
		if _, err := tx.Exec(backfillMigrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("applying migration %d: %w", i+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("recording schema version %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("committing migration %d: %w", i+1, err)
		}
	}
	return nil
}

// backfillLock is the daemon's exclusive flock(2) on the database file
// itself, plus one on PATH.lock. The database file (mode 0600) is what a
// second daemon must open to share the store, so deleting or replacing
// PATH.lock lets no second daemon in; PATH.lock carries the holder's
// "pid=<pid> host=<host>" and is still locked so that older binaries, which
// lock only it, are kept out too. The parent directory is not locked: it
// may hold other daemons' stores (several state_db files side by side), and
// any user who can read it could take a flock on it and keep the daemon
// from starting. flock and SQLite's POSIX locks do not interact on a local
// filesystem (Open refuses network ones); db stays open until the
// SQLite connection is closed, as closing any descriptor of the file drops
// the process's POSIX locks on it.
type backfillLock struct {
	db, file *os.File
}

// lockBackfill takes the daemon's exclusive, non-blocking flocks on the
// database file at path (creating it with mode 0600) and on path+".lock",
// and records "pid=<pid> host=<host>" in the latter. The kernel drops the
// locks when the daemon dies, so a SIGKILLed daemon leaves no stale lock.
// A held lock is an error wrapping ErrLocked that names the holder: the
// PID /proc/locks lists for the database file, else what path+".lock"
// says.
func lockBackfill(path string) (*backfillLock, error) {
	lockPath := path + ".lock"
	l := &backfillLock{}
	for _, p := range []string{path, lockPath} {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			l.release()
			return nil, fmt.Errorf("opening %s to lock the backfill database: %w", p, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			l.release()
			if errors.Is(err, unix.EWOULDBLOCK) {
				who := "another process"
				if pid, host := sqlitefile.Holder(path, lockPath); pid > 0 {
					who = fmt.Sprintf("process %d on host %q", pid, host)
				}
				return nil, fmt.Errorf("backfill database %s is locked by %s: only one easyscale-backfilld may use a database "+
					"(stop it, or set another state_db): %w", path, who, ErrLocked)
			}
			return nil, fmt.Errorf("locking %s: %w", p, err)
		}
		if p == path {
			l.db = f
		} else {
			l.file = f
		}
	}
	if err := sqlitefile.WriteHolder(l.file); err != nil {
		l.release()
		return nil, fmt.Errorf("recording holder in %s: %w", lockPath, err)
	}
	return l, nil
}

// release drops the locks by closing the files; call it only after the
// SQLite connection to the database is closed.
func (l *backfillLock) release() error {
	var err error
	for _, f := range []*os.File{l.file, l.db} {
		if f == nil {
			continue
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("releasing backfill database lock: %w", err)
	}
	return nil
}

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Close closes the database and releases the lock (a dry-run store has
// none). Call it once.
func (db *DB) Close() error {
	err := db.sql.Close()
	if db.lock != nil {
		if lerr := db.lock.release(); err == nil {
			err = lerr
		}
	}
	if err != nil {
		return fmt.Errorf("closing backfill database %s: %w", db.path, err)
	}
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// RecordExtra inserts an extra job, or replaces the record with the same ID
// (a requeued id reused by Slurm). ID, Parent and Node must be non-empty and
// GPUs ≥ 0; State defaults to ExtraSubmitted. Errors wrap ErrInvalid or the
// SQLite error.
func (db *DB) RecordExtra(ctx context.Context, x ExtraJob) error {
	if x.ID == "" || x.Parent == "" || x.Node == "" || x.GPUs < 0 || x.Lent < 0 {
		return invalidf("extra job %q of parent %q on node %q with %d GPUs lent for %v: id, parent and node are required, GPUs and time ≥ 0",
			x.ID, x.Parent, x.Node, x.GPUs, x.Lent)
	}
	if x.State == "" {
		x.State = ExtraSubmitted
	}
	_, err := db.sql.ExecContext(ctx, `INSERT OR REPLACE INTO extras (`+extraColumns+`)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		x.ID, x.Parent, x.User, x.Node, x.GPUType, x.GPUs, x.Partition, unixNano(x.Submitted), unixNano(x.End),
		string(x.State), unixNano(x.Signalled), unixNano(x.Ended), x.Reason, x.Adopted, x.Name, x.Comment, seconds(x.Lent), x.UID)
	if err != nil {
		return fmt.Errorf("recording extra job %s: %w", x.ID, err)
	}
	return nil
}

const extraColumnsV1 = `job_id, parent_id, user_name, node, gpu_type, gpus, partition, submitted_ns, end_ns,
	state, signalled_ns, ended_ns, reason, adopted`

// extraColumnsV2 are the columns of schema versions 2 to 8.
const extraColumnsV2 = extraColumnsV1 + `, job_name, comment`

// extraColumnsV9 are the columns of schema version 9.
const extraColumnsV9 = extraColumnsV2 + `, lent_s`

const extraColumns = extraColumnsV9 + `, user_id`

// seconds is d in whole seconds, as the lent_s columns hold it.
func seconds(d time.Duration) int64 { return int64(d / time.Second) }

func scanExtra(sc interface{ Scan(...any) error }) (ExtraJob, error) {
	var x ExtraJob
	var sub, end, sig, ended, lent int64
	var state string
	err := sc.Scan(&x.ID, &x.Parent, &x.User, &x.Node, &x.GPUType, &x.GPUs, &x.Partition, &sub, &end,
		&state, &sig, &ended, &x.Reason, &x.Adopted, &x.Name, &x.Comment, &lent, &x.UID)
	x.Submitted, x.End, x.Signalled, x.Ended = fromNano(sub), fromNano(end), fromNano(sig), fromNano(ended)
	x.Lent = time.Duration(lent) * time.Second
	x.State = ExtraState(state)
	return x, err
}

// Extra returns the record of extra job id, or an error wrapping ErrNoExtra.
func (db *DB) Extra(ctx context.Context, id string) (ExtraJob, error) {
	row := db.sql.QueryRowContext(ctx, `SELECT `+extraColumns+` FROM extras WHERE job_id = ?`, id)
	x, err := scanExtra(row)
	if errors.Is(err, sql.ErrNoRows) {
		return ExtraJob{}, fmt.Errorf("extra job %s: %w", id, ErrNoExtra)
	}
	if err != nil {
		return ExtraJob{}, fmt.Errorf("reading extra job %s: %w", id, err)
	}
	return x, nil
}

// ActiveExtras returns the extra jobs not yet ExtraEnded, by job id.
func (db *DB) ActiveExtras(ctx context.Context) ([]ExtraJob, error) {
	return db.queryExtras(ctx, `SELECT `+extraColumns+` FROM extras WHERE state != ? ORDER BY length(job_id), job_id`, string(ExtraEnded))
}

// Extras returns every recorded extra job, by job id.
func (db *DB) Extras(ctx context.Context) ([]ExtraJob, error) {
	return db.queryExtras(ctx, `SELECT `+extraColumns+` FROM extras ORDER BY length(job_id), job_id`)
}

func (db *DB) queryExtras(ctx context.Context, q string, args ...any) ([]ExtraJob, error) {
	rows, err := db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing extra jobs: %w", err)
	}
	defer rows.Close()
	var out []ExtraJob
	for rows.Next() {
		x, err := scanExtra(rows)
		if err != nil {
			return nil, fmt.Errorf("listing extra jobs: %w", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing extra jobs: %w", err)
	}
	return out, nil
}

// MarkSignalled records that extra job id was sent SIGTERM at t because of
// reason. It keeps the first signal time when called again. Errors wrap
// ErrNoExtra for an unknown id.
func (db *DB) MarkSignalled(ctx context.Context, id string, t time.Time, reason string) error {
	return db.update(ctx, id, "marking extra job signalled",
		`UPDATE extras SET state = ?, signalled_ns = CASE WHEN signalled_ns = 0 THEN ? ELSE signalled_ns END,
		 reason = ? WHERE job_id = ? AND state != ?`,
		string(ExtraSignalled), unixNano(t), reason, id, string(ExtraEnded))
}

// MarkEnded records that extra job id ended at t (reason: its final Slurm
// state or why the daemon cancelled it). Errors wrap ErrNoExtra for an
// unknown id.
func (db *DB) MarkEnded(ctx context.Context, id string, t time.Time, reason string) error {
	return db.update(ctx, id, "marking extra job ended",
		`UPDATE extras SET state = ?, ended_ns = ?, reason = ? WHERE job_id = ?`,
		string(ExtraEnded), unixNano(t), reason, id)
}

func (db *DB) update(ctx context.Context, id, what, q string, args ...any) error {
	res, err := db.sql.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		if _, err := db.Extra(ctx, id); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// RecordDecision appends d to the decision log (Seq is assigned). Kind must
// be non-empty; errors wrap ErrInvalid or the SQLite error.
func (db *DB) RecordDecision(ctx context.Context, d Decision) error {
	if d.Kind == "" {
		return invalidf("decision without a kind")
	}
	_, err := db.sql.ExecContext(ctx, `INSERT INTO decisions
		(time_ns, kind, job_id, extra_id, node, gpus, dry_run, detail) VALUES (?,?,?,?,?,?,?,?)`,
		unixNano(d.Time), d.Kind, d.Job, d.Extra, d.Node, d.GPUs, d.DryRun, d.Detail)
	if err != nil {
		return fmt.Errorf("recording %s decision for job %s: %w", d.Kind, d.Job, err)
	}
	return nil
}

// Decisions returns the decisions with Seq > after, oldest first, at most
// limit of them (limit ≤ 0: all).
func (db *DB) Decisions(ctx context.Context, after int64, limit int) ([]Decision, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := db.sql.QueryContext(ctx, `SELECT seq, time_ns, kind, job_id, extra_id, node, gpus, dry_run, detail
		FROM decisions WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing decisions: %w", err)
	}
	defer rows.Close()
	var out []Decision
	for rows.Next() {
		var d Decision
		var ns int64
		if err := rows.Scan(&d.Seq, &ns, &d.Kind, &d.Job, &d.Extra, &d.Node, &d.GPUs, &d.DryRun, &d.Detail); err != nil {
			return nil, fmt.Errorf("listing decisions: %w", err)
		}
		d.Time = fromNano(ns)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing decisions: %w", err)
	}
	return out, nil
}

// RecordIntent records a submission about to be made and returns its Seq.
// Parent, User, Name, Comment, Partition and Node must be non-empty. Errors
// wrap ErrInvalid or the SQLite error.
func (db *DB) RecordIntent(ctx context.Context, in Intent) (int64, error) {
	if in.Parent == "" || in.User == "" || in.Name == "" || in.Comment == "" || in.Partition == "" || in.Node == "" {
		return 0, invalidf("submission intent %+v: parent, user, name, comment, partition and node are required", in)
	}
	if in.Lent < 0 || in.GPUs < 0 {
		return 0, invalidf("submission intent %+v: time lent and GPUs must be ≥ 0", in)
	}
	res, err := db.sql.ExecContext(ctx, `INSERT INTO intents (`+intentColumns+`)
		VALUES (NULL,?,?,?,?,?,?,?,?,?,?)`, in.Parent, in.User, in.Name, in.Comment, in.Partition, in.Node, unixNano(in.Time),
		seconds(in.Lent), in.GPUs, in.UID)
	if err != nil {
		return 0, fmt.Errorf("recording submission intent for job %s on %s: %w", in.Parent, in.Node, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("recording submission intent for job %s on %s: %w", in.Parent, in.Node, err)
	}
	return seq, nil
}

// Intents returns the recorded submission intents, oldest first.
func (db *DB) Intents(ctx context.Context) ([]Intent, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT `+intentColumns+` FROM intents ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("listing submission intents: %w", err)
	}
	defer rows.Close()
	var out []Intent
	for rows.Next() {
		var in Intent
		var t, lent int64
		if err := rows.Scan(&in.Seq, &in.Parent, &in.User, &in.Name, &in.Comment, &in.Partition, &in.Node, &t, &lent, &in.GPUs, &in.UID); err != nil {
			return nil, fmt.Errorf("listing submission intents: %w", err)
		}
		in.Time, in.Lent = fromNano(t), time.Duration(lent)*time.Second
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing submission intents: %w", err)
	}
	return out, nil
}

// intentColumnsV2 are the intents columns of schema versions 2 to 8.
const intentColumnsV2 = `seq, parent_id, user_name, job_name, comment, partition, node, time_ns`

// intentColumnsV9 are the intents columns of schema version 9.
const intentColumnsV9 = intentColumnsV2 + `, lent_s, gpus`

const intentColumns = intentColumnsV9 + `, user_id`

// DeleteIntent removes intent seq (its job was recorded, or sbatch failed,
// or it is too old to match); deleting one that is gone is not an error.
func (db *DB) DeleteIntent(ctx context.Context, seq int64) error {
	if _, err := db.sql.ExecContext(ctx, `DELETE FROM intents WHERE seq = ?`, seq); err != nil {
		return fmt.Errorf("deleting submission intent %d: %w", seq, err)
	}
	return nil
}
