package simulator

import (
	"fmt"
	"slices"
)

// NodeWeights is how the simulated site sets each node's Slurm Weight
// (slurm.conf NodeName=... Weight=), by its GPU type's speed; select/cons_tres
// allocates nodes of lower weight first (planner.Cluster.Fit). The zero
// value is WeightsFastestFirst.
type NodeWeights int

// The weightings.
const (
	// WeightsFastestFirst gives faster GPU types lower weights, so a job
	// that may run on any type gets the fastest free GPUs first: the
	// simulator's default, and the placement its earlier model assumed.
	WeightsFastestFirst NodeWeights = iota
	// WeightsEqual leaves every node at Slurm's default weight: free GPUs
	// and node order alone decide, blind to speed.
	WeightsEqual
	// WeightsSlowestFirst gives slower types lower weights, the Slurm
	// documentation's advice for heterogeneous nodes in one partition
	// (slurm.conf(5), Weight: allocate the less capable nodes first and
	// keep the others for the jobs that need them).
	WeightsSlowestFirst
)

// String returns the weighting's command-line name.
func (w NodeWeights) String() string {
	switch w {
	case WeightsEqual:
		return "equal"
	case WeightsSlowestFirst:
		return "slowest-first"
	}
	return "fastest-first"
}

// ParseNodeWeights parses a weighting's name ("fastest-first", "equal",
// "slowest-first"); an unknown name is an error listing the known ones.
func ParseNodeWeights(s string) (NodeWeights, error) {
	for _, w := range []NodeWeights{WeightsFastestFirst, WeightsEqual, WeightsSlowestFirst} {
		if w.String() == s {
			return w, nil
		}
	}
	return 0, fmt.Errorf("unknown node weighting %q: use fastest-first, equal or slowest-first", s)
}

// weight is the Weight of a node whose GPU type runs at speed, given the
// speeds of the cluster's types: 1 + the number of distinct speeds that
// rank before it (faster ones for WeightsFastestFirst, slower ones for
// WeightsSlowestFirst), 1 for every node with WeightsEqual.
func (w NodeWeights) weight(speed float64, speeds map[string]float64) int {
	if w == WeightsEqual {
		return 1
	}
	var distinct []float64
	for _, v := range speeds {
		if !slices.Contains(distinct, v) {
			distinct = append(distinct, v)
		}
	}
	rank := 1
	for _, v := range distinct {
		if (w == WeightsFastestFirst && v > speed) || (w == WeightsSlowestFirst && v < speed) {
			rank++
		}
	}
	return rank
}
