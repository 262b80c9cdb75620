package slurmcli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Placement is what a pending job asks of the nodes it may run on beyond
// its partition and --nodelist: its --exclude and its --constraint.
// squeue's --Format (the one this package reads with random separators)
// has no field for excluded nodes in Slurm 22.05 (measured on the lab:
// "Invalid job format specification" for every spelling), so they are read
// with the old -o format, whose fields here cannot carry user text.
type Placement struct {
	// ExcNodes is the job's --exclude as squeue prints it ("n[3-4]"), ""
	// when it excludes none.
	ExcNodes string `json:"exc_nodes,omitempty"`
	// Features is its --constraint expression ("a100&ib"), "" for none.
	Features string `json:"features,omitempty"`
	// Priority is the job's priority as squeue's %Q prints it (an integer;
	// a higher one is scheduled first within a partition's priority tier:
	// https://slurm.schedmd.com/priority_multifactor.html; with
	// priority/basic, Debian's default, an earlier submission is higher).
	Priority uint64 `json:"priority"`
	// Reservation is the advance reservation the job must run in
	// (--reservation, squeue's %v), "" for none.
	Reservation string `json:"reservation,omitempty"`
	// Contiguous: it asks for contiguous nodes (--contiguous, squeue's %O).
	Contiguous bool `json:"contiguous,omitempty"`
}

// PlacementFormat is the squeue -o format ParsePlacements reads: job id,
// excluded nodes, priority, reservation, contiguous (0 or 1), features. A
// job id, a host list, a number and a reservation name (an operator's)
// cannot contain '|'; the features come last, so an expression with '|'
// (OR) stays whole.
const PlacementFormat = "%i|%x|%Q|%v|%O|%f"

// PendingPlacements runs `squeue --noheader --states=PENDING -o
// PlacementFormat` and returns each pending job's Placement by id. A line
// that does not read (see ParsePlacements) is left out: a caller must treat
// a job without an entry as one whose placement it cannot check.
func (r Runner) PendingPlacements(ctx context.Context) (map[string]Placement, error) {
	return r.placements(ctx, "PENDING")
}

// PendingPlacement is [Runner.PendingPlacements] for job id alone
// (`squeue --jobs=ID`); ok is false when it is not pending or its line
// does not read.
func (r Runner) PendingPlacement(ctx context.Context, id string) (p Placement, ok bool, err error) {
	ps, err := r.placements(ctx, "PENDING", "--jobs="+id)
	if err != nil {
		return Placement{}, false, err
	}
	p, ok = ps[id]
	return p, ok, nil
}

// RunningPlacements is [Runner.PendingPlacements] for the running jobs
// (`squeue --states=RUNNING`): what an elastic job's owner asked of the
// nodes it runs on, which its extra jobs must respect too.
func (r Runner) RunningPlacements(ctx context.Context) (map[string]Placement, error) {
	return r.placements(ctx, "RUNNING")
}

// JobPlacement is [Runner.PendingPlacement] for job id in any state (a
// running job's --exclude and --constraint too: `squeue --states=all`).
// ok is false when squeue does not list the job under id itself: a task
// of a job array prints as ARRAY_TASK and a component of a heterogeneous
// job as ID+N in %i, so those never read as id.
func (r Runner) JobPlacement(ctx context.Context, id string) (p Placement, ok bool, err error) {
	ps, err := r.placements(ctx, "all", "--jobs="+id)
	if err != nil {
		return Placement{}, false, err
	}
	p, ok = ps[id]
	return p, ok, nil
}

func (r Runner) placements(ctx context.Context, states string, args ...string) (map[string]Placement, error) {
	out, err := r.Output(ctx, "squeue", append([]string{"--noheader", "--states=" + states, "-o", PlacementFormat}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("reading the %s jobs' excluded nodes and features: %w", strings.ToLower(states), err)
	}
	return ParsePlacements(out), nil
}

// ParsePlacements reads squeue -o PlacementFormat output: one line per job,
// "ID|EXCLUDED|PRIORITY|RESERVATION|CONTIGUOUS|FEATURES". A line whose id
// is not a job id, whose excluded nodes hold anything but a host list's
// characters, whose priority is not an unsigned integer, whose reservation
// is empty or whose contiguous flag is neither 0 nor 1 is skipped, and so
// is every line of an id that appears twice (which of them is the job's
// cannot be told); "(null)" reads as "".
func ParsePlacements(out []byte) map[string]Placement {
	ps := map[string]Placement{}
	twice := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(strings.TrimRight(line, "\r"), "|", 6)
		if len(f) != 6 || !isJobID(f[0]) || !isHostList(f[1]) || f[3] == "" || f[4] != "0" && f[4] != "1" {
			continue
		}
		prio, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil || !isDigits(f[2]) {
			continue
		}
		if _, seen := ps[f[0]]; seen {
			twice[f[0]] = true
		}
		ps[f[0]] = Placement{ExcNodes: optional(f[1]), Priority: prio, Reservation: optional(f[3]), Contiguous: f[4] == "1",
			Features: optional(strings.TrimSpace(f[5]))}
	}
	for id := range twice {
		delete(ps, id)
	}
	return ps
}

// isHostList reports whether s is empty, "(null)" or made only of the
// characters of a Slurm host list (names, digits, "[", "]", "-", ",", ".",
// "_").
func isHostList(s string) bool {
	if s == "(null)" {
		return true
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("[]-,._", c)) {
			return false
		}
	}
	return true
}
