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
	// Composite is "" for a job that stands alone, else how squeue's %i
	// prints it: a job array's record ("1880006_[4-7]", its pending
	// tasks, or "1880006_0", one task) or a heterogeneous job's component
	// ("1880018+1"). Such a job's id also names others (`scontrol update
	// JobId=1880006` changes every task of the array), so the daemon reads
	// its priority but acts on it as on a job whose placement it cannot
	// read ([WholeJobs]).
	Composite string `json:"composite,omitempty"`
}

// PlacementFormat is the squeue -o format ParsePlacements reads: the
// job's own id (%A, the one squeue's --Format JobID prints), its id as %i
// prints it (which names a job array's tasks and a heterogeneous job's
// components otherwise: Placement.Composite), excluded nodes, priority,
// reservation, contiguous (0 or 1), features. A job id, a host list, a
// number and a reservation name (an operator's) cannot contain '|'; the
// features come last, so an expression with '|' (OR) stays whole. Keyed
// by %i alone, as before 7 December 2026, a job array's pending tasks
// ("1880006_[4-7]", where JobID prints 1880006; both labs) had no
// priority the daemon could find.
const PlacementFormat = "%A|%i|%x|%Q|%v|%O|%f"

// PendingPlacements runs `squeue --noheader --states=PENDING -o
// PlacementFormat` and returns each pending job's Placement by its own id,
// job array tasks and heterogeneous job components included (Composite;
// [WholeJobs] leaves them out). A line that does not read (see
// ParsePlacements) is left out: a caller must treat a job without an
// entry as one whose placement it cannot check.
func (r Runner) PendingPlacements(ctx context.Context) (map[string]Placement, error) {
	return r.placements(ctx, "PENDING")
}

// PendingPlacement is [Runner.PendingPlacements] for job id alone
// (`squeue --jobs=ID`); ok is false when it is not pending, its line
// does not read, or it is a task of a job array or a component of a
// heterogeneous job (Placement.Composite).
func (r Runner) PendingPlacement(ctx context.Context, id string) (p Placement, ok bool, err error) {
	ps, err := r.placements(ctx, "PENDING", "--jobs="+id)
	if err != nil {
		return Placement{}, false, err
	}
	p, ok = ps[id]
	return p, ok && p.Composite == "", nil
}

// RunningPlacements is [Runner.PendingPlacements] for the running jobs
// (`squeue --states=RUNNING`): what an elastic job's owner asked of the
// nodes it runs on, which its extra jobs must respect too.
func (r Runner) RunningPlacements(ctx context.Context) (map[string]Placement, error) {
	return r.placements(ctx, "RUNNING")
}

// JobPlacement is [Runner.PendingPlacement] for job id in any state (a
// running job's --exclude and --constraint too: `squeue --states=all`).
// ok is false when squeue does not list the job under id itself, or lists
// it as a task of a job array or a component of a heterogeneous job
// (Placement.Composite), which the daemon never acts on.
func (r Runner) JobPlacement(ctx context.Context, id string) (p Placement, ok bool, err error) {
	ps, err := r.placements(ctx, "all", "--jobs="+id)
	if err != nil {
		return Placement{}, false, err
	}
	p, ok = ps[id]
	return p, ok && p.Composite == "", nil
}

func (r Runner) placements(ctx context.Context, states string, args ...string) (map[string]Placement, error) {
	out, err := r.Output(ctx, "squeue", append([]string{"--noheader", "--states=" + states, "-o", PlacementFormat}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("reading the %s jobs' excluded nodes and features: %w", strings.ToLower(states), err)
	}
	return ParsePlacements(out), nil
}

// ParsePlacements reads squeue -o PlacementFormat output: one line per job,
// "ID|%i|EXCLUDED|PRIORITY|RESERVATION|CONTIGUOUS|FEATURES", keyed by ID,
// the job's own id; Composite is %i when it differs from ID. A line whose
// ID is not digits, whose %i is not a job id, whose excluded nodes hold
// anything but a host list's characters, whose priority is not an
// unsigned integer, whose reservation is empty or whose contiguous flag
// is neither 0 nor 1 is skipped, and so is every line of an id that
// appears twice (which of them is the job's cannot be told); "(null)"
// reads as "".
func ParsePlacements(out []byte) map[string]Placement {
	ps := map[string]Placement{}
	twice := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(strings.TrimRight(line, "\r"), "|", 7)
		if len(f) != 7 || !isDigits(f[0]) || len(f[0]) > 20 || !isJobID(f[1]) || !isHostList(f[2]) || f[4] == "" || f[5] != "0" && f[5] != "1" {
			continue
		}
		prio, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil || !isDigits(f[3]) {
			continue
		}
		if _, seen := ps[f[0]]; seen {
			twice[f[0]] = true
		}
		p := Placement{ExcNodes: optional(f[2]), Priority: prio, Reservation: optional(f[4]), Contiguous: f[5] == "1",
			Features: optional(strings.TrimSpace(f[6]))}
		if f[1] != f[0] {
			p.Composite = f[1]
		}
		ps[f[0]] = p
	}
	for id := range twice {
		delete(ps, id)
	}
	return ps
}

// WholeJobs is ps without the tasks of job arrays and the components of
// heterogeneous jobs (Placement.Composite): the placements of the jobs
// the daemon may act on. It returns a new map.
func WholeJobs(ps map[string]Placement) map[string]Placement {
	if ps == nil {
		return nil
	}
	out := make(map[string]Placement, len(ps))
	for id, p := range ps {
		if p.Composite == "" {
			out[id] = p
		}
	}
	return out
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
