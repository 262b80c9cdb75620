package backfillstore

import (
	"context"
	"fmt"
	"time"
)

// AdmitState is where one shrink-to-admit is.
type AdmitState string

// Shrink-to-admit states.
const (
	// AdmitIntent: recorded before the first scontrol update; not known to
	// be applied yet.
	AdmitIntent AdmitState = "intent"
	// AdmitDone: the time limit was raised and the job shrunk to ToNodes.
	AdmitDone AdmitState = "done"
	// AdmitAbandoned: not applied (Slurm refused, or the job changed or
	// ended before it was); Detail says why.
	AdmitAbandoned AdmitState = "abandoned"
)

// AdmitShrink is one shrink-to-admit of a running elastic job: Job goes
// from FromNodes to ToNodes nodes so that Queued can start, and its time
// limit from OldLimit to NewLimit.
type AdmitShrink struct {
	// Seq is assigned by the database; ignored by RecordAdmitShrink.
	Seq int64
	// Job is the shrunk elastic job, Queued the job it makes room for;
	// User and Partition are the shrunk job's as squeue showed them, UID
	// its owner's numeric uid (squeue's UserId; "" in records written
	// before schema version 10).
	Job, Queued, User, UID, Partition string
	// OrigNodes is the job's node count before its first shrink-to-admit
	// (what admit.max_loss is a fraction of); FromNodes and ToNodes this
	// shrink's node counts.
	OrigNodes, FromNodes, ToNodes int
	// OldLimit and NewLimit are the job's time limits (from its start).
	OldLimit, NewLimit time.Duration
	// State and Time: where it is and when it was recorded.
	State AdmitState
	Time  time.Time
	// Detail is free text (why it was abandoned).
	Detail string
}

// admitColumnsV3 are the admit_shrinks columns of schema versions 3 to 9.
const admitColumnsV3 = `seq, job_id, queued_id, user_name, partition, orig_nodes, from_nodes, to_nodes, old_limit_s,
	new_limit_s, state, time_ns, detail`

const admitColumns = admitColumnsV3 + `, user_id`

// RecordAdmitShrink records a shrink-to-admit about to be applied (State
// defaults to AdmitIntent) and returns its Seq. Job, Queued and User must
// be non-empty and 1 ≤ ToNodes < FromNodes ≤ OrigNodes. Errors wrap
// ErrInvalid or the SQLite error.
func (db *DB) RecordAdmitShrink(ctx context.Context, a AdmitShrink) (int64, error) {
	if a.Job == "" || a.Queued == "" || a.User == "" || a.ToNodes < 1 || a.ToNodes >= a.FromNodes || a.FromNodes > a.OrigNodes {
		return 0, invalidf("shrink-to-admit %+v: job, queued job and user are required, 1 ≤ to < from ≤ orig nodes", a)
	}
	if a.State == "" {
		a.State = AdmitIntent
	}
	res, err := db.sql.ExecContext(ctx, `INSERT INTO admit_shrinks (`+admitColumns+`) VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		a.Job, a.Queued, a.User, a.Partition, a.OrigNodes, a.FromNodes, a.ToNodes, int64(a.OldLimit.Seconds()),
		int64(a.NewLimit.Seconds()), string(a.State), unixNano(a.Time), a.Detail, a.UID)
	if err != nil {
		return 0, fmt.Errorf("recording shrink-to-admit of job %s for job %s: %w", a.Job, a.Queued, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("recording shrink-to-admit of job %s: %w", a.Job, err)
	}
	return seq, nil
}

// MarkAdmitShrink sets the state and detail of shrink-to-admit seq. Errors
// wrap ErrInvalid for an unknown seq, or the SQLite error.
func (db *DB) MarkAdmitShrink(ctx context.Context, seq int64, state AdmitState, detail string) error {
	res, err := db.sql.ExecContext(ctx, `UPDATE admit_shrinks SET state = ?, detail = ? WHERE seq = ?`, string(state), detail, seq)
	if err != nil {
		return fmt.Errorf("marking shrink-to-admit %d %s: %w", seq, state, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return invalidf("marking shrink-to-admit %d %s: no such record", seq, state)
	}
	return nil
}

// AdmitShrinks returns every recorded shrink-to-admit, oldest first.
func (db *DB) AdmitShrinks(ctx context.Context) ([]AdmitShrink, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT `+admitColumns+` FROM admit_shrinks ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("listing shrink-to-admit records: %w", err)
	}
	defer rows.Close()
	var out []AdmitShrink
	for rows.Next() {
		var a AdmitShrink
		var oldS, newS, ns int64
		var state string
		if err := rows.Scan(&a.Seq, &a.Job, &a.Queued, &a.User, &a.Partition, &a.OrigNodes, &a.FromNodes, &a.ToNodes,
			&oldS, &newS, &state, &ns, &a.Detail, &a.UID); err != nil {
			return nil, fmt.Errorf("listing shrink-to-admit records: %w", err)
		}
		a.OldLimit, a.NewLimit = time.Duration(oldS)*time.Second, time.Duration(newS)*time.Second
		a.State, a.Time = AdmitState(state), fromNano(ns)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing shrink-to-admit records: %w", err)
	}
	return out, nil
}
