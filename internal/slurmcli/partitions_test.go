package slurmcli

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParsePartitionMaxTimes(t *testing.T) {
	tests := []struct {
		name, out string
		want      map[string]time.Duration
	}{
		{"the lab's recording", "normal|1-12:00:00\nlow|10:00\n", map[string]time.Duration{"normal": 36 * time.Hour, "low": 10 * time.Minute}},
		{"infinite and UNLIMITED are no cap", "a|infinite\nb|UNLIMITED\n", map[string]time.Duration{"a": 0, "b": 0}},
		{"one partition on several lines that agree", "a|12:00:00\na|12:00:00\n", map[string]time.Duration{"a": 12 * time.Hour}},
		{"lines that disagree leave it out", "a|12:00:00\na|10:00\nb|5\n", map[string]time.Duration{"b": 5 * time.Minute}},
		{"an unreadable limit leaves it out, also on a later good line", "a|soon\na|10\nb|n/a\n", map[string]time.Duration{}},
		{"NOT_SET or empty is not read as no cap", "a|NOT_SET\nb|\n", map[string]time.Duration{}},
		{"a bad name is skipped", "a b|10\n*|10\nc|10\n", map[string]time.Duration{"c": 10 * time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParsePartitionMaxTimes([]byte(tc.out)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParsePartitionMaxTimes(%q) = %v, want %v", tc.out, got, tc.want)
			}
		})
	}
}

// FuzzParsePartitionMaxTimes: no panic; every entry has a partition name
// and a limit in [0, MaxTimeLimit], and appears in the output.
func FuzzParsePartitionMaxTimes(f *testing.F) {
	addRecordings(f, "partitions*.txt")
	f.Add([]byte("a|infinite\na|10\n|5\nb|1-00:00:00\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, d := range ParsePartitionMaxTimes(data) {
			if !isPartitionName(name) || d < 0 || d > MaxTimeLimit || !strings.Contains(string(data), name+"|") {
				t.Fatalf("bad entry %q = %v from %q", name, d, data)
			}
		}
	})
}
