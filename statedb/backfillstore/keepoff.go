package backfillstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// KeptOff is what the daemon's keep_off_pinned did to one pending job's
// excluded nodes (its ExcNodeList): the nodes it added that the job's
// owner had not excluded, the whole list it set, the GPU types the added
// nodes hold, when it first kept the job off, and whether the job's owner
// has since changed the list (then the list is the owner's and the job is
// kept off nothing more). The daemon takes exactly the added nodes out
// again, and never keeps a job off again once its time limit has passed
// since Since. A record outlives the spell it describes (no Nodes, a
// Since) until the job is gone.
type KeptOff struct {
	// Job is the pending job's Slurm id.
	Job string
	// Nodes are the node names the daemon added; Set the whole list it
	// set; Types the GPU types it keeps the job off.
	Nodes, Set, Types []string
	// Since is when the job was first kept off (zero: never).
	Since time.Time
	// Released: the job's owner changed the list the daemon had set.
	Released bool
}

// empty reports whether k holds nothing worth keeping.
func (k KeptOff) empty() bool { return len(k.Nodes) == 0 && k.Since.IsZero() && !k.Released }

// KeptOffJobs returns every job's KeptOff, by job id.
func (db *DB) KeptOffJobs(ctx context.Context) (map[string]KeptOff, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT job_id, nodes, set_to, types, since_ns, released FROM kept_off ORDER BY job_id`)
	if err != nil {
		return nil, fmt.Errorf("listing the jobs kept off pinned GPU types: %w", err)
	}
	defer rows.Close()
	out := map[string]KeptOff{}
	for rows.Next() {
		var k KeptOff
		var nodes, set, types string
		var since int64
		if err := rows.Scan(&k.Job, &nodes, &set, &types, &since, &k.Released); err != nil {
			return nil, fmt.Errorf("listing the jobs kept off pinned GPU types: %w", err)
		}
		k.Nodes, k.Set, k.Types, k.Since = splitList(nodes), splitList(set), splitList(types), fromNano(since)
		out[k.Job] = k
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the jobs kept off pinned GPU types: %w", err)
	}
	return out, nil
}

// PutKeptOff replaces what the store holds for job k.Job with k; a record
// with no Nodes, a zero Since and not Released deletes it. Job and every
// name must be non-empty and hold no comma. Errors wrap ErrInvalid or the
// SQLite error.
func (db *DB) PutKeptOff(ctx context.Context, k KeptOff) error {
	if k.Job == "" {
		return invalidf("kept-off nodes without a job id")
	}
	for _, n := range slices.Concat(k.Nodes, k.Set, k.Types) {
		if n == "" || strings.Contains(n, ",") {
			return invalidf("kept-off name %q of job %s: empty or holding a comma", n, k.Job)
		}
	}
	if k.empty() {
		if _, err := db.sql.ExecContext(ctx, `DELETE FROM kept_off WHERE job_id = ?`, k.Job); err != nil {
			return fmt.Errorf("forgetting the kept-off nodes of job %s: %w", k.Job, err)
		}
		return nil
	}
	const q = `INSERT INTO kept_off (job_id, nodes, set_to, types, since_ns, released) VALUES (?,?,?,?,?,?)
		ON CONFLICT(job_id) DO UPDATE SET nodes = excluded.nodes, set_to = excluded.set_to, types = excluded.types,
		since_ns = excluded.since_ns, released = excluded.released`
	if _, err := db.sql.ExecContext(ctx, q, k.Job, strings.Join(k.Nodes, ","), strings.Join(k.Set, ","), strings.Join(k.Types, ","),
		unixNano(k.Since), k.Released); err != nil {
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
