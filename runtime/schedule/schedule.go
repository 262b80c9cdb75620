// Package schedule parses and queries allocation schedules: which physical
// workers (and at what relative speeds) run a job from which step on.
//
// A schedule is written as the --workers flag takes it:
//
//	8                      eight equal workers for the whole run
//	0:1,20:3,35:8,50:2     from step 0 one worker, from step 20 three, ...
//	0:3@3.1/2.4/1          three workers with relative speeds 3.1, 2.4 and 1
//
// Steps count completed optimizer steps: "20:3" means step 20 (the 21st,
// zero-based) and later run on three workers. The first entry must start at
// step 0, entries must be in increasing step order, and every worker count
// must lie in [1, logical workers] (checked by Validate).
package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// Allocation is the set of physical workers that runs one stretch of steps.
type Allocation struct {
	// FromStep is the first step (zero-based) this allocation runs.
	FromStep int64
	// Workers is the number of physical workers (world size), >= 1.
	Workers int
	// Speeds holds one relative speed per worker (arbitrary positive units;
	// only ratios matter), or nil when all workers are equally fast.
	Speeds []float64
}

// Schedule is a list of allocations sorted by FromStep, the first at step 0.
type Schedule []Allocation

// ParseError reports a malformed schedule string; Entry is the 1-based
// comma-separated entry at fault (0 when the whole string is at fault).
type ParseError struct {
	Input string
	Entry int
	Msg   string
}

func (e *ParseError) Error() string {
	if e.Entry == 0 {
		return fmt.Sprintf("--workers %q: %s", e.Input, e.Msg)
	}
	return fmt.Sprintf("--workers %q: entry %d: %s", e.Input, e.Entry, e.Msg)
}

// maxWorkers bounds a worker count so a typo cannot ask for millions of
// goroutines; no job has more logical workers than this either.
const maxWorkers = 1 << 16

// Parse reads a schedule string (see the package comment). It returns a
// *ParseError naming the entry and the fix for empty input, bad numbers,
// steps out of order, zero or negative workers, or a speed list whose length
// differs from the worker count.
func Parse(s string) (Schedule, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return nil, &ParseError{Input: s, Msg: "empty schedule; write a worker count like 4 or steps like 0:1,20:4"}
	}
	if !strings.ContainsAny(in, ":,@") {
		n, err := parseWorkers(in)
		if err != nil {
			return nil, &ParseError{Input: s, Msg: err.Error()}
		}
		return Schedule{{FromStep: 0, Workers: n}}, nil
	}
	var out Schedule
	for i, entry := range strings.Split(in, ",") {
		a, err := parseEntry(strings.TrimSpace(entry))
		if err != nil {
			return nil, &ParseError{Input: s, Entry: i + 1, Msg: err.Error()}
		}
		if i == 0 && a.FromStep != 0 {
			return nil, &ParseError{Input: s, Entry: 1, Msg: "the first entry must start at step 0 (write 0:N first)"}
		}
		if i > 0 && a.FromStep <= out[i-1].FromStep {
			return nil, &ParseError{Input: s, Entry: i + 1, Msg: fmt.Sprintf("step %d does not come after step %d; list entries in increasing step order", a.FromStep, out[i-1].FromStep)}
		}
		out = append(out, a)
	}
	return out, nil
}

func parseEntry(e string) (Allocation, error) {
	stepStr, rest, ok := strings.Cut(e, ":")
	if !ok {
		return Allocation{}, fmt.Errorf("%q lacks STEP:WORKERS (e.g. 20:4)", e)
	}
	step, err := strconv.ParseInt(strings.TrimSpace(stepStr), 10, 64)
	if err != nil || step < 0 {
		return Allocation{}, fmt.Errorf("step %q is not a non-negative integer", stepStr)
	}
	workersStr, speedStr, hasSpeeds := strings.Cut(rest, "@")
	n, err := parseWorkers(strings.TrimSpace(workersStr))
	if err != nil {
		return Allocation{}, err
	}
	a := Allocation{FromStep: step, Workers: n}
	if hasSpeeds {
		parts := strings.Split(speedStr, "/")
		if len(parts) != n {
			return Allocation{}, fmt.Errorf("%d speeds given for %d workers; give one speed per worker separated by /", len(parts), n)
		}
		for _, p := range parts {
			v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || !(v > 0) || v > 1e9 {
				return Allocation{}, fmt.Errorf("speed %q is not a positive number", p)
			}
			a.Speeds = append(a.Speeds, v)
		}
	}
	return a, nil
}

func parseWorkers(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("worker count %q is not an integer", s)
	}
	if n < 1 {
		return 0, fmt.Errorf("worker count %d must be at least 1", n)
	}
	if n > maxWorkers {
		return 0, fmt.Errorf("worker count %d exceeds the limit %d", n, maxWorkers)
	}
	return n, nil
}

// Validate checks the schedule against a job's logical worker count: a
// physical worker without a logical worker would idle, so every allocation
// must have at most logicalWorkers workers.
func (s Schedule) Validate(logicalWorkers int) error {
	if len(s) == 0 {
		return fmt.Errorf("--workers: empty schedule")
	}
	for _, a := range s {
		if a.Workers > logicalWorkers {
			return fmt.Errorf("--workers: %d physical workers from step %d exceed the job's %d logical workers; use at most %d",
				a.Workers, a.FromStep, logicalWorkers, logicalWorkers)
		}
	}
	return nil
}

// Next returns the first allocation that takes effect after step (FromStep
// > step) and true, or false when none does.
func (s Schedule) Next(step int64) (Allocation, bool) {
	for _, a := range s {
		if a.FromStep > step {
			return a, true
		}
	}
	return Allocation{}, false
}

// At returns the allocation in force at step (the last entry whose FromStep
// is <= step). The schedule must be non-empty and start at step 0.
func (s Schedule) At(step int64) Allocation {
	cur := s[0]
	for _, a := range s[1:] {
		if a.FromStep > step {
			break
		}
		cur = a
	}
	return cur
}

// String formats the schedule in the syntax Parse reads.
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, a := range s {
		parts[i] = fmt.Sprintf("%d:%s", a.FromStep, a.Label())
	}
	return strings.Join(parts, ",")
}

// Label formats one allocation as WORKERS[@S1/S2/...].
func (a Allocation) Label() string {
	if a.Speeds == nil {
		return strconv.Itoa(a.Workers)
	}
	sp := make([]string, len(a.Speeds))
	for i, v := range a.Speeds {
		sp[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprintf("%d@%s", a.Workers, strings.Join(sp, "/"))
}
