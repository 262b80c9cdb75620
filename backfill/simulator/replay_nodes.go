package simulator

import (
	"fmt"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// ReplayAdmit runs a shrink-to-admit question the daemon recorded
// (daemon.Recording's admit: its view of Slurm in plain values) through
// the planner function both the daemon and the simulator's replay use,
// planner.AdmitOnNodes, and applies the answer to a simulated cluster
// built from the question: every donor gives up the nodes it releases,
// which must be the last of its node list, and the queued job then takes
// its allocation, which must fit in the GPUs free on each node. It returns
// the answer (nil for no admission), so a test can check that the
// simulator's path decides what the daemon decided. Errors: a node listed
// twice (wrapping planner.ErrInvalidSnapshot), or an answer the simulated
// cluster cannot hold.
func ReplayAdmit(in planner.NodeAdmitInput) (*planner.NodeAdmission, error) {
	s, err := replayNodes(in.Nodes)
	if err != nil {
		return nil, err
	}
	a, ok, _ := planner.AdmitOnNodes(in)
	if !ok {
		return nil, nil
	}
	for _, sh := range a.Shrinks {
		i := slices.IndexFunc(in.Donors, func(d planner.NodeAdmitDonor) bool { return d.ID == sh.Job })
		if i < 0 || sh.ToNodes < 1 || sh.ToNodes+len(sh.Released) != len(in.Donors[i].Nodes) {
			return nil, fmt.Errorf("simulator: replay: shrink of job %q to %d nodes releasing %v does not fit its allocation", sh.Job, sh.ToNodes, sh.Released)
		}
		for k, b := range in.Donors[i].Nodes[sh.ToNodes:] {
			n, known := s.nodeIdx[b.Node]
			if !known || sh.Released[k] != b.Node {
				return nil, fmt.Errorf("simulator: replay: job %q releases %v, not the last nodes of its allocation", sh.Job, sh.Released)
			}
			s.nodes[n].free += b.GPUs
		}
	}
	for _, al := range a.Alloc {
		n, known := s.nodeIdx[al.Node]
		if !known || s.nodes[n].free < al.GPUs {
			return nil, fmt.Errorf("simulator: replay: queued job %q cannot take %d GPUs on node %q", a.Queued, al.GPUs, al.Node)
		}
		s.nodes[n].free -= al.GPUs
	}
	return &a, nil
}

// ReplayStartSmall runs a start-small question the daemon recorded
// (daemon.Recording's start_small) through planner.StartSmallOnNodes and
// applies the answer to a simulated cluster built from it: the job must
// find the nodes it starts on whole, idle and usable. It returns the
// answer (nil for none). Errors as for [ReplayAdmit].
func ReplayStartSmall(in planner.NodeStartSmallInput) (*planner.NodeStartSmall, error) {
	nodes := make([]planner.AdmitNode, len(in.Nodes))
	for i, n := range in.Nodes {
		nodes[i] = n.AdmitNode
	}
	s, err := replayNodes(nodes)
	if err != nil {
		return nil, err
	}
	d, ok, _ := planner.StartSmallOnNodes(in)
	if !ok {
		return nil, nil
	}
	left := d.ToNodes
	for i, n := range in.Nodes {
		nd := &s.nodes[i]
		if left > 0 && n.Usable && !n.Reserved && nd.free == nd.total && nd.total >= in.GPUsPerNode && (in.GPUType == "" || nd.typ == in.GPUType) {
			nd.free -= in.GPUsPerNode
			left--
		}
	}
	if left > 0 {
		return nil, fmt.Errorf("simulator: replay: job %q starts small on %d nodes, %d of them not whole and idle", d.Job, d.ToNodes, left)
	}
	return &d, nil
}

// replayNodes is a simulated cluster of nodes, their free GPUs as given.
func replayNodes(nodes []planner.AdmitNode) (*sim, error) {
	s := &sim{nodeIdx: map[string]int{}}
	for i, n := range nodes {
		if _, dup := s.nodeIdx[n.Name]; dup {
			return nil, fmt.Errorf("simulator: replay: node %q listed twice: %w", n.Name, planner.ErrInvalidSnapshot)
		}
		s.nodeIdx[n.Name] = i
		s.nodes = append(s.nodes, node{name: n.Name, typ: n.GPUType, total: n.Total, free: n.Free})
		s.total += n.Total
		s.allocated += n.Total - n.Free
	}
	return s, nil
}
