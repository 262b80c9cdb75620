package planner

// Drain is the work bound on the makespan, applied to what is known now:
// the cluster cannot run the remaining work of its running and queued
// jobs sooner than that work over its capacity (the bound issue 17's
// item 5 names for the whole trace, "total work over capacity"; the
// simulator's lower bound, easyscale-simulate's lower_bound_mean_jct_s).
// A running job that still ends within that time does not set the
// makespan, so the horizon that bounds shrink-to-admit, start-small's
// ends-earlier rule and start-small's weighing ([HorizonFor]) is raised to
// it (drain_horizon): without it, the longest running job may never give
// up a GPU, and on a heterogeneous cluster a long job holding the fast
// GPUs kept every job pinned to them waiting for its end (issue60 family,
// BENCHMARKS.md E41).
//
// The work of the queued job's own user is left out of its bound, as
// HorizonFor leaves out their running jobs: nobody loosens the bound on
// other users' jobs by queueing or running work of their own. Work of an
// unknown owner ("") counts for everyone.
//
// Set Capacity, Add the jobs' work, then ask Bound. The zero value holds
// no work and bounds nothing.
type Drain struct {
	// Capacity is the cluster's GPUs weighted by their relative speed
	// (reference GPUs: GPU-seconds of speed 1.0 per second).
	Capacity float64
	// Total is the work added (reference GPU-seconds), ByUser the part of
	// it of each known owner.
	Total  float64
	ByUser map[string]float64 `json:",omitempty"`
}

// Add counts a job of user with work reference GPU-seconds left: its
// GPUs times its remaining run time on them times their relative speed
// (the GPUs a job of speed 1.0 would need as long). Work that is not a
// positive number counts as none.
func (d *Drain) Add(user string, work float64) {
	if !(work > 0) || work > maxWork {
		return
	}
	d.Total += work
	if user == "" {
		return
	}
	if d.ByUser == nil {
		d.ByUser = map[string]float64{}
	}
	d.ByUser[user] += work
}

// maxWork bounds one job's work (reference GPU-seconds: a million GPUs
// for a hundred years): beyond it a job's numbers are not a workload's.
const maxWork = 1e6 * 100 * 365 * 86400

// Reset forgets the work added, keeping the capacity and the map for
// reuse.
func (d *Drain) Reset() {
	d.Total = 0
	clear(d.ByUser)
}

// Bound is the drain time in seconds for a queued job of user ("":
// unknown, all work counts): the work of other users and of unknown
// owners over Capacity, at most MaxDrainBound. 0 for a nil Drain or a
// Capacity that is not positive.
func (d *Drain) Bound(user string) float64 {
	if d == nil || !(d.Capacity > 0) {
		return 0
	}
	w := d.Total
	if user != "" {
		w -= d.ByUser[user]
	}
	return min(max(w, 0)/d.Capacity, MaxDrainBound)
}

// MaxDrainBound caps [Drain.Bound]: ten years, in seconds, longer than any
// job's time limit, and a bound a time.Duration holds.
const MaxDrainBound = 10 * 365 * 86400.0
