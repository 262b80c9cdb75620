package daemon

import (
	"slices"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// peerMedian is planner.PeerMedian over the jobs that compete for the
// nodes this daemon manages: each running job on one of them (the
// daemon's own extra jobs aside) with its time left until its time limit
// ends (squeue EndTime), and each pending job the work bound counts
// (readDrain's filter: Slurm may start it soon, it is planned, and only
// managed nodes can run it) with its time limit. Jobs whose times cannot
// be read are left out. Every user's jobs count: queuing many short jobs
// only tightens the bound, so fewer jobs start ahead of their turn, as on
// a rigid cluster; long ones can loosen it no further than no bound, the
// rule before it. 0 when no job counts (no bound).
func (d *Daemon) peerMedian(v *View) time.Duration {
	if !v.peerMedianRead {
		v.peerMedian, v.peerMedianRead = d.readPeerMedian(v), true
	}
	return v.peerMedian
}

// readPeerMedian is peerMedian worked out from the view.
func (d *Daemon) readPeerMedian(v *View) time.Duration {
	managed := map[string]bool{}
	for _, n := range v.Nodes {
		if n.Managed {
			managed[n.Name] = true
		}
	}
	left := make([]float64, 0, len(v.Running)+len(v.Pending))
	for _, j := range v.Running {
		if j.Partition == d.cfg.Extra.Partition {
			continue
		}
		nodes, errNodes := slurmcli.ExpandHostlist(j.NodeList)
		end, errEnd := slurmcli.ParseTime(j.EndTime, d.snap.loc())
		if errNodes != nil || errEnd != nil || !slices.ContainsFunc(nodes, func(n string) bool { return managed[n] }) {
			continue
		}
		left = append(left, max(end.Sub(v.Now).Seconds(), 0))
	}
	for _, j := range v.Pending {
		q, ok := readQueued(j)
		if !ok || q.limit <= 0 || !slices.Contains(mayStartSoon, j.Reason) || !d.planned(j) || !d.managedCanRun(v, j, q) {
			continue
		}
		left = append(left, q.limit.Seconds())
	}
	return time.Duration(planner.PeerMedian(left) * float64(time.Second))
}
