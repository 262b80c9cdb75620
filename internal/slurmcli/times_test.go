package slurmcli

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"
)

func TestParseTimeLimitReadsSqueuesForms(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  error // nil, ErrNoTimeLimit or ErrTimeLimit
	}{
		{"30", 30 * time.Minute, nil},
		{"30:00", 30 * time.Minute, nil},
		{"1:00:00", time.Hour, nil},
		{"1-00:00:00", 24 * time.Hour, nil},
		{"2-03", 51 * time.Hour, nil},
		{"2-03:04", 51*time.Hour + 4*time.Minute, nil},
		{"UNLIMITED", 0, ErrNoTimeLimit},
		{"INFINITE", 0, ErrNoTimeLimit},
		{"NOT_SET", 0, ErrNoTimeLimit},
		{"", 0, ErrNoTimeLimit},
		{"9999999", 0, ErrTimeLimit}, // a part of more than 6 digits
		{"400-00:00:00", 0, ErrNoTimeLimit},
		{"1:2:3:4", 0, ErrTimeLimit},
		{"-5", 0, ErrTimeLimit},
		{"1--2", 0, ErrTimeLimit},
		{"9999999999", 0, ErrTimeLimit},
	}
	for _, tt := range tests {
		got, err := ParseTimeLimit(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("ParseTimeLimit(%q) = %v, %v; want %v, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzParseTimeLimit(f *testing.F) {
	for _, s := range []string{"30", "30:00", "1:00:00", "1-00:00:00", "UNLIMITED", "2-03:04"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTimeLimit(s)
		if err != nil {
			if !errors.Is(err, ErrNoTimeLimit) && !errors.Is(err, ErrTimeLimit) {
				t.Fatalf("ParseTimeLimit(%q): %v wraps neither ErrNoTimeLimit nor ErrTimeLimit", s, err)
			}
			return
		}
		if d < 0 || d > MaxTimeLimit {
			t.Fatalf("ParseTimeLimit(%q) = %v: out of range", s, d)
		}
		// Whole minutes rounded up, as scontrol update TimeLimit= takes
		// them, read back as at least the limit.
		mins := int64(math.Ceil(d.Minutes()))
		back, err := ParseTimeLimit(strconv.FormatInt(mins, 10))
		if err != nil || back < d {
			t.Fatalf("%q = %v; %d minutes read back as %v, %v", s, d, mins, back, err)
		}
	})
}

func TestParseTimeReadsSqueuesLayoutInTheGivenZone(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	got, err := ParseTime("2026-03-01T12:00:00", berlin)
	if err != nil || !got.Equal(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseTime = %v, %v; want 11:00 UTC", got, err)
	}
	if _, err := ParseTime("", time.UTC); !errors.Is(err, ErrNoTime) {
		t.Errorf("ParseTime(\"\") error %v, want ErrNoTime", err)
	}
	var pe *time.ParseError
	if _, err := ParseTime("Unknown", time.UTC); !errors.As(err, &pe) {
		t.Errorf("ParseTime(\"Unknown\") error %v, want a *time.ParseError", err)
	}
}
