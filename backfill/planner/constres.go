package planner

import "slices"

// consTres picks want GPUs on nodes (the indices into c.Nodes of those
// the job may use, in node order) as Slurm's select/cons_tres places a job that asks for GPUs
// per job (`--gpus=want`, no node count), or nil when their avail GPUs
// cannot hold it. It follows
// Slurm 22.05's src/plugins/select/cons_tres/job_test.c (can_job_run_on_node,
// _eval_nodes; in 24.11 _eval_nodes_consec, same logic), read for this
// model and checked against the lab's slurmctld (tests/slurm
// TestTheSimulatorPlacesJobsWhereSlurmDoes):
//
//  1. A node is eligible when it has a GPU free. Nodes of lower Weight
//     rank first; among equal weights, cons_tres's per-job weight favours
//     more free GPUs up to the request: near = min(avail, want), and a
//     higher near ranks first.
//  2. Runs are maximal stretches of consecutive eligible nodes (in node
//     order) of equal Weight and near; an ineligible node, or one the job
//     may not use (another GPU type), ends a run.
//  3. Each round picks one unused run: the lowest Weight, then the highest
//     near, even when another run would complete the job; among equal
//     ranks a run that would complete the job (GPUs taken so far plus its
//     own) over one that would not, the smallest such run, or, while none
//     would, the largest.
//  4. From that run, the single node with the fewest free GPUs that
//     completes the job on its own, if any (best fit; the first in node
//     order on a tie); else its nodes in node order until the job is
//     complete. Rounds repeat until it is.
//  5. The chosen nodes, in node order, each give as many GPUs as they have
//     while leaving one for each chosen node after it (22.05); with
//     c.FillInChoiceOrder, in the order chosen, as many as the job still
//     needs (24.11).
//
// Slurm compares free CPUs in steps 3 and 4; the model has none and uses
// free GPUs, as jobs that ask CPUs in proportion to their GPUs make them
// agree. Slurm's retry without the nodes of fewest free resources, when
// the first pass fails, is not modelled: it finds an allocation only when
// this one does.
//
// With perNode > 0 it places a job that asks for want nodes with perNode
// GPUs each (`-N want --gres=gpu:perNode`): a node is eligible when it has
// perNode GPUs free, cons_tres's per-job weight does not apply (near is
// the same for every node: Weight alone ranks runs), a run completes the
// job when it has the nodes still needed, a job needing one more node
// takes the eligible node of the run with the fewest free GPUs, and each
// chosen node gives perNode GPUs.
func (c *Cluster) consTres(avail []int, want, perNode int, nodes []int) []Alloc {
	type run struct {
		nodes              []int
		weight, near, gpus int
		used               bool
	}
	// need(n) is what node n adds toward want: its GPUs, or one node.
	need := func(n int) int {
		if perNode > 0 {
			return 1
		}
		return avail[n]
	}
	var runs []*run
	var cur *run
	sum, prev := 0, -2
	for _, n := range nodes {
		if n != prev+1 { // a node the job may not use lies between: the run ends
			cur = nil
		}
		prev = n
		if avail[n] < max(1, perNode) {
			cur = nil
			continue
		}
		sum += need(n)
		near, weight := min(avail[n], want), c.Nodes[n].Weight
		if perNode > 0 {
			near = perNode
		}
		if cur == nil || cur.near != near || cur.weight != weight {
			cur = &run{weight: weight, near: near}
			runs = append(runs, cur)
		}
		cur.nodes = append(cur.nodes, n)
		cur.gpus += avail[n]
	}
	if sum < want {
		return nil
	}
	// has(r) is what run r adds toward want.
	has := func(r *run) int {
		if perNode > 0 {
			return len(r.nodes)
		}
		return r.gpus
	}
	var chosen []int // in the order chosen
	total := 0
	for total < want {
		var best *run
		bestDone := false
		for _, r := range runs {
			if r.used {
				continue
			}
			done := total+has(r) >= want
			same := best != nil && r.weight == best.weight && r.near == best.near
			switch {
			case best == nil, r.weight < best.weight, r.weight == best.weight && r.near > best.near,
				same && done && !bestDone,
				same && done && r.gpus < best.gpus,
				same && !done && !bestDone && r.gpus > best.gpus:
				best, bestDone = r, done
			}
		}
		best.used = true
		single := -1
		for _, n := range best.nodes {
			if total+need(n) >= want && (single < 0 || avail[n] < avail[single]) {
				single = n
			}
		}
		if single >= 0 {
			chosen = append(chosen, single)
			total += need(single)
			continue
		}
		for _, n := range best.nodes {
			chosen = append(chosen, n)
			if total += need(n); total >= want {
				break
			}
		}
	}
	out := make([]Alloc, 0, len(chosen))
	if perNode > 0 {
		slices.Sort(chosen)
		for _, n := range chosen {
			out = append(out, Alloc{n, perNode})
		}
		return out
	}
	given := 0
	if c.FillInChoiceOrder {
		for _, n := range chosen { // each was chosen while the job needed more
			g := min(avail[n], want-given)
			out = append(out, Alloc{n, g})
			given += g
		}
		slices.SortFunc(out, func(a, b Alloc) int { return a.Node - b.Node })
		return out
	}
	slices.Sort(chosen)
	for i, n := range chosen {
		g := min(avail[n], want-given-(len(chosen)-1-i))
		out = append(out, Alloc{n, g})
		given += g
	}
	return out
}
