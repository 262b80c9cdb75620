package statedb

import (
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
)

// Row checksums. Every row a resume depends on is covered by a SHA-256
// stored beside it (schema version 2), so that a change made outside
// statedb (a flipped bit on disk, an UPDATE by hand) is detected instead of
// silently read: a ledger row by its own checksum column, a checkpoint's
// row together with its EST contexts by the checkpoint row's checksum (the
// manifest). The safetensors file is covered by the sha256 the manifest
// holds.
//
// The checksum is over the values as SQLite stores them, in column order,
// after a domain string naming the table: each value is a one-byte storage
// class and its bytes (INTEGER: 8 bytes big-endian; REAL: the 8 IEEE-754
// bytes big-endian; TEXT and BLOB: an 8-byte big-endian length, then the
// bytes; NULL: nothing). A value whose storage class changed (text written
// into an integer column) therefore changes the checksum too.
const (
	ledgerDomainV1   = "easyscale.statedb.ledger.v1" // schema 2-4: the 11 columns of ledgerColumnsV1
	ledgerDomain     = "easyscale.statedb.ledger.v2" // schema 5: ledgerColumns, with unhashed
	checkpointDomain = "easyscale.statedb.checkpoint.v1"
)

// rowHash accumulates the canonical encoding of stored values.
type rowHash struct {
	h   hash.Hash
	buf [9]byte
}

func newRowHash(domain string) *rowHash {
	r := &rowHash{h: sha256.New()}
	r.add(domain)
	return r
}

// add appends values as SQLite returns them through database/sql: int64,
// float64, string, []byte or nil. Go values the driver converts on binding
// (int, bool) are encoded as the INTEGER they become; -0 is encoded as +0,
// which is what SQLite gives back.
func (r *rowHash) add(values ...any) {
	for _, v := range values {
		switch v := v.(type) {
		case nil:
			r.h.Write([]byte{'n'})
		case int64:
			r.fixed('i', uint64(v))
		case int:
			r.fixed('i', uint64(int64(v)))
		case bool:
			var i uint64
			if v {
				i = 1
			}
			r.fixed('i', i)
		case float64:
			if v == 0 {
				v = 0
			}
			r.fixed('f', math.Float64bits(v))
		case string:
			r.fixed('s', uint64(len(v)))
			r.h.Write([]byte(v))
		case []byte:
			r.fixed('b', uint64(len(v)))
			r.h.Write(v)
		default:
			// Not a storage class: make the checksum differ from any
			// row of storable values.
			r.fixed('?', 0)
			fmt.Fprintf(r.h, "%T", v)
		}
	}
}

func (r *rowHash) fixed(tag byte, u uint64) {
	r.buf[0] = tag
	binary.BigEndian.PutUint64(r.buf[1:], u)
	r.h.Write(r.buf[:])
}

func (r *rowHash) sum() string { return hex.EncodeToString(r.h.Sum(nil)) }

// ledgerColumnsV1 are the ledger's columns of schema versions 1-4, in the
// order their checksum (ledgerDomainV1) covers them.
const ledgerColumnsV1 = `step, digest, tensor_digests, loss, wall_seconds, workers, placement,
	samples_hash, redo, redo_count, time_ns`

// ledgerColumns are the ledger's columns in checksum order; the checksum
// column itself comes last in ledgerSelect.
const ledgerColumns = ledgerColumnsV1 + `, unhashed`

// ledgerWidth is the number of ledgerColumns.
const ledgerWidth = 12

// ledgerChecksum is the checksum of a ledger row given as its column values
// in ledgerColumns order.
func ledgerChecksum(values []any) string {
	r := newRowHash(ledgerDomain)
	r.add(values...)
	return r.sum()
}

// ledgerChecksumV1 is the checksum schema versions 2-4 stored: over the
// ledgerColumnsV1 values.
func ledgerChecksumV1(values []any) string {
	r := newRowHash(ledgerDomainV1)
	r.add(values...)
	return r.sum()
}

// fillUnhashedChecksums (migration 5) gives every ledger row whose stored
// checksum matches its schema-4 checksum the schema-5 checksum, which also
// covers the new unhashed column (0 for every row written before). A row
// that did not match keeps its stored checksum and so stays corrupt: the
// migration vouches only for rows that were intact.
func fillUnhashedChecksums(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT ` + ledgerColumns + `, checksum FROM ledger ORDER BY step`)
	if err != nil {
		return fmt.Errorf("re-checksumming ledger rows: %w", err)
	}
	type fill struct {
		step any
		sum  string
	}
	var fills []fill
	for rows.Next() {
		vals, err := scanAny(rows, ledgerWidth+1)
		if err != nil {
			rows.Close()
			return fmt.Errorf("re-checksumming ledger rows: %w", err)
		}
		if stored, _ := vals[ledgerWidth].(string); stored == ledgerChecksumV1(vals[:ledgerWidth-1]) {
			fills = append(fills, fill{vals[0], ledgerChecksum(vals[:ledgerWidth])})
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return fmt.Errorf("re-checksumming ledger rows: %w", err)
	}
	rows.Close()
	for _, f := range fills {
		if _, err := tx.Exec(`UPDATE ledger SET checksum = ? WHERE step = ?`, f.sum, f.step); err != nil {
			return fmt.Errorf("re-checksumming ledger row of step %v: %w", f.step, err)
		}
	}
	return nil
}

// checkpointChecksum is the manifest checksum of a checkpoint: its
// checkpoints row (step, file, sha256, size, time_ns) followed by each of
// its est_contexts rows (est, blob) in EST order.
func checkpointChecksum(row []any, contexts [][2]any) string {
	r := newRowHash(checkpointDomain)
	r.add(row...)
	r.add(int64(len(contexts)))
	for _, c := range contexts {
		r.add(c[0], c[1])
	}
	return r.sum()
}

// jobDomain names the job row's checksum.
const jobDomain = "easyscale.job.v1"

// jobChecksum is the checksum of the job row: job_id, name, spec,
// logical_workers, created_ns and data_files, as stored.
func jobChecksum(id, name, spec string, logicalWorkers, createdNS int64, dataFiles string) string {
	r := newRowHash(jobDomain)
	r.add(id, name, spec, logicalWorkers, createdNS, dataFiles)
	return r.sum()
}

// fillJobChecksum gives the job row written before schema version 4 its checksum.
func fillJobChecksum(tx *sql.Tx) error {
	var id, name, spec, files string
	var lw, ns int64
	err := tx.QueryRow(`SELECT job_id, name, spec, logical_workers, created_ns, data_files FROM job WHERE singleton = 1`).
		Scan(&id, &name, &spec, &lw, &ns, &files)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("computing the job row's checksum: %w", err)
	}
	_, err = tx.Exec(`UPDATE job SET checksum = ? WHERE singleton = 1`, jobChecksum(id, name, spec, lw, ns, files))
	return err
}

// scanAny scans the current row of rows into one any per column.
func scanAny(rows *sql.Rows, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

// fillChecksums computes the checksums of rows written before schema
// version 2 (migration 2): they cover the rows as they are then, so later
// changes are detected.
func fillChecksums(tx *sql.Tx) error {
	if err := fillLedgerChecksums(tx); err != nil {
		return fmt.Errorf("computing ledger checksums: %w", err)
	}
	if err := fillCheckpointChecksums(tx); err != nil {
		return fmt.Errorf("computing checkpoint checksums: %w", err)
	}
	return nil
}

func fillLedgerChecksums(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT ` + ledgerColumnsV1 + ` FROM ledger ORDER BY step`)
	if err != nil {
		return err
	}
	type fill struct {
		step any
		sum  string
	}
	var fills []fill
	for rows.Next() {
		vals, err := scanAny(rows, 11)
		if err != nil {
			rows.Close()
			return err
		}
		fills = append(fills, fill{vals[0], ledgerChecksumV1(vals)})
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	rows.Close()
	for _, f := range fills {
		if _, err := tx.Exec(`UPDATE ledger SET checksum = ? WHERE step = ?`, f.sum, f.step); err != nil {
			return err
		}
	}
	return nil
}

func fillCheckpointChecksums(tx *sql.Tx) error {
	recs, err := checkpointRows(tx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		ctxs, err := contextRows(tx, r.row[0])
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE checkpoints SET checksum = ? WHERE step = ?`,
			checkpointChecksum(r.row, ctxs), r.row[0]); err != nil {
			return err
		}
	}
	return nil
}

// storedCheckpoint is a checkpoints row as stored: (step, file, sha256,
// size, time_ns) and the checksum column.
type storedCheckpoint struct {
	row []any
	sum any
}

type querier interface {
	Query(string, ...any) (*sql.Rows, error)
}

// checkpointRows reads every checkpoints row, newest first, as stored.
func checkpointRows(q querier) ([]storedCheckpoint, error) {
	rows, err := q.Query(`SELECT step, file, sha256, size, time_ns, checksum FROM checkpoints ORDER BY step DESC`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedCheckpoint
	for rows.Next() {
		vals, err := scanAny(rows, 6)
		if err != nil {
			return nil, err
		}
		out = append(out, storedCheckpoint{row: vals[:5], sum: vals[5]})
	}
	return out, rows.Err()
}

// contextRows reads the est_contexts rows of step in EST order, as stored.
func contextRows(q querier, step any) ([][2]any, error) {
	rows, err := q.Query(`SELECT est, blob FROM est_contexts WHERE step = ? ORDER BY est`, step)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]any
	for rows.Next() {
		vals, err := scanAny(rows, 2)
		if err != nil {
			return nil, err
		}
		out = append(out, [2]any{vals[0], vals[1]})
	}
	return out, rows.Err()
}
