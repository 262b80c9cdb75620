package slurmcli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PartitionFormat is the sinfo -o format ParsePartitionMaxTimes reads:
// the partition's name without the default's "*" (%R) and its MaxTime
// (%l). Partition names and time limits are set by the administrator and
// cannot contain '|'.
const PartitionFormat = "%R|%l"

// PartitionMaxTimes runs `sinfo --noheader -o PartitionFormat` and returns
// each partition's MaxTime by name (0: UNLIMITED/infinite, no cap). A line
// that does not read is left out (see ParsePartitionMaxTimes): a caller
// must treat a partition without an entry as one whose MaxTime it does not
// know.
func (r Runner) PartitionMaxTimes(ctx context.Context) (map[string]time.Duration, error) {
	out, err := r.Output(ctx, "sinfo", "--noheader", "-o", PartitionFormat)
	if err != nil {
		return nil, fmt.Errorf("reading the partitions' MaxTime: %w", err)
	}
	return ParsePartitionMaxTimes(out), nil
}

// ParsePartitionMaxTimes reads sinfo -o PartitionFormat output: one line
// per partition and node state, "NAME|MAXTIME", MAXTIME as [ParseTimeLimit]
// reads it or "infinite"/"UNLIMITED" for none (0 in the map). sinfo prints
// a partition once per group of nodes: lines of one name that disagree, a
// name that is not a Slurm name, or a MaxTime that does not read leave the
// partition out.
func ParsePartitionMaxTimes(out []byte) map[string]time.Duration {
	ts := map[string]time.Duration{}
	bad := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, limit, ok := strings.Cut(line, "|")
		if !ok || !isPartitionName(name) {
			continue
		}
		d, err := ParseTimeLimit(strings.ToUpper(limit))
		switch {
		case errors.Is(err, ErrNoTimeLimit) && limit != "" && limit != "NOT_SET":
			d = 0
		case err != nil:
			bad[name] = true
			continue
		}
		if old, seen := ts[name]; seen && old != d {
			bad[name] = true
		}
		ts[name] = d
	}
	for name := range bad {
		delete(ts, name)
	}
	return ts
}

// isPartitionName reports whether s is a non-empty name of letters,
// digits, '-', '_' and '.'.
func isPartitionName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
