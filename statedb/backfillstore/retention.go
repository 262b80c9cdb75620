package backfillstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// LendHistory is one elastic job's failed lends (extra jobs that ended on
// their own well before their time limit while the job ran) as the daemon
// keeps them between cycles and restarts: the job's consecutive failures,
// the newest one's time and the job's status then, the same per node, and
// when the daemon announced that it stopped growing the job. The rule that
// reads it is the planner's (planner.RetryPolicy.MayLend).
type LendHistory struct {
	// Job is the elastic job's Slurm id.
	Job string
	// Failures counts its consecutive failed lends on any node; Last is
	// when the newest was seen; Status is the job's status key then.
	Failures int
	Last     time.Time
	Status   string
	// Stopped is when the daemon said it stopped growing the job (zero:
	// it has not, or the stop was lifted).
	Stopped time.Time
	// Nodes are its consecutive failed lends per node, by node name.
	Nodes []NodeFailures
}

// NodeFailures counts one job's consecutive failed lends on one node.
type NodeFailures struct {
	Node     string
	Failures int
	Last     time.Time
}

// empty reports whether h records nothing.
func (h LendHistory) empty() bool {
	return h.Failures == 0 && h.Last.IsZero() && h.Status == "" && h.Stopped.IsZero() && len(h.Nodes) == 0
}

// LendHistories returns every job's failed lends, by job id.
func (db *DB) LendHistories(ctx context.Context) (map[string]LendHistory, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT job_id, node, failures, last_ns, status, stopped_ns
		FROM lend_failures ORDER BY job_id, node`)
	if err != nil {
		return nil, fmt.Errorf("listing failed lends: %w", err)
	}
	defer rows.Close()
	out := map[string]LendHistory{}
	for rows.Next() {
		var job, node, status string
		var failures int
		var last, stopped int64
		if err := rows.Scan(&job, &node, &failures, &last, &status, &stopped); err != nil {
			return nil, fmt.Errorf("listing failed lends: %w", err)
		}
		h := out[job]
		h.Job = job
		if node == "" {
			h.Failures, h.Last, h.Status, h.Stopped = failures, fromNano(last), status, fromNano(stopped)
		} else {
			h.Nodes = append(h.Nodes, NodeFailures{Node: node, Failures: failures, Last: fromNano(last)})
		}
		out[job] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing failed lends: %w", err)
	}
	return out, nil
}

// PutLendHistory replaces what the store holds for job h.Job with h (an
// empty history deletes it). Job and every node name must be non-empty.
// Errors wrap ErrInvalid or the SQLite error.
func (db *DB) PutLendHistory(ctx context.Context, h LendHistory) error {
	if h.Job == "" {
		return invalidf("failed lends without a job id")
	}
	for _, n := range h.Nodes {
		if n.Node == "" {
			return invalidf("failed lends of job %s on a node without a name", h.Job)
		}
	}
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("recording failed lends of job %s: %w", h.Job, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM lend_failures WHERE job_id = ?`, h.Job); err != nil {
		return fmt.Errorf("recording failed lends of job %s: %w", h.Job, err)
	}
	if !h.empty() {
		const q = `INSERT INTO lend_failures (job_id, node, failures, last_ns, status, stopped_ns) VALUES (?,?,?,?,?,?)`
		if _, err := tx.ExecContext(ctx, q, h.Job, "", h.Failures, unixNano(h.Last), h.Status, unixNano(h.Stopped)); err != nil {
			return fmt.Errorf("recording failed lends of job %s: %w", h.Job, err)
		}
		for _, n := range h.Nodes {
			if _, err := tx.ExecContext(ctx, q, h.Job, n.Node, n.Failures, unixNano(n.Last), "", 0); err != nil {
				return fmt.Errorf("recording failed lends of job %s on %s: %w", h.Job, n.Node, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("recording failed lends of job %s: %w", h.Job, err)
	}
	return nil
}

// Retention says which rows [DB.Prune] keeps.
type Retention struct {
	// Decisions and EndedExtras are how many of the newest decisions (by
	// Seq) and ended extra jobs (by end time) are kept.
	Decisions, EndedExtras int
	// Before: decisions and ended extra jobs older than it are deleted, and
	// so are shrink-to-admit records that are no longer in state intent.
	Before time.Time
	// Listed are the jobs Slurm still lists, in any state: their extra
	// job records are kept, ended or not, so that the daemon still knows
	// them as its own, and so are their shrink-to-admit records (what a
	// job lost counts against admit.max_loss for as long as it exists,
	// also while it waits requeued).
	Listed []string
}

// Pruned counts the rows [DB.Prune] deleted.
type Pruned struct {
	Decisions, Extras, AdmitShrinks int64
}

// Prune deletes, in one transaction, the rows r does not keep: decisions
// beyond the newest r.Decisions or older than r.Before; ended extra jobs
// beyond the newest r.EndedExtras or older than r.Before, unless listed in
// r.Listed; shrink-to-admit records older than r.Before that are done or
// abandoned, unless their job is in r.Listed. Active extra jobs,
// submission intents and failed lends are never pruned here. SQLite reuses
// the freed pages, so a daemon that prunes every cycle keeps its file
// bounded. Errors wrap ErrInvalid (a count below 1) or the SQLite error.
func (db *DB) Prune(ctx context.Context, r Retention) (Pruned, error) {
	var p Pruned
	if r.Decisions < 1 || r.EndedExtras < 1 {
		return p, invalidf("retention of %d decisions and %d ended extra jobs: keep at least one of each", r.Decisions, r.EndedExtras)
	}
	listed, err := json.Marshal(nonNil(r.Listed))
	if err != nil {
		return p, fmt.Errorf("pruning the backfill database: %w", err)
	}
	before := unixNano(r.Before)
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return p, fmt.Errorf("pruning the backfill database: %w", err)
	}
	defer tx.Rollback()
	steps := []struct {
		what string
		n    *int64
		q    string
		args []any
	}{
		{"decisions", &p.Decisions, `DELETE FROM decisions WHERE seq <= (SELECT MAX(seq) FROM decisions) - ? OR time_ns < ?`,
			[]any{r.Decisions, before}},
		{"ended extra jobs", &p.Extras, `DELETE FROM extras WHERE state = ?
			AND job_id NOT IN (SELECT value FROM json_each(?))
			AND (ended_ns < ? OR job_id NOT IN (SELECT job_id FROM extras WHERE state = ?
				ORDER BY ended_ns DESC, length(job_id) DESC, job_id DESC LIMIT ?))`,
			[]any{string(ExtraEnded), string(listed), before, string(ExtraEnded), r.EndedExtras}},
		{"shrink-to-admit records", &p.AdmitShrinks, `DELETE FROM admit_shrinks WHERE state != ? AND time_ns < ?
			AND job_id NOT IN (SELECT value FROM json_each(?))`,
			[]any{string(AdmitIntent), before, string(listed)}},
	}
	for _, st := range steps {
		res, err := tx.ExecContext(ctx, st.q, st.args...)
		if err != nil {
			return Pruned{}, fmt.Errorf("pruning %s: %w", st.what, err)
		}
		if *st.n, err = res.RowsAffected(); err != nil {
			return Pruned{}, fmt.Errorf("pruning %s: %w", st.what, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Pruned{}, fmt.Errorf("pruning the backfill database: %w", err)
	}
	return p, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
