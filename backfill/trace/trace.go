// Package trace reads public GPU-cluster job tables into one [Job] type for
// the backfill simulator. Two layouts are understood (see
// shared/traces/README.md):
//
//   - the common job-table schema (Philly 2017, Microsoft ITP 2021, Alibaba
//     2023 "openb"): columns job_id, submit_time_s, duration_s, num_gpus,
//     gpu_type, status, is_training, then source-specific extras (Philly's
//     vc becomes the job's User);
//   - Pollux simulator workloads: name, time, application, num_replicas,
//     batch_size, which carry no runtime; [PolluxGPUHours] gives the
//     documented rule that supplies one.
//
// Either layout may add the [OptionalColumns] (logical_workers, min_gpus,
// max_gpus, determinism, speeds) for what the trace knows of a job's elastic
// request; [Job.Elastic] documents the defaults for what it does not.
//
// Parse errors are [*ParseError] values carrying the line and column.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/spelling"
)

// Job is one job of a trace.
type Job struct {
	// ID is the trace's job id (or a synthesized one).
	ID string
	// Submit is the submission time in seconds from the trace start.
	Submit int64
	// Duration is the runtime in seconds at the requested size on reference
	// GPUs (≥ 1).
	Duration int64
	// GPUs is the requested GPU count (≥ 0).
	GPUs int
	// GPUType is the GPU model or constraint; empty when the trace has none.
	GPUType string
	// User is the owner or group (Philly: the virtual cluster); may be empty.
	User string
	// Cluster is the cluster the job ran on, from a common-layout table's
	// cluster column (Microsoft ITP's itp_jobs.csv holds ten clusters'
	// jobs, sorted by cluster, then submit time); empty when the table has
	// one cluster.
	Cluster string `json:",omitempty"`
	// Training is false for rows the trace marks as not training.
	Training bool
	// LogicalWorkers, MinGPUs and MaxGPUs are the job's elastic request from
	// the optional columns logical_workers, min_gpus and max_gpus (0: the
	// trace does not say); Determinism is the optional column determinism,
	// "d1", "d2" or "" (not said). [Job.Elastic] applies the defaults.
	LogicalWorkers int    `json:",omitempty"`
	MinGPUs        int    `json:",omitempty"`
	MaxGPUs        int    `json:",omitempty"`
	Determinism    string `json:",omitempty"`
	// Speeds is the optional column speeds: the job's own throughput per
	// GPU type relative to the reference type, as TYPE:SPEED,... (the job
	// comment's speeds= form, elastic.ParseSpeeds); nil: the simulator's
	// speed table applies.
	Speeds map[string]float64 `json:",omitempty"`
}

// OptionalColumns are the columns either layout may add, in any position
// after its own, to say what the job declared; an empty cell means the
// trace does not say. Rules (checked on reading, errors name the column):
// logical_workers ≥ num_gpus (a job needs a logical worker per GPU);
// 1 ≤ min_gpus ≤ num_gpus ≤ max_gpus; determinism is d1 or d2.
// speeds is TYPE:SPEED,... (a cell with commas is quoted, as encoding/csv
// writes it), each type once, each speed in (0, 100].
var OptionalColumns = []string{"logical_workers", "min_gpus", "max_gpus", "determinism", "speeds"}

// Request is a job's elastic request in GPUs, with the defaults applied.
type Request struct {
	// MinGPUs and MaxGPUs bound the GPUs it may run on; LogicalWorkers is
	// its EST count (≥ MaxGPUs: every GPU needs a logical worker).
	MinGPUs, MaxGPUs, LogicalWorkers int
	// D2 is true for determinism level d2 (results independent of the GPU
	// type: the job may mix types); false for d1, one type for its life.
	D2 bool
}

// Elastic returns the elastic request of a job asking for R = GPUs GPUs,
// from its optional columns, and for what the trace does not say these
// defaults (our assumption about jobs recorded on rigid clusters, not a
// measurement): logical workers = max_gpus if given, else 2R; max_gpus =
// the logical workers, never more; min_gpus = ceil(R/2); determinism d1 (the
// EasyScale default, elastic.DefaultDeterminism). A job that declares lw=R
// can therefore never grow past R, as on Slurm. With no column at all this
// is the range every trace job had before the columns existed: ceil(R/2) to
// 2R GPUs, 2R logical workers.
func (j Job) Elastic() Request {
	r := Request{MinGPUs: (j.GPUs + 1) / 2, MaxGPUs: j.MaxGPUs, LogicalWorkers: j.LogicalWorkers, D2: j.Determinism == "d2"}
	if r.LogicalWorkers == 0 {
		r.LogicalWorkers = 2 * j.GPUs
		if j.MaxGPUs > 0 {
			r.LogicalWorkers = j.MaxGPUs
		}
	}
	if r.MaxGPUs == 0 || r.MaxGPUs > r.LogicalWorkers {
		r.MaxGPUs = r.LogicalWorkers
	}
	if j.MinGPUs > 0 {
		r.MinGPUs = j.MinGPUs
	}
	return r
}

// optional holds the indices of the optional columns in a header (-1:
// absent).
type optional struct{ lw, min, max, det, speeds int }

func optionalColumns(head []string) optional {
	return optional{slices.Index(head, "logical_workers"), slices.Index(head, "min_gpus"),
		slices.Index(head, "max_gpus"), slices.Index(head, "determinism"), slices.Index(head, "speeds")}
}

// read fills j's optional fields from rec and checks them against j.GPUs.
func (o optional) read(j *Job, rec, head []string, line int) error {
	cell := func(i int) string {
		if i < 0 || i >= len(rec) {
			return ""
		}
		return strings.TrimSpace(rec[i])
	}
	for _, f := range []struct {
		col int
		dst *int
	}{{o.lw, &j.LogicalWorkers}, {o.min, &j.MinGPUs}, {o.max, &j.MaxGPUs}} {
		if v := cell(f.col); v != "" {
			n, err := gpus(v)
			if err == nil && n == 0 {
				err = errors.New("0: leave the cell empty for the default")
			}
			if err != nil {
				return &ParseError{Line: line, Column: f.col + 1, Field: head[f.col], Err: err}
			}
			*f.dst = n
		}
	}
	bad := func(col int, format string, a ...any) error {
		return &ParseError{Line: line, Column: col + 1, Field: head[col], Err: fmt.Errorf(format, a...)}
	}
	switch {
	case j.LogicalWorkers > 0 && j.LogicalWorkers < j.GPUs:
		return bad(o.lw, "%d logical workers for %d GPUs: every GPU needs one", j.LogicalWorkers, j.GPUs)
	case j.MinGPUs > j.GPUs:
		return bad(o.min, "min_gpus %d above num_gpus %d", j.MinGPUs, j.GPUs)
	case j.MaxGPUs > 0 && j.MaxGPUs < j.GPUs:
		return bad(o.max, "max_gpus %d below num_gpus %d", j.MaxGPUs, j.GPUs)
	case j.MaxGPUs > 0 && j.LogicalWorkers > 0 && j.MaxGPUs > j.LogicalWorkers:
		return bad(o.max, "max_gpus %d above logical_workers %d: every GPU needs a logical worker", j.MaxGPUs, j.LogicalWorkers)
	}
	switch d := cell(o.det); d {
	case "", "d1", "d2":
		j.Determinism = d
	default:
		return bad(o.det, "%q: use d1 or d2", d)
	}
	sp, err := elastic.ParseSpeeds(cell(o.speeds))
	if err != nil {
		return bad(o.speeds, "%w", err)
	}
	j.Speeds = sp
	return nil
}

// ParseError is a malformed table cell or row.
type ParseError struct {
	// Line is the 1-based line of the row; Column the 1-based column (0 for
	// a whole-row problem).
	Line, Column int
	// Field names the column, when known.
	Field string
	// Err is the underlying problem.
	Err error
}

// Error implements error.
func (e *ParseError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("line %d, column %d (%s): %v", e.Line, e.Column, e.Field, e.Err)
	}
	if e.Column == 0 {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// ErrUnknownLayout is returned by [Read] for a header it does not recognise.
var ErrUnknownLayout = errors.New("unknown trace layout")

// ErrDuplicateID is wrapped by the [*ParseError] that [Read] returns for a
// row whose job id (common layout: job_id; Pollux: name) an earlier row
// already used. Ids must be unique: the simulator and the planner find jobs
// by id, so a repeated id would silently merge two jobs.
var ErrDuplicateID = errors.New("duplicate job id")

// ids remembers the line of every job id read so far.
type ids map[string]int

// add records id at line, or returns the *ParseError for a repeat (column
// 1, field name).
func (seen ids) add(id string, line int, field string) error {
	if first, dup := seen[id]; dup {
		return &ParseError{Line: line, Column: 1, Field: field,
			Err: fmt.Errorf("job id %q is already used on line %d: %w", id, first, ErrDuplicateID)}
	}
	seen[id] = line
	return nil
}

// commonColumns are the first seven columns of every job table.
var commonColumns = []string{"job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "status", "is_training"}

var polluxColumns = []string{"name", "time", "application", "num_replicas", "batch_size"}

// ReadFile opens path and reads it with [Read].
func ReadFile(path string) ([]Job, error) {
	jobs, _, err := ReadFileReport(path)
	return jobs, err
}

// ReadFileReport opens path and reads it with [ReadReport].
func ReadFileReport(path string) ([]Job, Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Report{}, fmt.Errorf("trace: opening %s: %w", path, err)
	}
	defer f.Close()
	jobs, rep, err := ReadReport(f)
	if err != nil {
		return nil, Report{}, fmt.Errorf("trace: reading %s: %w", path, err)
	}
	return jobs, rep, nil
}

// Report is what [ReadReport] found in a table besides its jobs, for a
// tool to tell its user.
type Report struct {
	// Skipped is the rows of the common layout left out for an empty
	// duration_s (jobs that never ran).
	Skipped int
	// Misspelt maps each header column that no layout reads but that looks
	// like one of [OptionalColumns] (another case, '-' or ' ' for '_', or
	// up to two letters off) to that column: a source's own extra columns
	// are allowed and ignored, so such a column's cells are ignored too.
	// nil when none.
	Misspelt map[string]string
}

// Read parses a job table in either layout, chosen by its header, and
// returns its jobs in file order. Rows of the common layout with an empty
// duration_s (jobs that never ran) are skipped. Job ids must be unique,
// skipped rows included. Errors are *ParseError: a malformed cell, a
// negative count, a repeated job id (wrapping ErrDuplicateID) or an
// unknown header (wrapping ErrUnknownLayout).
func Read(r io.Reader) ([]Job, error) {
	jobs, _, err := ReadReport(r)
	return jobs, err
}

// ReadReport is [Read] that also reports the rows it skipped and the
// header columns that look like misspelt optional columns ([Report]).
func ReadReport(r io.Reader) ([]Job, Report, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1 // rowWidth checks each row against the header, naming both counts
	head, err := cr.Read()
	if err != nil {
		return nil, Report{}, csvError(err, "reading header")
	}
	head = slices.Clone(head)
	if len(head) > 0 {
		head[0] = strings.TrimPrefix(head[0], "\ufeff")
	}
	rep := Report{Misspelt: misspelt(head)}
	var jobs []Job
	switch {
	case hasPrefix(head, commonColumns):
		jobs, err = readCommon(cr, head, &rep.Skipped)
	case hasPrefix(head, polluxColumns):
		jobs, err = readPollux(cr, head)
	default:
		return nil, Report{}, &ParseError{Line: 1, Err: fmt.Errorf("header %q: %w (want %s,... or %s)", strings.Join(head, ","),
			ErrUnknownLayout, strings.Join(commonColumns, ","), strings.Join(polluxColumns, ","))}
	}
	if err != nil {
		return nil, Report{}, err
	}
	return jobs, rep, nil
}

// misspelt returns Report.Misspelt for header head.
func misspelt(head []string) map[string]string {
	var out map[string]string
	for _, h := range head {
		if slices.Contains(commonColumns, h) || slices.Contains(polluxColumns, h) || slices.Contains(OptionalColumns, h) || h == "vc" || h == "cluster" {
			continue
		}
		norm := strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(strings.TrimSpace(h)))
		best, dist := "", 3 // the nearest optional column within two edits
		for _, o := range OptionalColumns {
			if d := spelling.Distance(norm, o); d < dist {
				best, dist = o, d
			}
		}
		if best != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[h] = best
		}
	}
	return out
}

// rowWidth returns the whole-row *ParseError (column 0) for a row whose
// field count differs from the header's, wrapping csv.ErrFieldCount; the
// message gives both counts and the header, so a short row's missing cells
// can be found.
func rowWidth(rec, head []string, line int) error {
	if len(rec) == len(head) {
		return nil
	}
	fix := "give every column on every row, an empty cell for an optional column's default"
	if len(rec) > len(head) {
		fix = "quote a cell that holds a comma (\"v100:2,t4:1\"), and give no more columns than the header"
	}
	return &ParseError{Line: line, Err: fmt.Errorf("%d fields, but the header has %d (%s): %s: %w",
		len(rec), len(head), strings.Join(head, ","), fix, csv.ErrFieldCount)}
}

func hasPrefix(head, want []string) bool {
	return len(head) >= len(want) && slices.Equal(head[:len(want)], want)
}

func csvError(err error, doing string) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{Line: pe.Line, Column: pe.Column, Err: fmt.Errorf("%s: %w", doing, pe.Err)}
	}
	if err == io.EOF {
		return &ParseError{Line: 1, Err: fmt.Errorf("%s: empty file: %w", doing, io.ErrUnexpectedEOF)}
	}
	return fmt.Errorf("trace: %s: %w", doing, err)
}

// eachRow reads cr's rows to the end: for each, it checks the row's width
// against head and that its job id (column 1, named head[0]) is not used
// before, then calls row with the row, its line number and the job it
// makes (ID set), which row fills from the layout's columns. It returns
// the jobs row keeps (keep true), each with the optional columns read.
// Errors are row's, or a [*ParseError] naming the line.
func eachRow(cr *csv.Reader, head []string, row func(rec []string, line int, j *Job) (keep bool, err error)) ([]Job, error) {
	opt := optionalColumns(head)
	var jobs []Job
	seen := ids{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return jobs, nil
		}
		if err != nil {
			return nil, csvError(err, "reading row")
		}
		line, _ := cr.FieldPos(0)
		if err := rowWidth(rec, head, line); err != nil {
			return nil, err
		}
		if err := seen.add(rec[0], line, head[0]); err != nil {
			return nil, err
		}
		j := Job{ID: rec[0]}
		keep, err := row(rec, line, &j)
		if err != nil {
			return nil, err
		}
		if !keep {
			continue
		}
		if err := opt.read(&j, rec, head, line); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
}

// readCommon reads the rows of the common layout, counting in skipped
// those with an empty duration_s.
func readCommon(cr *csv.Reader, head []string, skipped *int) ([]Job, error) {
	user, cluster := slices.Index(head, "vc"), slices.Index(head, "cluster")
	return eachRow(cr, head, func(rec []string, line int, j *Job) (bool, error) {
		if rec[2] == "" {
			*skipped++
			return false, nil
		}
		j.GPUType, j.Training = rec[4], rec[6] != "0"
		var err error
		if j.Submit, err = seconds(rec[1]); err != nil {
			return false, &ParseError{Line: line, Column: 2, Field: head[1], Err: err}
		}
		if j.Duration, err = seconds(rec[2]); err != nil {
			return false, &ParseError{Line: line, Column: 3, Field: head[2], Err: err}
		}
		j.Duration = max(j.Duration, 1)
		if j.GPUs, err = gpus(rec[3]); err != nil {
			return false, &ParseError{Line: line, Column: 4, Field: head[3], Err: err}
		}
		if rec[6] != "0" && rec[6] != "1" && rec[6] != "" {
			return false, &ParseError{Line: line, Column: 7, Field: head[6], Err: fmt.Errorf("%q is not 0 or 1", rec[6])}
		}
		if user >= 0 && user < len(rec) {
			j.User = rec[user]
		}
		if cluster >= 0 && cluster < len(rec) {
			j.Cluster = rec[cluster]
		}
		return true, nil
	})
}

// PolluxGPUHours is the documented rule that gives a Pollux workload job a
// runtime: the job's total GPU-time at its requested size, by application.
// Pollux built its workloads by mapping each sampled Philly job's GPU-time
// bucket (<1, 1–10, 10–100, 100–1000 GPU-hours) to a model; we take the
// geometric middle of the bucket we assign each application (ncf <1;
// cifar10, deepspeech2 and bert 1–10; yolov3 10–100; imagenet 100–1000).
// The assignment is ours, not measured; Duration = GPU-hours·3600 /
// num_replicas.
var PolluxGPUHours = map[string]float64{
	"ncf": 0.5, "cifar10": 3.2, "deepspeech2": 3.2, "bert": 3.2, "yolov3": 32, "imagenet": 316,
}

// readPollux reads the rows of the Pollux layout (name, time,
// application, num_replicas, batch_size): every job trains, and its run
// time comes from PolluxGPUHours.
func readPollux(cr *csv.Reader, head []string) ([]Job, error) {
	return eachRow(cr, head, func(rec []string, line int, j *Job) (bool, error) {
		j.Training = true
		var err error
		if j.Submit, err = seconds(rec[1]); err != nil {
			return false, &ParseError{Line: line, Column: 2, Field: "time", Err: err}
		}
		hours, ok := PolluxGPUHours[rec[2]]
		if !ok {
			return false, &ParseError{Line: line, Column: 3, Field: "application", Err: fmt.Errorf("unknown application %q", rec[2])}
		}
		if j.GPUs, err = gpus(rec[3]); err != nil {
			return false, &ParseError{Line: line, Column: 4, Field: "num_replicas", Err: err}
		}
		if j.GPUs == 0 {
			return false, &ParseError{Line: line, Column: 4, Field: "num_replicas", Err: errors.New("0 replicas")}
		}
		if err := batchSize(rec[4]); err != nil {
			return false, &ParseError{Line: line, Column: 5, Field: "batch_size", Err: err}
		}
		j.Duration = int64(math.Round(hours * 3600 / float64(j.GPUs)))
		return true, nil
	})
}

func seconds(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not whole seconds: %w", s, err)
	}
	if v < 0 || v > 1<<40 {
		return 0, fmt.Errorf("%d seconds is outside [0, 2^40]", v)
	}
	return v, nil
}

// batchSize checks a Pollux batch_size cell: a positive whole number of
// samples. The simulator does not use it, but a negative or zero batch is
// a corrupt row.
func batchSize(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole batch size: %w", s, err)
	}
	if v < 1 {
		return fmt.Errorf("batch size %d is not positive", v)
	}
	return nil
}

func gpus(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a GPU count: %w", s, err)
	}
	if v < 0 || v > 1<<20 {
		return 0, fmt.Errorf("%d GPUs is outside [0, 2^20]", v)
	}
	return v, nil
}

// Write writes jobs in the common job-table layout (seven columns, then
// vc holding User, then the OptionalColumns, then cluster when a job has
// one), which [Read] reads back to the same jobs.
func Write(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	clusters := slices.ContainsFunc(jobs, func(j Job) bool { return j.Cluster != "" })
	head := append(append(slices.Clone(commonColumns), "vc"), OptionalColumns...)
	if clusters {
		head = append(head, "cluster")
	}
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("trace: writing header: %w", err)
	}
	for _, j := range jobs {
		tr := "1"
		if !j.Training {
			tr = "0"
		}
		count := func(n int) string {
			if n == 0 {
				return ""
			}
			return strconv.Itoa(n)
		}
		rec := []string{j.ID, strconv.FormatInt(j.Submit, 10), strconv.FormatInt(j.Duration, 10), strconv.Itoa(j.GPUs), j.GPUType, "", tr, j.User,
			count(j.LogicalWorkers), count(j.MinGPUs), count(j.MaxGPUs), j.Determinism, elastic.FormatSpeeds(j.Speeds)}
		if clusters {
			rec = append(rec, j.Cluster)
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("trace: writing job %q: %w", j.ID, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("trace: flushing: %w", err)
	}
	return nil
}
