package slurmcli

import (
	"errors"
	"fmt"
)

// ErrFieldCount reports a record of squeue/sinfo output with another number of
// fields than requested: the output was damaged (the random separators of
// [Separators] cannot occur in user-set text).
var ErrFieldCount = errors.New("record has the wrong number of fields")

// ErrTruncatedRecord reports a record that ended before its record separator.
var ErrTruncatedRecord = errors.New("record ends before its record separator")

// ErrNotDelimited reports squeue/sinfo output that holds no record with the
// requested separators at all: the command did not print the requested
// --Format (e.g. SQUEUE_FORMAT overrode it, or the Slurm version prints
// --Format differently).
var ErrNotDelimited = errors.New("output does not use the requested --Format separators")

// ParseError is the error every parser in this package returns for bad input, like
// encoding/csv.ParseError. Source names the command whose output was parsed ("squeue",
// "sinfo", "scontrol show job", "gres"), Line is 1-based (0 when the input has no
// lines, such as a single GRES string), ID is the job id or node name of the record
// when it is known ("" otherwise), Field names the field (a --Format name or a
// scontrol key).
type ParseError struct {
	Source string
	Line   int
	ID     string
	Field  string
	Err    error
}

// Error formats the error as "SOURCE: line N, job|node ID, field F: ERR".
func (e *ParseError) Error() string {
	where := fmt.Sprintf("line %d, ", e.Line)
	if e.Line == 0 {
		where = ""
	}
	if e.ID != "" {
		what := "job"
		if e.Source == "sinfo" {
			what = "node"
		}
		where += what + " " + e.ID + ", "
	}
	return fmt.Sprintf("%s: %sfield %s: %v", e.Source, where, e.Field, e.Err)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }
