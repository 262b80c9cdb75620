package slurmcli

import (
	"errors"
	"fmt"
)

// ErrSeparatorInField reports a record with more fields than requested: some field
// contained the 0x1F separator itself.
var ErrSeparatorInField = errors.New("field contains the 0x1F separator or the record has extra fields")

// ErrTruncatedRecord reports a record that ended before all requested fields were read.
var ErrTruncatedRecord = errors.New("record ends before all fields were read")

// ParseError is the error every parser in this package returns for bad input, like
// encoding/csv.ParseError. Source names the command whose output was parsed ("squeue",
// "sinfo", "scontrol show job", "gres"), Line is 1-based (0 when the input has no
// lines, such as a single GRES string), Field names the field (a --Format name or a
// scontrol key).
type ParseError struct {
	Source string
	Line   int
	Field  string
	Err    error
}

// Error formats the error as "SOURCE: line N, field F: ERR".
func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: field %s: %v", e.Source, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: line %d, field %s: %v", e.Source, e.Line, e.Field, e.Err)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }
