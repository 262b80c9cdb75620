package slurmcli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PartitionFormat is the sinfo -o format ParsePartitions reads: the
// partition's name without the default's "*" (%R), its MaxTime (%l) and
// its PriorityTier (%p). Partition names, time limits and tiers are set by
// the administrator and cannot contain '|'.
const PartitionFormat = "%R|%l|%p"

// Partition is what the daemon reads of one partition's configuration
// (slurm.conf's PartitionName lines, https://slurm.schedmd.com/slurm.conf.html).
type Partition struct {
	// MaxTime is the longest time limit a job may have in it; 0 for
	// UNLIMITED/infinite (no cap).
	MaxTime time.Duration `json:"max_time"`
	// PriorityTier orders jobs across partitions: Slurm's schedulers
	// evaluate the pending jobs of a partition with a higher tier before
	// any job of a lower one, whatever their priorities, and only then by
	// priority.
	PriorityTier uint32 `json:"priority_tier"`
}

// Partitions runs `sinfo --all --noheader -o PartitionFormat` and returns
// every partition by name, hidden ones included (--all). A line that does
// not read is left out (see ParsePartitions): a caller must treat a
// partition without an entry as one whose MaxTime and tier it does not
// know.
func (r Runner) Partitions(ctx context.Context) (map[string]Partition, error) {
	out, err := r.Output(ctx, "sinfo", "--all", "--noheader", "-o", PartitionFormat)
	if err != nil {
		return nil, fmt.Errorf("reading the partitions' MaxTime and PriorityTier: %w", err)
	}
	return ParsePartitions(out), nil
}

// ParsePartitions reads sinfo -o PartitionFormat output: one line per
// partition and node state, "NAME|MAXTIME|TIER", MAXTIME as
// [ParseTimeLimit] reads it or "infinite"/"UNLIMITED" for none (0), TIER a
// decimal number below 2^32 (Slurm keeps it in 16 bits). sinfo prints a
// partition once per group of nodes: lines of one name that disagree, a
// name that is not a Slurm name, or a field that does not read leave the
// partition out.
func ParsePartitions(out []byte) map[string]Partition {
	ps := map[string]Partition{}
	bad := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 3 || !isPartitionName(f[0]) {
			continue
		}
		name := f[0]
		p, err := parsePartition(f[1], f[2])
		if err != nil {
			bad[name] = true
			continue
		}
		if old, seen := ps[name]; seen && old != p {
			bad[name] = true
		}
		ps[name] = p
	}
	for name := range bad {
		delete(ps, name)
	}
	return ps
}

// parsePartition reads one line's MaxTime and PriorityTier fields.
func parsePartition(limit, tier string) (Partition, error) {
	d, err := ParseTimeLimit(strings.ToUpper(limit))
	switch {
	case errors.Is(err, ErrNoTimeLimit) && limit != "" && limit != "NOT_SET":
		d = 0
	case err != nil:
		return Partition{}, err
	}
	t, err := strconv.ParseUint(tier, 10, 32)
	if err != nil {
		return Partition{}, fmt.Errorf("PriorityTier %q: %w", tier, err)
	}
	return Partition{MaxTime: d, PriorityTier: uint32(t)}, nil
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

// SplitPartitions returns the partitions of a job as squeue prints them
// for a job queued in several ("normal,low"), each once, with empty names
// dropped: sbatch accepts -p 'normal,', ',normal' and 'dn,dn', and squeue
// prints them so (seen on 22.05 by testers), though Slurm queues the job
// in normal (dn) alone.
func SplitPartitions(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
