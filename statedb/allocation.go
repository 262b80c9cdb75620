package statedb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Allocation records one change of the physical allocation, taking effect at
// a step boundary.
type Allocation struct {
	// Step is the first step run under this allocation (>= 0).
	Step int64
	// Workers is the number of physical workers (>= 1).
	Workers int
	// Speeds are the workers' relative speeds (finite, > 0), one per
	// worker, or empty for a homogeneous allocation.
	Speeds []float64
	// Placement is the EST placement, e.g. "0-3|4-7".
	Placement string
	// Reason says why the allocation changed ("start", "schedule",
	// "join", "leave", "crash", ...).
	Reason string
	// Time is when the change happened; zero means now.
	Time time.Time
}

func (a Allocation) validate() error {
	if a.Step < 0 {
		return invalidf("Allocation.Step is %d, want >= 0", a.Step)
	}
	if a.Workers < 1 {
		return invalidf("Allocation.Workers is %d, want >= 1", a.Workers)
	}
	if len(a.Speeds) != 0 && len(a.Speeds) != a.Workers {
		return invalidf("Allocation.Speeds has %d entries for %d workers", len(a.Speeds), a.Workers)
	}
	for i, s := range a.Speeds {
		if !(s > 0) || math.IsInf(s, 0) {
			return invalidf("Allocation.Speeds[%d] is %v, want a finite number > 0", i, s)
		}
	}
	return nil
}

// RecordAllocation appends a to the allocation history. Invalid allocations
// wrap ErrInvalid.
func (db *DB) RecordAllocation(a Allocation) error {
	if err := db.writable("recording allocation"); err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return fmt.Errorf("recording allocation at step %d: %w", a.Step, err)
	}
	if a.Time.IsZero() {
		a.Time = time.Now()
	}
	speeds, err := json.Marshal(orEmpty(a.Speeds))
	if err != nil {
		return fmt.Errorf("recording allocation at step %d: encoding speeds: %w", a.Step, err)
	}
	err = db.immediate(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO allocations (step, workers, speeds, placement, reason, time_ns)
			VALUES (?,?,?,?,?,?)`, a.Step, a.Workers, string(speeds), a.Placement, a.Reason, a.Time.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("recording allocation at step %d: %w", a.Step, err)
	}
	return nil
}

// Allocations returns the allocation history in the order it was recorded.
func (db *DB) Allocations() ([]Allocation, error) {
	rows, err := db.sql.Query(`SELECT step, workers, speeds, placement, reason, time_ns
		FROM allocations ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("reading allocation history: %w", err)
	}
	defer rows.Close()
	var out []Allocation
	for rows.Next() {
		var a Allocation
		var speeds string
		var ns int64
		if err := rows.Scan(&a.Step, &a.Workers, &speeds, &a.Placement, &a.Reason, &ns); err != nil {
			return nil, fmt.Errorf("reading allocation history: %w", err)
		}
		if err := json.Unmarshal([]byte(speeds), &a.Speeds); err != nil {
			return nil, fmt.Errorf("reading allocation history: decoding speeds of step %d: %w", a.Step, err)
		}
		if len(a.Speeds) == 0 {
			a.Speeds = nil
		}
		a.Time = time.Unix(0, ns).UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading allocation history: %w", err)
	}
	return out, nil
}
