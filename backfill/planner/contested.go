package planner

import (
	"cmp"
	"fmt"
	"slices"
)

// How shrink-to-admit under the objective counts a donor's end against the
// horizon ([NodeObjective.AdmitHorizon], the daemon's admit.horizon; the
// simulator's Config.AdmitHorizon).
const (
	// HorizonContested counts it as kept for the donors [Pools.Kept]
	// names, as returned for the others (BENCHMARKS.md E56).
	HorizonContested = "contested"
	// HorizonReturned counts every donor as getting its GPUs back when the
	// admitted job's run ends ([BorrowLoss]), the default since
	// BENCHMARKS.md E51; "" means it too.
	HorizonReturned = "returned"
	// HorizonKept counts every donor as never getting them back
	// ([ShrinkLoss], [Donor.Delay]).
	HorizonKept = "kept"
)

// PoolJob is a running elastic job as [Pools] sees it: its owner ("":
// unknown), the GPU types of its own (base) allocation and its expected
// time left at its current size, in seconds.
type PoolJob struct {
	User     string
	Types    []string
	TimeLeft float64
}

// Pools answers [Pools.Kept] for the running elastic jobs and the queued
// jobs of one planning round.
type Pools struct {
	running []PoolJob
	// longest holds, per type, the longest job of each of the (at most
	// poolOwners) owners whose longest jobs there are longest, most time
	// left first; a job of an unknown owner is an owner of its own.
	longest   map[string][]int
	contested []bool
}

// poolOwners is how many owners' longest jobs [Pools] keeps per type: a
// query looks only at jobs longer than the one asked about and leaves out
// the queued job's owner, so the second owner's is the last that may count.
const poolOwners = 2

// NewPools indexes running (the running elastic jobs) and queued (the
// rules of the queued jobs, the one being admitted among them) for
// [Pools.Kept]. O((R + Q) · types).
func NewPools(running []PoolJob, queued []FitRule) *Pools {
	p := &Pools{running: running, longest: map[string][]int{}, contested: make([]bool, len(running))}
	owner := func(j int) string {
		if u := running[j].User; u != "" {
			return "u" + u
		}
		return fmt.Sprint("j", j)
	}
	for i, d := range running {
		for _, t := range d.Types {
			l := p.longest[t]
			if slices.Contains(l, i) {
				continue // a type listed twice
			}
			if k := slices.IndexFunc(l, func(j int) bool { return owner(j) == owner(i) }); k >= 0 {
				if running[l[k]].TimeLeft >= d.TimeLeft {
					continue
				}
				l = slices.Delete(l, k, k+1)
			}
			at, _ := slices.BinarySearchFunc(l, d.TimeLeft, func(j int, left float64) int { return cmp.Compare(left, running[j].TimeLeft) })
			if at < poolOwners {
				l = slices.Insert(l, at, i)
				p.longest[t] = l[:min(len(l), poolOwners)]
			}
		}
	}
	// The first two queued jobs that may use each type, and that may use
	// any: two distinct ones among a job's types are in these.
	var anyType []int
	byType := map[string][]int{}
	for q, r := range queued {
		if len(r.Types) == 0 {
			if len(anyType) < 2 {
				anyType = append(anyType, q)
			}
			continue
		}
		for _, t := range r.Types {
			if l := byType[t]; len(l) < 2 && (len(l) == 0 || l[len(l)-1] != q) {
				byType[t] = append(l, q)
			}
		}
	}
	for i, d := range running {
		seen := map[int]bool{}
		for _, q := range anyType {
			seen[q] = true
		}
		for _, t := range d.Types {
			for _, q := range byType[t] {
				seen[q] = true
			}
		}
		p.contested[i] = len(d.Types) > 0 && len(seen) >= 2
	}
	return p
}

// Kept reports whether shrink-to-admit, admitting a queued job of user,
// weighs the end of running job i as if it never got back the GPUs it
// gives up ([ShrinkLoss], [Donor.Delay]) rather than getting them back
// when the admitted job ends ([BorrowLoss], admit.horizon "returned").
// That is so when both hold:
//   - its pool is contested: at least two queued jobs (the one being
//     admitted among them) may use one of its types. The GPUs the admitted
//     job frees then go to the next queued job before a shrunk job grows
//     back, so the shrink is kept in fact;
//   - no other running job on one of its types has more time left: its
//     end is its pool's makespan, and every second it loses lengthens it.
//     Jobs of user do not count (an unknown user, "", on either side
//     does), as in [HorizonFor]: a long placeholder job of the queued
//     job's owner must not make another user's job look shorter than the
//     longest and so lend more.
//
// The horizon ([AdmitRequest.Horizon]) then bounds its kept delay: the
// longest job of a saturated pool is not shrunk to admit short jobs one
// after another. Under "returned", in BENCHMARKS.md's hetero matrix
// (pollux6, 100 % d1, paper range) a 4-GPU job pinned to the 16 T4s lent 2
// of them at its start and got them back 115,000 s later, and the trace ended
// 6 % after rigid's; under "contested" 11 % before it. Over 960 Pollux
// cells "contested" shortened the makespan where elastic lost to rigid but
// lengthened the mean JCT more often (E56), so it is an option, not the
// default. O(types). Pure.
func (p *Pools) Kept(i int, user string) bool {
	if i < 0 || i >= len(p.running) || !p.contested[i] {
		return false
	}
	d := p.running[i]
	for _, t := range d.Types {
		for _, j := range p.longest[t] {
			o := p.running[j]
			if o.TimeLeft <= d.TimeLeft {
				break
			}
			if j != i && (user == "" || o.User == "" || o.User != user) {
				return false
			}
		}
	}
	return true
}

// Keeping is how shrink-to-admit counts each donor's end against the horizon
// under an admit.horizon ([NodeObjective.AdmitHorizon], the simulator's
// Config.AdmitHorizon), for one planning round: as kept (its [Donor.Delay]
// bounds it) or as returned (its Loss does). The zero value counts every
// donor as returned.
type Keeping struct {
	all   bool
	pools *Pools
}

// KeepingFor returns the Keeping of horizon: every donor kept under
// [HorizonKept]; those [Pools.Kept] names under [HorizonContested], pools
// being called then only, to index the round's running elastic jobs and
// queued jobs ([NewPools]); none otherwise ([HorizonReturned], "").
func KeepingFor(horizon string, pools func() *Pools) Keeping {
	switch horizon {
	case HorizonKept:
		return Keeping{all: true}
	case HorizonContested:
		return Keeping{pools: pools()}
	}
	return Keeping{}
}

// Kept reports whether running job i (its index in the jobs given to
// [NewPools]; any index under [HorizonKept]) counts as kept when a queued
// job of user is admitted.
func (k Keeping) Kept(i int, user string) bool {
	return k.all || (k.pools != nil && k.pools.Kept(i, user))
}

// None reports whether no donor counts as kept, whatever the queued job.
func (k Keeping) None() bool { return !k.all && k.pools == nil }
