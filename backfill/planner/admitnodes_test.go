package planner

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// admitFixture is the daemon's shrink-to-admit test cluster in plain
// values: elastic job 10 holds all of v100 nodes n1 and n2 (4 GPUs each)
// with 60 min left of a 60 min limit; job 20 waits for one whole v100 node
// for 30 min; the t4 nodes n3 and n4 are idle but of the wrong type.
func admitFixture() NodeAdmitInput {
	return NodeAdmitInput{
		Nodes: []AdmitNode{{"n1", "v100", 4, 0, 0}, {"n2", "v100", 4, 0, 0}, {"n3", "t4", 4, 4, 0}, {"n4", "t4", 4, 4, 0}},
		Queue: []NodeAdmitQueued{{ID: "20", Nodes: 1, GPUsPerNode: 4, GPUType: "v100", Limit: 30 * time.Minute,
			Allowed: []string{"n1", "n2", "n3", "n4"}}},
		Donors: []NodeAdmitDonor{{ID: "10", Facts: DonorFacts{Elastic: true, Ready: true, Managed: true, AdmitOn: true, Nodes: 2, HasEnd: true},
			Nodes: []NodeGPUs{{"n1", 4}, {"n2", 4}}, MinNodes: 1, OrigNodes: 2, TimeLeft: time.Hour, Limit: time.Hour}},
		MaxLoss:   0.5,
		TimeLimit: TimeLimitRule{Margin: time.Minute, MarginFraction: 0.1, Unit: time.Minute},
	}
}

func TestAdmitOnNodes(t *testing.T) {
	const min = time.Minute
	admitted := &NodeAdmission{Queued: "20", Alloc: []NodeGPUs{{"n2", 4}}, Shrinks: []NodeShrink{{Job: "10", OrigNodes: 2, FromNodes: 2,
		ToNodes: 1, Released: []string{"n2"}, OldLimit: time.Hour, NewLimit: 132 * min, Remaining: time.Hour, AtSmall: 2 * time.Hour}}}
	tests := []struct {
		name   string
		change func(in *NodeAdmitInput)
		want   *NodeAdmission // nil: none
		why    string         // a part of the reasons, when none
	}{
		{"the queued job gets the donor's last node; its limit covers its work on fewer nodes plus 10 %",
			func(*NodeAdmitInput) {}, admitted, ""},
		{"the remaining work comes from the donor's progress report: 20·250/150 min, doubled, plus 10 %",
			func(in *NodeAdmitInput) {
				d := &in.Donors[0]
				d.Elapsed, d.TimeLeft, d.Step, d.TotalSteps = 20*min, 40*min, 150, 400
			},
			&NodeAdmission{Queued: "20", Alloc: []NodeGPUs{{"n2", 4}}, Shrinks: []NodeShrink{{Job: "10", OrigNodes: 2, FromNodes: 2,
				ToNodes: 1, Released: []string{"n2"}, OldLimit: time.Hour, NewLimit: 94 * min, Remaining: 20 * min * 250 / 150,
				AtSmall: 2 * 20 * min * 250 / 150}}}, ""},
		{"the cap: 0.4 of 2 nodes rounds down to none", func(in *NodeAdmitInput) { in.MaxLoss = 0.4 }, nil, "at the fewest nodes it may keep"},
		{"the cap counts earlier shrinks: a job that had 4 nodes has lost its half",
			func(in *NodeAdmitInput) { in.Donors[0].OrigNodes = 4 }, nil, "at the fewest nodes it may keep"},
		{"never below the request's minimum", func(in *NodeAdmitInput) { in.Donors[0].MinNodes = 2 }, nil, "at the fewest nodes"},
		{"a job NotDonor refuses gives nothing", func(in *NodeAdmitInput) { in.Donors[0].Facts.Ready = false }, nil, "coordinator is not up"},
		{"a donor whose start or limit is unreadable gives nothing", func(in *NodeAdmitInput) { in.Donors[0].Unreadable = true }, nil, "not readable"},
		{"a donor with less time left than the queued job's work gives nothing",
			func(in *NodeAdmitInput) { in.Donors[0].TimeLeft = 20 * min }, nil, "less than the queued job's"},
		{"a donor on a node another reservation names gives nothing (its limit would move it)",
			func(in *NodeAdmitInput) { in.Queue[0].Reserved = []ReservedNode{{Node: "n2"}} }, nil, "found no admission"},
		{"two nodes: the idle n0 another job is planned on from 45 min on, and the released n2 (its 30 min end by then)",
			func(in *NodeAdmitInput) { reservedIdleNode(in, 45*min) },
			&NodeAdmission{Queued: "20", Alloc: []NodeGPUs{{"n0", 4}, {"n2", 4}}, Shrinks: admitted.Shrinks}, ""},
		{"not when n0 is planned from 20 min on: its 30 min would delay that start (the reason names n0)",
			func(in *NodeAdmitInput) { reservedIdleNode(in, 20*min) }, nil, "kept off n0 (in 20m0s)"},
		{"not when the cycle's time is not known", func(in *NodeAdmitInput) { reservedIdleNode(in, 45*min); in.Now = 0 }, nil, "found no admission"},
		{"nor when it may start up to 16 min later (StartDelay): its 30 min would then run past 45",
			func(in *NodeAdmitInput) { reservedIdleNode(in, 45*min); in.StartDelay = 16 * min }, nil, "found no admission"},
		{"a job ranked ahead that would fit on the released node and n3 would start there instead: nobody shrinks",
			func(in *NodeAdmitInput) { aheadTwoNodeJob(in, "") }, nil, "job 15, ranked ahead of it, would start on the nodes freed for it"},
		{"one of another type does not count", func(in *NodeAdmitInput) { aheadTwoNodeJob(in, "t4") }, admitted, ""},
		{"nor one that fits already (it waits for something else)",
			func(in *NodeAdmitInput) { aheadTwoNodeJob(in, ""); in.Nodes[3].Free = 4 }, admitted, ""},
		{"a queued job that excludes the node a shrink would free makes nobody shrink",
			func(in *NodeAdmitInput) { in.Queue[0].Allowed = []string{"n1", "n3", "n4"} }, nil, "do not hold it"},
		{"only the layout asked for: two nodes of 2 GPUs do not fit on one released node",
			func(in *NodeAdmitInput) { in.Queue[0].Nodes, in.Queue[0].GPUsPerNode = 2, 2 }, nil, ""},
		{"a queued job naming a node the daemon does not manage makes nobody shrink",
			func(in *NodeAdmitInput) { in.Queue[0].OnlyNodes = []string{"n9"} }, nil, "does not manage"},
		{"a refused queued job is passed over for the next in the queue",
			func(in *NodeAdmitInput) {
				in.Queue = append([]NodeAdmitQueued{{ID: "19", Refused: "request or time limit not readable"}}, in.Queue...)
			}, admitted, ""},
		{"without nodes nothing is decided", func(in *NodeAdmitInput) { in.Nodes = nil }, nil, ""},
		// Slurm places -N2 --gres=gpu:2 on two nodes with 2 GPUs free each
		// (FitNodes); a --gpus=4 model put all 4 on the released n2 and
		// refused the layout.
		{"a per-node request is placed as Slurm places it: 2 GPUs on the released n2 and 2 on the partly used T4 n3",
			func(in *NodeAdmitInput) {
				in.Nodes[2].Free, in.Nodes[3].Free = 3, 1
				in.Queue[0].Nodes, in.Queue[0].GPUsPerNode, in.Queue[0].GPUType = 2, 2, ""
			},
			&NodeAdmission{Queued: "20", Alloc: []NodeGPUs{{"n2", 2}, {"n3", 2}}, Shrinks: admitted.Shrinks}, ""},
		// A --gpus=4 job (TRES per job) goes where Slurm's per-job placement
		// puts it: 3 GPUs on the lighter n0, 1 on the released n2; asked per
		// node (--gres=gpu:4) it takes the released n2 whole.
		{"a per-job request is placed by Fit: over the lighter partly used n0 and the released n2",
			func(in *NodeAdmitInput) {
				in.Nodes = append([]AdmitNode{{Name: "n0", GPUType: "v100", Total: 4, Free: 3, Weight: 1}}, in.Nodes...)
				in.Nodes[2].Weight = 2
				in.Queue[0].PerJob, in.Queue[0].Allowed = true, append(in.Queue[0].Allowed, "n0")
			},
			&NodeAdmission{Queued: "20", Alloc: []NodeGPUs{{"n0", 3}, {"n2", 1}}, Shrinks: admitted.Shrinks}, ""},
		{"the same job asked per node takes the released n2 whole",
			func(in *NodeAdmitInput) {
				in.Nodes = append([]AdmitNode{{Name: "n0", GPUType: "v100", Total: 4, Free: 3, Weight: 1}}, in.Nodes...)
				in.Nodes[2].Weight = 2
				in.Queue[0].Allowed = append(in.Queue[0].Allowed, "n0")
			},
			admitted, ""},
		{"a donor whose raised limit (132 min) would pass its partition's MaxTime gives nothing",
			func(in *NodeAdmitInput) { in.Donors[0].Cap = LimitCap{Max: 2 * time.Hour, Partition: "normal"} }, nil,
			"gives up no node: at 1 nodes the time limit it would need, 2h12m0s, exceeds the MaxTime 2h0m0s of its partition normal"},
		{"a donor whose partition's MaxTime is unknown gives nothing",
			func(in *NodeAdmitInput) { in.Donors[0].Cap = LimitCap{Unknown: true, Partition: "normal"} }, nil, "is unknown"},
		{"a donor within its partition's MaxTime gives its node", func(in *NodeAdmitInput) { in.Donors[0].Cap = LimitCap{Max: 132 * min, Partition: "normal"} },
			admitted, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := admitFixture()
			tc.change(&in)
			a, ok, why := AdmitOnNodes(in)
			if tc.want == nil {
				if ok {
					t.Fatalf("admitted %+v, want none", a)
				}
				if !strings.Contains(strings.Join(why, "\n"), tc.why) {
					t.Errorf("reasons %q, want one with %q", why, tc.why)
				}
				return
			}
			if !ok || !reflect.DeepEqual(a, *tc.want) {
				t.Fatalf("AdmitOnNodes = %+v, %v (%q); want %+v", a, ok, why, *tc.want)
			}
		})
	}
}

// TestAdmitOnNodesByTheObjective: under admit.rule "objective" the
// fixture's donor (2 v100 nodes, 60 min left) gives its last node when
// what it loses — 30 min of the queued job on half its GPUs, by
// DefaultModel about 14 min, plus two 30 s resizes — is below the
// queued job's wait, and never when it would then end after both the
// longest running job and the queued job's own end by waiting.
func TestAdmitOnNodesByTheObjective(t *testing.T) {
	const min = time.Minute
	now := int64(1_000_000)
	objective := func(in *NodeAdmitInput, wait time.Duration) {
		in.Objective = &NodeObjective{Now: now, RescaleCost: 30 * time.Second, Horizon: 2 * time.Hour}
		in.Queue[0].ReservedStart = now + int64(wait.Seconds())
	}
	tests := []struct {
		name   string
		change func(in *NodeAdmitInput)
		ok     bool
		why    string
	}{
		{"a wait of an hour outweighs the donor's loss", func(in *NodeAdmitInput) { objective(in, time.Hour) }, true, ""},
		{"a wait of 5 min does not", func(in *NodeAdmitInput) { objective(in, 5*min) }, false, "would lose more"},
		// shortest remaining time first: the queued job's 30 min limit
		// against the median time left of the jobs beside it
		{"a job over twice the median time left of the others waits its turn", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Queue[0].PeerMedian = 14 * min
		}, false, "median time left"},
		{"a job within twice that median is admitted", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Queue[0].PeerMedian = 15 * min
		}, true, ""},
		{"no planned start: nothing to weigh the loss against", func(in *NodeAdmitInput) { objective(in, 0); in.Queue[0].ReservedStart = 0 },
			false, "no planned start"},
		{"the longest job does not yield when the queued job would end sooner by waiting", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
		}, false, "end after the longest"},
		{"it yields when the queued job, waiting, would end after it anyway", func(in *NodeAdmitInput) {
			objective(in, 90*min)
			in.Objective.Horizon = 0
		}, true, ""},
		{"a donor with less time left than the queued job's limit may yield when it loses least", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Donors[0].TimeLeft = 20 * min
		}, true, ""},
		// a tester's F3: mallory starts a long placeholder job of her own
		// to loosen the bound for her queued job at alice's expense
		{"the queued job's user's own long job does not widen its horizon", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Objective.Others = []JobLeft{{User: "mallory", Left: 10 * time.Hour}}
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
		}, false, "end after the longest"},
		{"another user's long job does", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Objective.Others = []JobLeft{{User: "bob", Left: 10 * time.Hour}}
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
		}, true, ""},
		{"nor does an elastic job of the queued job's user", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Donors = append(in.Donors, NodeAdmitDonor{ID: "12", User: "mallory", Facts: DonorFacts{NotReady: "placeholder"},
				Nodes: []NodeGPUs{{Node: "n3", GPUs: 4}}, MinNodes: 1, OrigNodes: 1, Elapsed: time.Minute, TimeLeft: 10 * time.Hour, Limit: 10 * time.Hour})
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
		}, false, "end after the longest"},
		// admit.horizon: the donor gets its node back after the queued
		// job's 30 min (BorrowLoss: it ends about 15 min later) or, "kept",
		// runs its last hour on one node (ShrinkLoss: about 53 min later);
		// the queued job, waiting an hour, would end 90 min from now
		{"a donor that gets its node back when the queued job ends stays within the horizon", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
		}, true, ""},
		{"counted as never getting it back (admit.horizon kept), it would not", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonKept
		}, false, "end after the longest"},
		// admit.allowance: past the horizon (90 min) the donor may still
		// give its node when, never getting it back, it ends (about 113
		// min from now) within (1 + allowance) × its 60 min limit
		{"counted as never getting it back, it ends within admit.allowance 1 of its limit: it yields", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonKept
			in.Objective.Allowance = 1
		}, true, ""},
		{"an allowance of 0.5 (90 min) does not hold it", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonKept
			in.Objective.Allowance = 0.5
		}, false, "end after the longest"},
		{"the allowance is of the limit before shrink-to-admit raised it (55 of 100 min: 110 min)", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonKept
			in.Objective.Allowance = 1
			in.Donors[0].Limit, in.Donors[0].LimitRaised = 100*min, 45*min
		}, false, "end after the longest"},
		{"less the time it has run (2 × 70 − 30 min)", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonKept
			in.Objective.Allowance = 1
			in.Donors[0].Limit, in.Donors[0].Elapsed = 70*min, 30*min
		}, false, "end after the longest"},
		// admit.allowance counts from the run at the start allocation: a
		// limit far above the run (4 h for a job whose 100 of 600 steps
		// took 10 min: a 60 min run, 50 min left) must not loosen it.
		// Never getting its node back it ends about 100 min from now:
		// within 2 × 60 − 10 min, not within 1.5 × 60 − 10 min (nor
		// within 1.5 × 240 − 10 min were the limit read instead).
		{"by its progress report (a 60 min run) allowance 1 lets it yield", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonKept
			in.Objective.Allowance = 1
			d := &in.Donors[0]
			d.Limit, d.TimeLeft, d.Elapsed, d.Step, d.TotalSteps = 4*time.Hour, 230*min, 10*min, 100, 600
			d.Cap = LimitCap{Max: 10 * time.Hour}
		}, true, ""},
		{"and 0.5 does not, though its 4 h limit would have", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonKept
			in.Objective.Allowance = 0.5
			d := &in.Donors[0]
			d.Limit, d.TimeLeft, d.Elapsed, d.Step, d.TotalSteps = 4*time.Hour, 230*min, 10*min, 100, 600
			d.Cap = LimitCap{Max: 10 * time.Hour}
		}, false, "end after the longest"},
		// admit.horizon contested: kept when another pending
		// job besides the queued one may use the donor's type (v100) and no
		// running elastic job there has more time left
		{"contested by the queued job alone, the donor counts its node as returned", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonContested
			in.Queue = append(in.Queue, NodeAdmitQueued{ID: "21", Nodes: 1, GPUsPerNode: 4, GPUType: "t4", Limit: time.Hour})
		}, true, ""},
		{"contested by another job that may use its type, the longest donor counts it as kept", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonContested
			in.Queue = append(in.Queue, NodeAdmitQueued{ID: "21", Nodes: 1, GPUsPerNode: 4, Limit: time.Hour})
		}, false, "end after the longest"},
		{"contested, a longer elastic job of the queued job's owner on its type does not count", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonContested
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
			in.Queue = append(in.Queue, NodeAdmitQueued{ID: "21", Nodes: 1, GPUsPerNode: 4, GPUType: "v100", Limit: time.Hour})
			in.Nodes = append(in.Nodes, AdmitNode{"n5", "v100", 4, 0, 0})
			in.Donors = append(in.Donors, NodeAdmitDonor{ID: "11", User: "mallory", Facts: DonorFacts{NotReady: "placeholder"},
				Nodes: []NodeGPUs{{Node: "n5", GPUs: 4}}, MinNodes: 1, OrigNodes: 1, Elapsed: time.Minute, TimeLeft: 70 * min, Limit: 2 * time.Hour})
		}, false, "end after the longest"},
		{"contested, a donor with a longer elastic job on its type counts it as returned", func(in *NodeAdmitInput) {
			objective(in, time.Hour)
			in.Objective.Horizon = 0
			in.Objective.AdmitHorizon = HorizonContested
			in.Queue = append(in.Queue, NodeAdmitQueued{ID: "21", Nodes: 1, GPUsPerNode: 4, GPUType: "v100", Limit: time.Hour})
			in.Nodes = append(in.Nodes, AdmitNode{"n5", "v100", 4, 0, 0})
			in.Donors = append(in.Donors, NodeAdmitDonor{ID: "11", User: "bob", Facts: DonorFacts{NotReady: "starting"},
				Nodes: []NodeGPUs{{Node: "n5", GPUs: 4}}, MinNodes: 1, OrigNodes: 1, Elapsed: time.Minute, TimeLeft: 70 * min, Limit: 2 * time.Hour})
		}, true, ""},
		// a tester's finding: a job whose limit shrink-to-admit raised
		// (bob's, 3 h left of which 2 h 30 min are the raise) widened the
		// horizon, so the longest job by its owner's limit (alice's, 1 h)
		// yielded; its end counts without the raise (30 min)
		{"a limit raised by shrink-to-admit does not widen the horizon", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
			in.Donors = append(in.Donors, raisedBob(150*min))
		}, false, "end after the longest"},
		{"a job with no end (time left −∞) and a raise does not wrap around to centuries", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
			bob := raisedBob(time.Hour)
			bob.TimeLeft = time.Duration(math.MinInt64) // time.Time{}.Sub(now)
			in.Donors = append(in.Donors, bob)
		}, false, "end after the longest"},
		{"the same job, its limit its owner's, does", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
			in.Donors = append(in.Donors, raisedBob(0))
		}, true, ""},
		// drain_horizon: other users' work the cluster has to run anyway
		// (here 10 h on a capacity of 1 reference GPU) ends after the
		// donor would: it does not set the makespan and may yield
		{"other users' work to run widens the horizon (drain_horizon)", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Objective.Drain = &Drain{Capacity: 1}
			in.Objective.Drain.Add("bob", 10*3600)
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
		}, true, ""},
		{"the queued job's user's own work does not", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Objective.Drain = &Drain{Capacity: 1}
			in.Objective.Drain.Add("mallory", 10*3600)
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
		}, false, "end after the longest"},
		{"work that the cluster runs before the donor would end does not", func(in *NodeAdmitInput) {
			objective(in, 20*min)
			in.Objective.Horizon = 0
			in.Objective.Drain = &Drain{Capacity: 1}
			in.Objective.Drain.Add("bob", 30*60)
			in.Queue[0].User, in.Donors[0].User = "mallory", "alice"
		}, false, "end after the longest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := admitFixture()
			tc.change(&in)
			a, ok, why := AdmitOnNodes(in)
			if ok != tc.ok {
				t.Fatalf("AdmitOnNodes = %+v, %v (%q); want ok %v", a, ok, why, tc.ok)
			}
			if !ok && !strings.Contains(strings.Join(why, "\n"), tc.why) {
				t.Errorf("reasons %q, want one with %q", why, tc.why)
			}
			if ok && (len(a.Shrinks) != 1 || a.Shrinks[0].ToNodes != 1 || a.Alloc[0].Node != "n2") {
				t.Errorf("admission %+v, want donor 10 down to n1 and the queued job on n2", a)
			}
		})
	}
}

// raisedBob is bob's elastic job on t4 node n3, 3 h before its limit ends,
// of which raised were added by shrink-to-admit; it is not a donor.
func raisedBob(raised time.Duration) NodeAdmitDonor {
	return NodeAdmitDonor{ID: "11", User: "bob", Facts: DonorFacts{NotReady: "coordinator down"},
		Nodes: []NodeGPUs{{Node: "n3", GPUs: 4}}, MinNodes: 1, OrigNodes: 2, Elapsed: time.Hour, TimeLeft: 3 * time.Hour,
		Limit: 4 * time.Hour, LimitRaised: raised}
}

// TestAdmitOnNodesHoldsItsInvariants: on random clusters every admission
// shrinks each donor to its first nodes and never below what it may keep,
// none holding a node another job's reservation names with a raised limit
// ending after that start,
// raises no limit below the old one, and starts the queued job in exactly
// the layout it asked for on nodes it may use, none reserved before its
// limit ends, which hold
// its GPUs once the donors' nodes are released.
func TestAdmitOnNodesHoldsItsInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	admitted, onReserved := 0, 0 // admissions; donor nodes on a reservation in them
	for range 3000 {
		in := randomAdmit(rng)
		if rng.IntN(2) == 0 { // the objective, with waits up to 3 h
			in.Objective = &NodeObjective{Now: 1e6, RescaleCost: 30 * time.Second, Horizon: time.Duration(rng.IntN(180)) * time.Minute}
			for i := range in.Queue {
				in.Queue[i].ReservedStart = 1e6 + int64(rng.IntN(3*3600))
			}
		}
		a, ok, _ := AdmitOnNodes(in)
		if !ok {
			continue
		}
		admitted++
		free := map[string]int{}
		for _, n := range in.Nodes {
			free[n.Name] = n.Free
		}
		for _, sh := range a.Shrinks {
			i := slices.IndexFunc(in.Donors, func(d NodeAdmitDonor) bool { return d.ID == sh.Job })
			d := in.Donors[i]
			if sh.ToNodes < KeepAfterLoss(d.OrigNodes, d.MinNodes, in.MaxLoss) || sh.ToNodes >= len(d.Nodes) || sh.NewLimit < d.Limit {
				t.Fatalf("%+v: shrink %+v of donor %+v", in, sh, d)
			}
			for k, n := range d.Nodes[sh.ToNodes:] {
				if sh.Released[k] != n.Node {
					t.Fatalf("%+v: shrink %+v does not release the donor's last nodes %v", in, sh, d.Nodes)
				}
				free[n.Node] += n.GPUs
			}
		}
		q := in.Queue[slices.IndexFunc(in.Queue, func(q NodeAdmitQueued) bool { return q.ID == a.Queued })]
		for _, sh := range a.Shrinks {
			d := in.Donors[slices.IndexFunc(in.Donors, func(d NodeAdmitDonor) bool { return d.ID == sh.Job })]
			for _, n := range d.Nodes {
				end := in.Now + int64((sh.NewLimit - d.Elapsed).Seconds())
				if slices.ContainsFunc(q.Reserved, func(r ReservedNode) bool { return r.Node == n.Node && end > r.Start }) {
					t.Fatalf("%+v: donor %s on reserved node %s shrinks, its raised limit ending after that start", in, d.ID, n.Node)
				}
				if slices.ContainsFunc(q.Reserved, func(r ReservedNode) bool { return r.Node == n.Node }) {
					onReserved++
				}
			}
		}
		if len(a.Alloc) != q.Nodes {
			t.Fatalf("%+v: %s starts on %v, asked %d nodes", in, q.ID, a.Alloc, q.Nodes)
		}
		for _, al := range a.Alloc {
			early := slices.ContainsFunc(q.Reserved, func(r ReservedNode) bool {
				return r.Node == al.Node && in.Now+int64((q.Limit+in.StartDelay).Seconds()) > r.Start
			})
			if al.GPUs != q.GPUsPerNode || !slices.Contains(q.Allowed, al.Node) || early || free[al.Node] < al.GPUs {
				t.Fatalf("%+v: %s starts on %v (free after the shrinks %v)", in, q.ID, a.Alloc, free)
			}
			free[al.Node] -= al.GPUs
		}
	}
	t.Logf("%d of 3000 random clusters admitted a job, shrinking donors on %d reserved nodes", admitted, onReserved)
	if admitted < 100 || onReserved < 10 {
		t.Fatalf("only %d of 3000 random clusters admitted a job, %d with donors on reserved nodes: the property is barely exercised", admitted, onReserved)
	}
}

// aheadTwoNodeJob queues job 15 ahead of the fixture's job 20: two whole
// nodes of gpuType ("": any), refused itself (features), with n4 busy.
func aheadTwoNodeJob(in *NodeAdmitInput, gpuType string) {
	in.Nodes[3].Free = 0
	in.Queue = append([]NodeAdmitQueued{{ID: "15", Refused: "it asks for node features", Nodes: 2, GPUsPerNode: 4, GPUType: gpuType}}, in.Queue...)
}

// reservedIdleNode makes the fixture's queued job ask two whole v100
// nodes and adds an idle v100 node n0 that another pending job is planned
// to start on at Now + at.
func reservedIdleNode(in *NodeAdmitInput, at time.Duration) {
	in.Now = 1e6
	in.Nodes = append([]AdmitNode{{Name: "n0", GPUType: "v100", Total: 4, Free: 4}}, in.Nodes...)
	q := &in.Queue[0]
	q.Nodes, q.Allowed = 2, append(q.Allowed, "n0")
	q.Reserved = []ReservedNode{{Node: "n0", Start: in.Now + int64(at.Seconds())}}
}

func randomAdmit(rng *rand.Rand) NodeAdmitInput {
	in := NodeAdmitInput{Now: 1e6, StartDelay: time.Duration(rng.IntN(60)) * time.Second, MaxLoss: []float64{0.25, 0.5, 1}[rng.IntN(3)], TimeLimit: TimeLimitRule{Margin: time.Minute, MarginFraction: 0.1, Unit: time.Minute}}
	nodes := 3 + rng.IntN(6)
	used := make([]int, nodes)
	for i := range nodes {
		in.Nodes = append(in.Nodes, AdmitNode{Name: "n" + string(rune('a'+i)), GPUType: []string{"v100", "t4"}[rng.IntN(2)], Total: 4})
	}
	next := 0
	for d := range 1 + rng.IntN(3) {
		k := 1 + rng.IntN(3)
		if next+k > nodes {
			break
		}
		donor := NodeAdmitDonor{ID: string(rune('A' + d)), Facts: DonorFacts{Elastic: true, Ready: true, Managed: true, AdmitOn: true, Nodes: k, HasEnd: true},
			MinNodes: 1 + rng.IntN(2), TimeLeft: time.Duration(10+rng.IntN(120)) * time.Minute, Limit: 3 * time.Hour}
		donor.OrigNodes = k + rng.IntN(2)
		for range k {
			donor.Nodes = append(donor.Nodes, NodeGPUs{Node: in.Nodes[next].Name, GPUs: 4})
			used[next] = 4
			next++
		}
		in.Donors = append(in.Donors, donor)
	}
	for i := range in.Nodes {
		if used[i] == 0 {
			in.Nodes[i].Free = rng.IntN(5)
		}
	}
	for q := range 1 + rng.IntN(2) {
		queued := NodeAdmitQueued{ID: string(rune('0' + q)), Nodes: 1 + rng.IntN(2), GPUsPerNode: []int{2, 4}[rng.IntN(2)],
			Limit: time.Duration(5+rng.IntN(60)) * time.Minute}
		if rng.IntN(2) == 0 {
			queued.GPUType = "v100"
		}
		for _, n := range in.Nodes {
			if rng.IntN(5) > 0 {
				queued.Allowed = append(queued.Allowed, n.Name)
			}
			if rng.IntN(8) == 0 {
				at := in.Now + int64(rng.IntN(6*3600))
				queued.Reserved = append(queued.Reserved, ReservedNode{Node: n.Name, Start: at})
			}
		}
		in.Queue = append(in.Queue, queued)
	}
	return in
}

// TestCapKeepGivesUpOnlyWhatTheCapAllows: a donor on 4 nodes with 60 min
// left may go to 3 (80 + 8 = 88 min), 2 (120 + 12 = 132) or 1 (240 + 24 =
// 264) by its raised limit; a MaxTime keeps it at the fewest nodes whose
// limit fits.
func TestCapKeepGivesUpOnlyWhatTheCapAllows(t *testing.T) {
	const min = time.Minute
	rule := TimeLimitRule{Margin: time.Minute, MarginFraction: 0.1, Unit: time.Minute}
	nodes := []NodeGPUs{{"n1", 4}, {"n2", 4}, {"n3", 4}, {"n4", 4}}
	tests := []struct {
		name string
		cap  LimitCap
		keep int
		no   string
	}{
		{"no cap: its own keep", LimitCap{}, 1, ""},
		{"MaxTime 132 min: down to 2 nodes", LimitCap{Max: 132 * min, Partition: "p"}, 2, ""},
		{"MaxTime 131 min: down to 3 nodes", LimitCap{Max: 131 * min, Partition: "p"}, 3, ""},
		{"MaxTime 87 min: none", LimitCap{Max: 87 * min, Partition: "p"}, 4, "exceeds the MaxTime 1h27m0s of its partition p"},
		{"unknown: none", LimitCap{Unknown: true, Partition: "p"}, 4, "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &NodeAdmitDonor{ID: "10", Nodes: nodes, Limit: time.Hour, TimeLeft: time.Hour, Cap: tc.cap}
			keep, no := capKeep(d, 1, time.Hour, rule)
			if keep != tc.keep || (tc.no == "") != (no == "") || !strings.Contains(no, tc.no) {
				t.Errorf("capKeep = %d, %q; want %d, %q", keep, no, tc.keep, tc.no)
			}
		})
	}
}
