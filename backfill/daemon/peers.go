package daemon

import (
	"slices"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// peerMedianFor is the peer median of pending job j
// (planner.Peers.MedianFor its owner, v.ownerKey): over the jobs that
// compete for the nodes this daemon manages, each running job on one of
// them (the daemon's own extra jobs aside) with its time left until its
// time limit ends (squeue EndTime), and each pending job the work bound
// counts (readDrain's filter: Slurm may start it soon, it is planned, and
// only managed nodes can run it) with its time limit, but the pending jobs
// of j's owner, j among them. Jobs whose times cannot be read are left
// out. Queuing many short jobs only tightens another user's bound, so
// fewer jobs start ahead of their turn, as on a rigid cluster; long ones
// can loosen it no further than no bound, the rule before it, and never
// the queuer's own (a tester's attack: queue long jobs, cancel them once
// one's own job is admitted). 0 when no job counts (no bound).
func (d *Daemon) peerMedianFor(v *View, j slurmcli.Job) time.Duration {
	if v.peers == nil {
		v.peers = d.readPeers(v)
	}
	return time.Duration(v.peers.MedianFor(v.ownerKey(j)) * float64(time.Second))
}

// readPeers is the jobs peerMedianFor counts, worked out from the view
// once a cycle.
func (d *Daemon) readPeers(v *View) *planner.Peers {
	managed := map[string]bool{}
	for _, n := range v.Nodes {
		if n.Managed {
			managed[n.Name] = true
		}
	}
	jobs := make([]planner.PeerJob, 0, len(v.Running)+len(v.Pending))
	for _, j := range v.Running {
		if j.Partition == d.cfg.Extra.Partition {
			continue
		}
		nodes, errNodes := slurmcli.ExpandHostlist(j.NodeList)
		end, errEnd := slurmcli.ParseTime(j.EndTime, d.snap.loc())
		if errNodes != nil || errEnd != nil || !slices.ContainsFunc(nodes, func(n string) bool { return managed[n] }) {
			continue
		}
		jobs = append(jobs, planner.PeerJob{Left: max(end.Sub(v.Now).Seconds(), 0)}) // a running job counts whoever owns it
	}
	for _, j := range v.Pending {
		q, ok := readQueued(j)
		if !ok || q.limit <= 0 || !slices.Contains(mayStartSoon, j.Reason) || !d.planned(j) || !d.managedCanRun(v, j, q) {
			continue
		}
		jobs = append(jobs, planner.PeerJob{User: v.ownerKey(j), Left: q.limit.Seconds(), Pending: true})
	}
	return planner.NewPeers(jobs)
}
