package backfillstore

import (
	"context"
	"fmt"
	"time"
)

// StartedSmall is what the daemon's start-small did to one queued job:
// its owner (User), the node count it asked for (FromNodes) and the one
// the daemon set (ToNodes), its time limit before and after the raise
// for the smaller size (OldLimit, NewLimit, whole minutes), when (At), and
// whether the old limit was put back because the owner raised the node
// count again while it waited (Restored). A record stays until the job is
// gone, so a job is started small once at most: a raise is computed from
// the job's limit and node count, and an owner who set the node count
// back could otherwise have it raised again, cycle after cycle (a
// tester's finding, 10 → 17 → 29 → 48 min). GPUs is how many GPUs in all
// it asked for on ToNodes nodes (0: not known, as in the records of schema
// versions before 8): an owner who asks for more GPUs per node instead
// of more nodes has set it back too (a tester's finding). UID is the
// owner's numeric uid (squeue's UserId; "" in records written before
// schema version 10).
type StartedSmall struct {
	Job, User, UID     string
	FromNodes, ToNodes int
	GPUs               int
	OldLimit, NewLimit time.Duration
	At                 time.Time
	Restored           bool
}

// StartedSmallJobs returns every job's StartedSmall, by job id.
func (db *DB) StartedSmallJobs(ctx context.Context) (map[string]StartedSmall, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT job_id, user, from_nodes, to_nodes, gpus, old_limit_s, new_limit_s, at_ns,
		restored, user_id FROM started_small ORDER BY job_id`)
	if err != nil {
		return nil, fmt.Errorf("listing the jobs started small: %w", err)
	}
	defer rows.Close()
	out := map[string]StartedSmall{}
	for rows.Next() {
		var s StartedSmall
		var oldS, newS, at int64
		if err := rows.Scan(&s.Job, &s.User, &s.FromNodes, &s.ToNodes, &s.GPUs, &oldS, &newS, &at, &s.Restored, &s.UID); err != nil {
			return nil, fmt.Errorf("listing the jobs started small: %w", err)
		}
		s.OldLimit, s.NewLimit, s.At = time.Duration(oldS)*time.Second, time.Duration(newS)*time.Second, fromNano(at)
		out[s.Job] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the jobs started small: %w", err)
	}
	return out, nil
}

// PutStartedSmall replaces what the store holds for job s.Job with s. Job
// and User must be non-empty, 1 ≤ ToNodes ≤ FromNodes, GPUs ≥ 0, the
// limits positive. Errors wrap ErrInvalid or the SQLite error.
func (db *DB) PutStartedSmall(ctx context.Context, s StartedSmall) error {
	switch {
	case s.Job == "" || s.User == "":
		return invalidf("a start-small record without a job id or user (%q, %q)", s.Job, s.User)
	case s.ToNodes < 1 || s.ToNodes > s.FromNodes || s.GPUs < 0:
		return invalidf("start-small of job %s: from %d to %d nodes, %d GPUs", s.Job, s.FromNodes, s.ToNodes, s.GPUs)
	case s.OldLimit <= 0 || s.NewLimit <= 0:
		return invalidf("start-small of job %s: time limits %v and %v", s.Job, s.OldLimit, s.NewLimit)
	}
	const q = `INSERT INTO started_small (job_id, user, from_nodes, to_nodes, gpus, old_limit_s, new_limit_s, at_ns, restored,
		user_id) VALUES (?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(job_id) DO UPDATE SET user = excluded.user, user_id = excluded.user_id, from_nodes = excluded.from_nodes, to_nodes = excluded.to_nodes,
		gpus = excluded.gpus, old_limit_s = excluded.old_limit_s, new_limit_s = excluded.new_limit_s, at_ns = excluded.at_ns,
		restored = excluded.restored`
	if _, err := db.sql.ExecContext(ctx, q, s.Job, s.User, s.FromNodes, s.ToNodes, s.GPUs, int64(s.OldLimit/time.Second),
		int64(s.NewLimit/time.Second), unixNano(s.At), s.Restored, s.UID); err != nil {
		return fmt.Errorf("recording the start-small of job %s: %w", s.Job, err)
	}
	return nil
}

// ForgetStartedSmall deletes job's start-small record (the job is gone).
func (db *DB) ForgetStartedSmall(ctx context.Context, job string) error {
	if _, err := db.sql.ExecContext(ctx, `DELETE FROM started_small WHERE job_id = ?`, job); err != nil {
		return fmt.Errorf("forgetting the start-small of job %s: %w", job, err)
	}
	return nil
}
