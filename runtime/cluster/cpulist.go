package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxCPU bounds the CPU numbers a CPU list may name (Linux's CONFIG_NR_CPUS
// is at most 8192).
const maxCPU = 8191

// ParseCPUList parses a CPU list in the kernel's cpuset syntax
// (cpuset(7), "List format"), as `taskset -c` and Slurm's --cpu-bind=map_cpu
// write them: comma-separated CPU numbers and inclusive ranges, e.g.
// "0-3,8,10-11". It returns the CPUs in increasing order without
// duplicates. Errors name the part that is wrong: an empty list or part, a
// number that is not a decimal integer in 0..8191, a range whose end is
// below its start.
func ParseCPUList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("CPU list %q: empty; give CPU numbers and ranges such as 0-3,8", s)
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %q: %w", s, part, err)
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, fmt.Errorf("CPU list %q: %q: %w", s, part, err)
			}
			if b < a {
				return nil, fmt.Errorf("CPU list %q: range %q ends below its start", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxCPU || s[0] == '+' {
		return 0, fmt.Errorf("want a CPU number between 0 and %d", maxCPU)
	}
	return n, nil
}

// FormatCPUList writes cpus (increasing, no duplicates) in the list
// format ParseCPUList reads, runs as ranges: [0 1 2 5] is "0-2,5".
func FormatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
