package slurmcli

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

var slurmdTimeoutLine = regexp.MustCompile(`(?m)^SlurmdTimeout\s*=\s*(\d+) sec`)

// ParseSlurmdTimeout reads SlurmdTimeout from `scontrol show config`
// output: how long slurmctld waits for a silent node before it sets it
// DOWN (slurm.conf(5)). It returns an error when the output has no such
// line or its value is not a positive number of seconds.
func ParseSlurmdTimeout(out []byte) (time.Duration, error) {
	m := slurmdTimeoutLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("scontrol show config: no SlurmdTimeout line")
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("scontrol show config: SlurmdTimeout %q is not a positive number of seconds", m[1])
	}
	return time.Duration(n) * time.Second, nil
}
