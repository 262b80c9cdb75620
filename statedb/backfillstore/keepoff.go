package backfillstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// KeptOff is what the daemon's keep_off_pinned added to one pending job's
// excluded nodes (its ExcNodeList): the nodes it added that the job's owner
// had not excluded, the GPU types they hold, and when this spell of
// keeping it off began. The daemon takes exactly these nodes out again
// when no waiting pinned job needs those types or the spell has lasted
// longer than the job's time limit, and leaves every node the owner
// excluded where it is. A record without nodes but with a start is a spell
// that ran out: the job is not kept off again until it ends.
type KeptOff struct {
	// Job is the pending job's Slurm id.
	Job string
	// Nodes are the node names the daemon added; Types the GPU types it
	// keeps the job off.
	Nodes, Types []string
	// Since is when the job was first kept off in this spell.
	Since time.Time
}

// KeptOffJobs returns every job's KeptOff, by job id.
func (db *DB) KeptOffJobs(ctx context.Context) (map[string]KeptOff, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT job_id, nodes, types, time_ns FROM kept_off ORDER BY job_id`)
	if err != nil {
		return nil, fmt.Errorf("listing the jobs kept off pinned GPU types: %w", err)
	}
	defer rows.Close()
	out := map[string]KeptOff{}
	for rows.Next() {
		var k KeptOff
		var nodes, types string
		var at int64
		if err := rows.Scan(&k.Job, &nodes, &types, &at); err != nil {
			return nil, fmt.Errorf("listing the jobs kept off pinned GPU types: %w", err)
		}
		k.Nodes, k.Types, k.Since = splitList(nodes), splitList(types), fromNano(at)
		out[k.Job] = k
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the jobs kept off pinned GPU types: %w", err)
	}
	return out, nil
}

// PutKeptOff replaces what the store holds for job k.Job with k; no Nodes
// and a zero Since delete it. Job and every name must be non-empty and hold no comma.
// Errors wrap ErrInvalid or the SQLite error.
func (db *DB) PutKeptOff(ctx context.Context, k KeptOff) error {
	if k.Job == "" {
		return invalidf("kept-off nodes without a job id")
	}
	for _, n := range slices.Concat(k.Nodes, k.Types) {
		if n == "" || strings.Contains(n, ",") {
			return invalidf("kept-off name %q of job %s: empty or holding a comma", n, k.Job)
		}
	}
	if len(k.Nodes) == 0 && k.Since.IsZero() {
		if _, err := db.sql.ExecContext(ctx, `DELETE FROM kept_off WHERE job_id = ?`, k.Job); err != nil {
			return fmt.Errorf("forgetting the kept-off nodes of job %s: %w", k.Job, err)
		}
		return nil
	}
	const q = `INSERT INTO kept_off (job_id, nodes, types, time_ns) VALUES (?,?,?,?)
		ON CONFLICT(job_id) DO UPDATE SET nodes = excluded.nodes, types = excluded.types, time_ns = excluded.time_ns`
	if _, err := db.sql.ExecContext(ctx, q, k.Job, strings.Join(k.Nodes, ","), strings.Join(k.Types, ","), unixNano(k.Since)); err != nil {
		return fmt.Errorf("recording the kept-off nodes of job %s: %w", k.Job, err)
	}
	return nil
}

// splitList splits a comma-separated list ("" is none).
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
