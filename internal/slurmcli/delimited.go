package slurmcli

import (
	"bytes"
	"strings"
)

// sep ends every field requested with --Format: the ASCII unit separator, which Slurm
// prints verbatim and which job names and comments do not normally contain.
const sep = "\x1f"

// formatArg builds a --Format argument: every field at unlimited width (":0") followed
// by the separator, e.g. "JobID:0\x1f,Name:0\x1f".
func formatArg(fields []string) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f + ":0" + sep
	}
	return strings.Join(parts, ",")
}

// splitRecords splits output printed with formatArg(fields) into records of
// len(fields) values. A record is len(fields) values each ending in sep, then '\n'.
// Newlines inside values are kept, so a job name with a newline does not break it.
func splitRecords(source string, data []byte, fields []string) ([][]string, error) {
	var records [][]string
	line := 1
	for len(data) > 0 {
		if data[0] == '\n' { // blank line
			data = data[1:]
			line++
			continue
		}
		rec := make([]string, len(fields))
		startLine := line
		for i := range fields {
			end := bytes.IndexByte(data, sep[0])
			if end < 0 {
				return nil, &ParseError{Source: source, Line: startLine, Field: fields[i], Err: ErrTruncatedRecord}
			}
			rec[i] = string(data[:end])
			line += strings.Count(rec[i], "\n")
			data = data[end+1:]
		}
		switch {
		case len(data) == 0:
		case data[0] == '\n':
			data = data[1:]
			line++
		default:
			return nil, &ParseError{Source: source, Line: startLine, Field: fields[len(fields)-1], Err: ErrSeparatorInField}
		}
		records = append(records, rec)
	}
	return records, nil
}

// optional maps Slurm's placeholders for an unset value ("(null)", "N/A", "n/a") to "".
func optional(s string) string {
	switch s {
	case "(null)", "N/A", "n/a":
		return ""
	}
	return s
}
