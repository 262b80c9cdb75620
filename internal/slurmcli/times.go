package slurmcli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrNoTime is wrapped by [ParseTime] for an empty time: squeue prints
// none (or "N/A", which [ParseSqueue] reads as "") for a job without a
// start or end, such as a pending job Slurm's backfill has not planned.
var ErrNoTime = errors.New("no time")

// ParseTime reads a time as squeue prints it (StartTime, EndTime:
// [TimeLayout], "2006-01-02T15:04:05") in loc, the time zone of the squeue
// command (time.Local for live output; Runner sets SLURM_TIME_FORMAT=standard
// so that Slurm prints this layout). Errors: "" wraps [ErrNoTime]; any other
// text that is not in TimeLayout wraps the *time.ParseError.
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("slurm time: %w", ErrNoTime)
	}
	t, err := time.ParseInLocation(TimeLayout, s, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("slurm time %q: %w", s, err)
	}
	return t, nil
}

// MaxTimeLimit bounds the time limits [ParseTimeLimit] returns (366 days):
// Slurm's own limits are far shorter, and a longer one is taken for no
// limit at all.
const MaxTimeLimit = 366 * 24 * time.Hour

// ErrNoTimeLimit is wrapped by [ParseTimeLimit] for a job without a finite
// time limit: "UNLIMITED", "INFINITE", "NOT_SET", "" or a limit above
// [MaxTimeLimit].
var ErrNoTimeLimit = errors.New("no finite time limit")

// ErrTimeLimit is wrapped by [ParseTimeLimit] for text that is not a time
// limit in any form Slurm prints.
var ErrTimeLimit = errors.New("not a Slurm time limit")

// ParseTimeLimit reads a time limit as squeue prints it (TimeLimit, %l) in
// any of the forms of sbatch(1)'s --time: "MM", "MM:SS", "HH:MM:SS",
// "D-HH", "D-HH:MM" or "D-HH:MM:SS" (each part at most 6 digits, days at
// most 9). Errors wrap [ErrNoTimeLimit] for a job without a finite limit
// and [ErrTimeLimit] for anything else; both quote s.
func ParseTimeLimit(s string) (time.Duration, error) {
	switch s {
	case "", "UNLIMITED", "INFINITE", "NOT_SET":
		return 0, fmt.Errorf("time limit %q: %w", s, ErrNoTimeLimit)
	}
	days := 0
	rest := s
	if d, r, found := strings.Cut(s, "-"); found {
		if !Digits(d) {
			return 0, fmt.Errorf("time limit %q: days %q: %w", s, d, ErrTimeLimit)
		}
		days, _ = strconv.Atoi(d)
		rest = r
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, fmt.Errorf("time limit %q: more than three ':' parts: %w", s, ErrTimeLimit)
	}
	vals := make([]int, len(parts))
	for i, p := range parts {
		if !Digits(p) || len(p) > 6 {
			return 0, fmt.Errorf("time limit %q: part %q: %w", s, p, ErrTimeLimit)
		}
		vals[i], _ = strconv.Atoi(p)
	}
	var h, m, sec int
	switch {
	case s != rest && len(vals) == 1: // D-HH
		h = vals[0]
	case s != rest && len(vals) == 2: // D-HH:MM
		h, m = vals[0], vals[1]
	case len(vals) == 1: // MM
		m = vals[0]
	case len(vals) == 2: // MM:SS
		m, sec = vals[0], vals[1]
	default: // [D-]HH:MM:SS
		h, m, sec = vals[0], vals[1], vals[2]
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute +
		time.Duration(sec)*time.Second
	if days > 366 || d > MaxTimeLimit {
		return 0, fmt.Errorf("time limit %q: above %v: %w", s, MaxTimeLimit, ErrNoTimeLimit)
	}
	return d, nil
}
