package slurmcli

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultBackfillInterval is Slurm's bf_interval when SchedulerParameters
// does not set it (slurm.conf(5): "Default: 30, Min: 1, Max: 10800").
const DefaultBackfillInterval = 30 * time.Second

var schedulerParametersLine = regexp.MustCompile(`(?m)^SchedulerParameters\s*=\s*(.*)$`)

// ParseBackfillInterval reads bf_interval from `scontrol show config`
// output's SchedulerParameters line: how often Slurm's backfill scheduler
// runs, and so how long a job that waits its turn (Reason Priority) may
// wait for GPUs freed for it. No bf_interval option, or "(null)"
// parameters, is DefaultBackfillInterval. It returns an error when the
// output has no SchedulerParameters line or bf_interval is not 1 to 10800
// seconds.
func ParseBackfillInterval(out []byte) (time.Duration, error) {
	m := schedulerParametersLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("scontrol show config: no SchedulerParameters line")
	}
	for _, opt := range strings.Split(strings.TrimSpace(string(m[1])), ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(opt), "bf_interval=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10800 {
			return 0, fmt.Errorf("scontrol show config: SchedulerParameters bf_interval=%q is not 1 to 10800 seconds", v)
		}
		return time.Duration(n) * time.Second, nil
	}
	return DefaultBackfillInterval, nil
}

// SchedulerConfig is what the backfill daemon reads of `scontrol show
// config`: bf_interval (ParseBackfillInterval) and PreemptType.
type SchedulerConfig struct {
	BackfillInterval time.Duration
	// PreemptType is the PreemptType line's value as printed
	// ("preempt/partition_prio", "preempt/none"), "" when there is none.
	PreemptType string
}

var preemptTypeLine = regexp.MustCompile(`(?m)^PreemptType\s*=\s*(\S*)\s*$`)

// ParseSchedulerConfig reads a SchedulerConfig from `scontrol show config`
// output; its errors are ParseBackfillInterval's.
func ParseSchedulerConfig(out []byte) (SchedulerConfig, error) {
	bf, err := ParseBackfillInterval(out)
	if err != nil {
		return SchedulerConfig{}, err
	}
	c := SchedulerConfig{BackfillInterval: bf}
	if m := preemptTypeLine.FindSubmatch(out); m != nil {
		c.PreemptType = string(m[1])
	}
	return c, nil
}

// PartitionPreemption reports whether Slurm preempts by partition
// PriorityTier (PreemptType=preempt/partition_prio): its scheduler then
// ranks a pending job of a higher tier ahead of one of a lower tier on
// shared nodes before it looks at advance reservations (sort_job_queue2's
// preemption check).
func (c SchedulerConfig) PartitionPreemption() bool {
	return c.PreemptType == "preempt/partition_prio"
}

// SchedulerConfig runs `scontrol show config` and returns what
// ParseSchedulerConfig reads of it.
func (r Runner) SchedulerConfig(ctx context.Context) (SchedulerConfig, error) {
	out, err := r.Output(ctx, "scontrol", "show", "config")
	if err != nil {
		return SchedulerConfig{}, fmt.Errorf("reading Slurm's configuration: %w", err)
	}
	return ParseSchedulerConfig(out)
}
