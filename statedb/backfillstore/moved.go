package backfillstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MoveState is where a move of a running job to faster GPUs stands
// (the daemon's move_to_faster).
type MoveState string

// The move states, in the order a move goes through them.
const (
	// MoveRequeued: recorded before `scontrol requeue`; the job may
	// already be pending again.
	MoveRequeued MoveState = "requeued"
	// MoveExcluded: the daemon set the job's excluded nodes (Moved.Set,
	// the owner's Moved.Owner plus the slower nodes Moved.From) so that it
	// restarts on faster ones.
	MoveExcluded MoveState = "excluded"
	// MoveRan: the job has run again since (Slurm refuses to change a
	// running job's excluded nodes, so they stay until it waits again).
	MoveRan MoveState = "ran"
	// MoveRestored: the owner's list is back, or the owner changed it, or
	// there was nothing to put back; the record only marks the job as
	// moved once (it is never moved again).
	MoveRestored MoveState = "restored"
)

// Moved is what the daemon's move_to_faster did to one job: the slow nodes
// it restarts without (From: those it ran on, then every other node slower
// than its target that it may run on), its
// owner's excluded nodes before the move (Owner), the list the daemon set
// (Set), when, and how far the move got (State). A record stays until the
// job is gone, so a job is moved once at most.
type Moved struct {
	Job              string
	From, Owner, Set []string
	Since            time.Time
	State            MoveState
}

// MovedJobs returns every job's Moved, by job id.
func (db *DB) MovedJobs(ctx context.Context) (map[string]Moved, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT job_id, from_nodes, owner, set_to, since_ns, state FROM moved ORDER BY job_id`)
	if err != nil {
		return nil, fmt.Errorf("listing the jobs moved to faster GPUs: %w", err)
	}
	defer rows.Close()
	out := map[string]Moved{}
	for rows.Next() {
		var m Moved
		var from, owner, set, state string
		var since int64
		if err := rows.Scan(&m.Job, &from, &owner, &set, &since, &state); err != nil {
			return nil, fmt.Errorf("listing the jobs moved to faster GPUs: %w", err)
		}
		m.From, m.Owner, m.Set, m.Since, m.State = splitList(from), splitList(owner), splitList(set), fromNano(since), MoveState(state)
		out[m.Job] = m
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the jobs moved to faster GPUs: %w", err)
	}
	return out, nil
}

// PutMoved replaces what the store holds for job m.Job with m. Job, every
// node name and State must be non-empty, names hold no comma, State one
// of the MoveState constants. Errors wrap ErrInvalid or the SQLite error.
func (db *DB) PutMoved(ctx context.Context, m Moved) error {
	if m.Job == "" {
		return invalidf("a move without a job id")
	}
	if !slices.Contains([]MoveState{MoveRequeued, MoveExcluded, MoveRan, MoveRestored}, m.State) {
		return invalidf("move of job %s: state %q", m.Job, m.State)
	}
	for _, n := range slices.Concat(m.From, m.Owner, m.Set) {
		if n == "" || strings.Contains(n, ",") {
			return invalidf("moved job %s: node name %q empty or holding a comma", m.Job, n)
		}
	}
	const q = `INSERT INTO moved (job_id, from_nodes, owner, set_to, since_ns, state) VALUES (?,?,?,?,?,?)
		ON CONFLICT(job_id) DO UPDATE SET from_nodes = excluded.from_nodes, owner = excluded.owner, set_to = excluded.set_to,
		since_ns = excluded.since_ns, state = excluded.state`
	if _, err := db.sql.ExecContext(ctx, q, m.Job, strings.Join(m.From, ","), strings.Join(m.Owner, ","), strings.Join(m.Set, ","),
		unixNano(m.Since), string(m.State)); err != nil {
		return fmt.Errorf("recording the move of job %s: %w", m.Job, err)
	}
	return nil
}

// ForgetMoved deletes job's move record (the job is gone).
func (db *DB) ForgetMoved(ctx context.Context, job string) error {
	if _, err := db.sql.ExecContext(ctx, `DELETE FROM moved WHERE job_id = ?`, job); err != nil {
		return fmt.Errorf("forgetting the move of job %s: %w", job, err)
	}
	return nil
}
