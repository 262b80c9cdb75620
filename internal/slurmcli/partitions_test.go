package slurmcli

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParsePartitions(t *testing.T) {
	type P = Partition
	tests := []struct {
		name, out string
		want      map[string]Partition
	}{
		{"the lab's configuration", "normal|1-12:00:00|10\nlow|10:00|1\n",
			map[string]P{"normal": {36 * time.Hour, 10}, "low": {10 * time.Minute, 1}}},
		{"infinite and UNLIMITED are no cap", "a|infinite|1\nb|UNLIMITED|0\n", map[string]P{"a": {0, 1}, "b": {0, 0}}},
		{"one partition on several lines that agree", "a|12:00:00|3\na|12:00:00|3\n", map[string]P{"a": {12 * time.Hour, 3}}},
		{"lines whose limits disagree leave it out", "a|12:00:00|1\na|10:00|1\nb|5|1\n", map[string]P{"b": {5 * time.Minute, 1}}},
		{"lines whose tiers disagree leave it out", "a|10|1\na|10|2\n", map[string]P{}},
		{"an unreadable limit leaves it out, also on a later good line", "a|soon|1\na|10|1\nb|n/a|1\n", map[string]P{}},
		{"NOT_SET or empty is not read as no cap", "a|NOT_SET|1\nb||1\n", map[string]P{}},
		{"an unreadable tier leaves it out", "a|10|high\nb|10|-1\nc|10|4294967296\nd|10|\ne|10|65533\n",
			map[string]P{"e": {10 * time.Minute, 65533}}},
		{"the format before the tier (two fields) is not read", "a|10\nb|10|1|extra\n", map[string]P{}},
		{"a bad name is skipped", "a b|10|1\n*|10|1\nc|10|1\n", map[string]P{"c": {10 * time.Minute, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParsePartitions([]byte(tc.out)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParsePartitions(%q) = %v, want %v", tc.out, got, tc.want)
			}
		})
	}
}

func TestSplitPartitions(t *testing.T) {
	for in, want := range map[string][]string{
		"normal": {"normal"}, "normal,low": {"normal", "low"}, "normal,": {"normal"}, ",normal": {"normal"}, "a,,b": {"a", "b"}, "": nil,
		"dn,dn": {"dn"}, "a,b,a": {"a", "b"},
	} {
		if got := SplitPartitions(in); !reflect.DeepEqual(got, want) {
			t.Errorf("SplitPartitions(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParsePartitions: no panic; every entry has a partition name and a
// limit in [0, MaxTimeLimit], and appears in the output.
func FuzzParsePartitions(f *testing.F) {
	addRecordings(f, "partitions*.txt")
	f.Add([]byte("a|infinite|1\na|10|1\n|5|2\nb|1-00:00:00|7\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, p := range ParsePartitions(data) {
			if !isPartitionName(name) || p.MaxTime < 0 || p.MaxTime > MaxTimeLimit || !strings.Contains(string(data), name+"|") {
				t.Fatalf("bad entry %q = %+v from %q", name, p, data)
			}
		}
	})
}
