package statedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Job is the identity of the training job a state directory belongs to.
type Job struct {
	// ID is the hex SHA-256 of the canonical spec, computed by the caller;
	// it is the identity compared on reopen.
	ID string
	// Name is the job's human-readable name (from its job file).
	Name string
	// Spec is the canonical job specification (TOML or JSON text).
	Spec string
	// LogicalWorkers is N, the number of ESTs (>= 1).
	LogicalWorkers int
	// Created is when the job was first stored; zero means now.
	Created time.Time
}

func (j Job) validate() error {
	switch {
	case j.ID == "":
		return invalidf("Job.ID is empty")
	case j.LogicalWorkers < 1:
		return invalidf("Job.LogicalWorkers is %d, want >= 1", j.LogicalWorkers)
	}
	return nil
}

// InitJob stores j as the state directory's job, once. Called again with the
// same ID it stores nothing and reports existing=true; with another ID it
// returns a *JobMismatchError (matching ErrJobMismatch) naming both jobs and
// leaves the stored state untouched.
func (db *DB) InitJob(j Job) (existing bool, err error) {
	if err := db.writable("storing job"); err != nil {
		return false, err
	}
	if err := j.validate(); err != nil {
		return false, fmt.Errorf("storing job: %w", err)
	}
	if j.Created.IsZero() {
		j.Created = time.Now()
	}
	err = db.immediate(context.Background(), func(tx *sql.Tx) error {
		stored, err := scanJob(tx.QueryRow(jobSelect))
		switch {
		case errors.Is(err, ErrNoJob):
			_, err = tx.Exec(`INSERT INTO job (singleton, job_id, name, spec, logical_workers, created_ns)
				VALUES (1, ?, ?, ?, ?, ?)`, j.ID, j.Name, j.Spec, j.LogicalWorkers, j.Created.UnixNano())
			return err
		case err != nil:
			return err
		case stored.ID != j.ID:
			return &JobMismatchError{Dir: db.dir, StoredID: stored.ID, StoredName: stored.Name,
				GivenID: j.ID, GivenName: j.Name}
		}
		existing = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("storing job %q: %w", j.Name, err)
	}
	return existing, nil
}

const jobSelect = `SELECT job_id, name, spec, logical_workers, created_ns FROM job WHERE singleton = 1`

// Job returns the stored job, or an error wrapping ErrNoJob when InitJob has
// not been called.
func (db *DB) Job() (Job, error) {
	j, err := scanJob(db.sql.QueryRow(jobSelect))
	if err != nil {
		return Job{}, fmt.Errorf("reading job of %s: %w", db.dir, err)
	}
	return j, nil
}

func scanJob(row *sql.Row) (Job, error) {
	var j Job
	var ns int64
	err := row.Scan(&j.ID, &j.Name, &j.Spec, &j.LogicalWorkers, &ns)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, ErrNoJob
	}
	if err != nil {
		return Job{}, err
	}
	j.Created = time.Unix(0, ns).UTC()
	return j, nil
}
