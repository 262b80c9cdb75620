// Package sqlitefile is what statedb's two SQLite stores (a job's state.db,
// statedb, and the backfill daemon's store, statedb/backfillstore) share
// about a database file: the connection string, the schema version, the
// refusal of network filesystems, the writer's flock holder and the errors
// that report them. It imports no SQLite driver; each store registers
// go-sqlite3 itself.
package sqlitefile

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// BusyTimeoutMS is how long a connection waits for another connection's
// lock before SQLite reports SQLITE_BUSY (milliseconds).
const BusyTimeoutMS = 5000

// Errors both stores return (statedb and backfillstore re-export them).
var (
	// ErrLocked: another process holds the database's writer lock.
	ErrLocked = errors.New("state directory is locked by another writer")
	// ErrNetworkFS: the database is on a network filesystem where SQLite
	// locking and WAL shared memory are unsafe (see NetworkFSError).
	ErrNetworkFS = errors.New("state directory is on a network filesystem")
	// ErrSchemaTooNew: the database was written by a newer binary whose
	// schema this one does not know.
	ErrSchemaTooNew = errors.New("state database schema is newer than this binary")
	// ErrInvalid: an argument failed validation (the message names the
	// field).
	ErrInvalid = errors.New("invalid argument")
)

// NetworkFSError reports that a database directory lives on a network or
// cluster filesystem (FS names it, e.g. "nfs", "lustre"), where SQLite's
// POSIX locks and WAL shared memory are unreliable
// (https://www.sqlite.org/wal.html, "WAL does not work over a network
// filesystem"). It matches ErrNetworkFS.
type NetworkFSError struct {
	Dir string
	FS  string
}

func (e *NetworkFSError) Error() string {
	return fmt.Sprintf("state directory %s is on a %s filesystem, where SQLite can corrupt its database: "+
		"choose a --state directory on a node-local disk (e.g. under /tmp or $SLURM_TMPDIR), "+
		"or pass --allow-network-fs (Options.AllowNetworkFS) if you are sure only this node writes it", e.Dir, e.FS)
}

// Unwrap returns ErrNetworkFS.
func (e *NetworkFSError) Unwrap() error { return ErrNetworkFS }

// DSN is go-sqlite3's connection string for the file at path with params
// and the busy timeout (BusyTimeoutMS): a "file:" URI with '%', '?' and '#'
// of the path escaped, which SQLite URI filenames treat as delimiters.
func DSN(path string, params url.Values) string {
	params.Set("_busy_timeout", fmt.Sprint(BusyTimeoutMS))
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + params.Encode()
}

// SchemaVersion reads PRAGMA user_version, the number of migrations applied.
func SchemaVersion(s *sql.DB) (int, error) {
	var v int
	if err := s.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return v, nil
}
