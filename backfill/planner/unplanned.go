package planner

// UnplannedJob is a waiting job that Slurm has not planned yet: squeue
// shows no expected start or no planned nodes (SchedNodes), as for every
// job in the seconds between its submission and the next backfill pass
// (SchedulerParameters bf_interval, 30 s by default; slurm.conf(5)).
// Until Slurm plans it, nothing says which of its possible nodes it will
// start on, so a lend onto any of them may take GPUs it starts on at the
// next pass (seen on the lab: a pinned job needing every v100 found one
// lent 0.2 s after its submission).
type UnplannedJob struct {
	// ID is the Slurm job id.
	ID string
	// Seen is when the caller first saw the job waiting, in seconds.
	Seen int64
	// Nodes are the nodes it may start on (its partitions, node list, GPU
	// type), each with the GPUs it may need there; 0 GPUs: all of the
	// node's (the request is unknown or not per node).
	Nodes []NodeGPUs
}

// heldForUnplanned returns, per node of idx, the GPUs that no grow may
// take this round: those the unplanned jobs seen less than
// Limits.UnplannedHoldSeconds ago may need (summed over jobs, at most the
// node's total). Only grows are held back: an extra job already running
// stays (Slurm preempts it if the job starts there), because the nodes
// are the job's possible ones, not its planned ones.
func (p *planning) heldForUnplanned() []int {
	hold := p.lim.UnplannedHoldSeconds
	if hold <= 0 || len(p.s.Unplanned) == 0 {
		return nil
	}
	held := make([]int, len(p.s.Nodes))
	for _, u := range p.s.Unplanned {
		if p.s.Now-u.Seen >= hold {
			continue
		}
		for _, ng := range u.Nodes {
			ni, ok := p.idx[ng.Node]
			if !ok {
				continue
			}
			total := p.s.Nodes[ni].Total
			g := ng.GPUs
			if g == 0 || g > total {
				g = total
			}
			held[ni] = min(total, held[ni]+g)
		}
	}
	return held
}
