package slurmcli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Separators are the field and record separators of one squeue or sinfo call.
// Slurm prints user-set text (job names, comments, work directories) verbatim,
// 0x1F and newlines included, so no fixed byte can end a field: a separator
// is safe only if no user can know it when setting that text. [NewSeparators]
// draws both from crypto/rand for every call; squeue receives them in its
// environment (SQUEUE_FORMAT2, readable only by the caller), not on its
// command line.
type Separators struct {
	// Field ends every field of a record but the last.
	Field string
	// Record ends the last field of a record; Slurm then prints '\n'.
	Record string
}

// sepRandomBytes is the entropy of each separator: 128 bits.
const sepRandomBytes = 16

// NewSeparators returns a fresh pair: "ESF" and "ESR" each followed by 32
// random hex digits (128 bits from crypto/rand; the letters first, because
// Slurm reads digits right after "Field:" as the field width). Errors come
// from crypto/rand.
func NewSeparators() (Separators, error) {
	var b [2 * sepRandomBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Separators{}, fmt.Errorf("drawing random squeue/sinfo separators: %w", err)
	}
	return Separators{Field: "ESF" + hex.EncodeToString(b[:sepRandomBytes]), Record: "ESR" + hex.EncodeToString(b[sepRandomBytes:])}, nil
}

// errBadSeparators is returned for separators that could not delimit a
// --Format list or its output.
var errBadSeparators = errors.New("separators must be non-empty, differ, not contain each other, " +
	"start with a letter and hold no ',', ':' or newline")

func (s Separators) check() error {
	for _, v := range []string{s.Field, s.Record} {
		if v == "" || strings.ContainsAny(v, ",:\n") || !(v[0] >= 'A' && v[0] <= 'Z' || v[0] >= 'a' && v[0] <= 'z') {
			return fmt.Errorf("separators %q/%q: %w", s.Field, s.Record, errBadSeparators)
		}
	}
	if strings.Contains(s.Field, s.Record) || strings.Contains(s.Record, s.Field) {
		return fmt.Errorf("separators %q/%q: %w", s.Field, s.Record, errBadSeparators)
	}
	return nil
}

// format builds a --Format list: every field at unlimited width (":0")
// followed by its separator, e.g. "JobID:0ESF…,Name:0ESF…,Comment:0ESR…".
func (s Separators) format(fields []string) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		end := s.Field
		if i == len(fields)-1 {
			end = s.Record
		}
		parts[i] = f + ":0" + end
	}
	return strings.Join(parts, ",")
}

// delimRecord is one record of delimited output: its values and the 1-based line
// it starts on.
type delimRecord struct {
	line   int
	values []string
}

// splitRecords splits output printed with s.format(fields) into records.
// A record is its values joined by s.Field, then s.Record and '\n'. As no
// user knows s, text inside values (0x1F, newlines, anything) cannot end a
// field or a record early, so a record with the wrong number of fields, or
// trailing text without s.Record, is damaged output (Slurm cut it short, or
// a separator was guessed); it is returned in bad, naming its first value
// (the job id or node name) when there is one, and the other records are
// kept. err is set only when the output is not empty and holds no complete
// record: the command did not print the requested format at all.
func splitRecords(source string, data []byte, fields []string, s Separators) (recs []delimRecord, bad []*ParseError, err error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	term := []byte(s.Record + "\n")
	line := 1
	for len(data) > 0 {
		end := bytes.Index(data, term)
		var chunk string
		if end < 0 {
			chunk, data = string(data), nil
		} else {
			chunk, data = string(data[:end]), data[end+len(term):]
		}
		start := line
		line += strings.Count(chunk, "\n") + 1
		if end < 0 && strings.TrimSpace(chunk) == "" {
			break // a final blank line
		}
		values := strings.Split(chunk, s.Field)
		switch {
		case end < 0 && len(recs) == 0 && len(bad) == 0:
			return nil, nil, &ParseError{Source: source, Line: start, Field: fields[0], Err: ErrNotDelimited}
		case end < 0:
			bad = append(bad, &ParseError{Source: source, Line: start, ID: idOf(values[0]), Field: fields[min(len(values), len(fields))-1], Err: ErrTruncatedRecord})
		case len(values) != len(fields):
			bad = append(bad, &ParseError{Source: source, Line: start, ID: idOf(values[0]), Field: fields[min(len(values), len(fields))-1],
				Err: fmt.Errorf("%w: %d fields, want %d", ErrFieldCount, len(values), len(fields))})
		default:
			recs = append(recs, delimRecord{line: start, values: values})
		}
	}
	return recs, bad, nil
}

// idOf returns v when it looks like a job id or node name Slurm prints
// (letters, digits and "_+-[],.%", at most 64 bytes), else "": a damaged
// record's first value is named in the warning only when it is one.
func idOf(v string) string {
	if v == "" || len(v) > 64 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-[],.%") != "" {
		return ""
	}
	return v
}

// optional maps Slurm's placeholders for an unset value ("(null)", "N/A", "n/a") to "".
func optional(s string) string {
	switch s {
	case "(null)", "N/A", "n/a":
		return ""
	}
	return s
}
