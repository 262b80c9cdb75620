package planner

import (
	"cmp"
	"slices"
)

// NodeShare is one node of a running job's allocation: its name, the job's
// relative speed on the node's GPU type (> 0; RunningJob.SpeedOf) and the
// job's GPUs there. Batch marks the job's batch host, which it cannot
// release: `scontrol update JobId=ID NodeList=` refuses a list without it
// (measured on Slurm 22.05 and 24.11, BENCHMARKS.md E31).
type NodeShare struct {
	Name  string
	Speed float64
	GPUs  int
	Batch bool
}

// ShedNodes returns the nodes of a running elastic job's allocation (nodes,
// at least one) that it can release without slowing down, slowest first:
// by Model.Throughput, the job's throughput on the nodes left is at least
// its throughput on all of them. That happens on a mix of GPU types when
// the optimal placement of its logical workers (Place) gives a slow node's
// GPUs no logical worker, or too few to outweigh what the slowest GPU adds
// to every all-reduce (Model.stepTimeAt's synchronisation term): a
// 16-logical-worker job on 8 V100 and 8 T4 runs its 16 logical workers on
// the V100s and its all-reduce at the T4's pace. Releasing such a node
// frees GPUs that others wait for and, when it was the slowest, speeds the
// job up. The job keeps at least minGPUs GPUs, one node and its batch host
// (NodeShare.Batch). Nodes are
// released one at a time, the slowest (then the last by name, the node
// Slurm releases first) among those the rule allows, until none is left;
// the result is in that order. A rigid job must not be shed (the caller's
// check), nor a d1 job's nodes of its only type (it has one speed: nothing
// is shed).
func ShedNodes(m Model, nodes []NodeShare, minGPUs int) []string {
	left := slices.Clone(nodes)
	var shed []string
	for len(left) > 1 {
		now, _ := m.Throughput(shareCounts(left))
		total := 0
		for _, n := range left {
			total += n.GPUs
		}
		best := -1
		for i, n := range left {
			if n.Batch || total-n.GPUs < minGPUs {
				continue
			}
			without := slices.Delete(slices.Clone(left), i, i+1)
			if t, _ := m.Throughput(shareCounts(without)); t < now {
				continue
			}
			if best < 0 || n.Speed < left[best].Speed || n.Speed == left[best].Speed && cmp.Compare(n.Name, left[best].Name) > 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		shed = append(shed, left[best].Name)
		left = slices.Delete(left, best, best+1)
	}
	return shed
}

// shareCounts groups nodes' GPUs by speed.
func shareCounts(nodes []NodeShare) []SpeedCount {
	var sc []SpeedCount
	for _, n := range nodes {
		sc = AddSpeedCount(sc, n.Speed, n.GPUs)
	}
	return sc
}
