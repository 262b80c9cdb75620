package statedb

import (
	"context"
	"database/sql"
	"encoding/json"
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
	// Data lists every file the job's task reads, in its load order: part
	// of the identity compared on reopen (see InitJob).
	Data []DataFile
}

// DataFile is the content identity of one training data file.
type DataFile struct {
	Name   string `json:"name"`   // base name, e.g. "train-images-idx3-ubyte.gz"
	Size   int64  `json:"size"`   // bytes
	SHA256 string `json:"sha256"` // lower-case hex
}

// firstDataDifference returns the index of the first entry where stored
// and given differ (one side may be shorter), or -1 when they are equal.
func firstDataDifference(stored, given []DataFile) int {
	for i := 0; i < max(len(stored), len(given)); i++ {
		if i >= len(stored) || i >= len(given) || stored[i] != given[i] {
			return i
		}
	}
	return -1
}

func dataMismatch(dir string, stored, given []DataFile) error {
	i := firstDataDifference(stored, given)
	if i < 0 {
		return nil
	}
	e := &DataMismatchError{Dir: dir}
	if i < len(given) {
		e.Given, e.File = given[i], given[i].Name
	}
	if i < len(stored) {
		e.Stored, e.File = stored[i], stored[i].Name
	}
	return e
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
// same ID and the same Data it stores nothing and reports existing=true;
// with another ID it returns a *JobMismatchError (matching ErrJobMismatch)
// naming both jobs, and with other Data a *DataMismatchError (matching
// ErrDataMismatch) naming the first file that differs; either leaves the
// stored state untouched. A job stored before data was recorded (schema
// version 2 or older, empty Data) adopts j.Data.
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
	files, err := encodeDataFiles(j.Data)
	if err != nil {
		return false, fmt.Errorf("storing job %q: %w", j.Name, err)
	}
	err = db.immediate(context.Background(), func(tx *sql.Tx) error {
		stored, err := scanJob(tx.QueryRow(jobSelect))
		switch {
		case errors.Is(err, ErrNoJob):
			ns := j.Created.UnixNano()
			_, err = tx.Exec(`INSERT INTO job (singleton, job_id, name, spec, logical_workers, created_ns, data_files, checksum)
				VALUES (1, ?, ?, ?, ?, ?, ?, ?)`, j.ID, j.Name, j.Spec, j.LogicalWorkers, ns, files,
				jobChecksum(j.ID, j.Name, j.Spec, int64(j.LogicalWorkers), ns, files))
			return err
		case err != nil:
			return err
		case stored.ID != j.ID:
			return &JobMismatchError{Dir: db.dir, StoredID: stored.ID, StoredName: stored.Name,
				GivenID: j.ID, GivenName: j.Name}
		case len(stored.Data) == 0 && len(j.Data) > 0:
			sum := jobChecksum(stored.ID, stored.Name, stored.Spec, int64(stored.LogicalWorkers), stored.Created.UnixNano(), files)
			if _, err := tx.Exec(`UPDATE job SET data_files = ?, checksum = ? WHERE singleton = 1`, files, sum); err != nil {
				return err
			}
		default:
			if err := dataMismatch(db.dir, stored.Data, j.Data); err != nil {
				return err
			}
		}
		existing = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("storing job %q: %w", j.Name, err)
	}
	return existing, nil
}

const jobSelect = `SELECT job_id, name, spec, logical_workers, created_ns, data_files, checksum FROM job WHERE singleton = 1`

// encodeDataFiles is the data_files column of files: the empty string for
// none, else JSON.
func encodeDataFiles(files []DataFile) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	for i, f := range files {
		if f.Name == "" || f.Size < 0 || f.SHA256 == "" {
			return "", invalidf("Job.Data[%d] = %+v: want a name, a size >= 0 and a sha256", i, f)
		}
	}
	b, err := json.Marshal(files)
	return string(b), err
}

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
	var files, sum string
	err := row.Scan(&j.ID, &j.Name, &j.Spec, &j.LogicalWorkers, &ns, &files, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, ErrNoJob
	}
	if err != nil {
		return Job{}, err
	}
	if got := jobChecksum(j.ID, j.Name, j.Spec, int64(j.LogicalWorkers), ns, files); got != sum {
		return Job{}, &CorruptRowError{Table: "job", Want: sum, Got: got}
	}
	if files != "" {
		if err := json.Unmarshal([]byte(files), &j.Data); err != nil {
			return Job{}, fmt.Errorf("decoding the job's data_files %q: %w", files, err)
		}
	}
	j.Created = time.Unix(0, ns).UTC()
	return j, nil
}
