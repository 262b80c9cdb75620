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

// BackfillInterval runs `scontrol show config` and returns its
// bf_interval (ParseBackfillInterval).
func (r Runner) BackfillInterval(ctx context.Context) (time.Duration, error) {
	out, err := r.Output(ctx, "scontrol", "show", "config")
	if err != nil {
		return 0, fmt.Errorf("reading Slurm's configuration: %w", err)
	}
	return ParseBackfillInterval(out)
}
