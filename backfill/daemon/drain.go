package daemon

import (
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// drain is this cycle's work bound (drain_horizon, planner.Drain; nil when
// it is off or no managed node has GPUs). Its capacity is the managed
// nodes' GPUs weighted by their type's speed ([speeds]; 1.0 for a type
// not listed). Its work, by owner:
//   - each running job's GPUs on managed nodes times its time left (an
//     elastic job's remaining time at its current size, from its progress
//     report, elasticLeft; another job's time limit end − now)
//     times the speed of the node's type;
//   - each pending job that asks for GPUs and that Slurm may start as soon
//     as resources allow (mayStartSoon: not held, not waiting for a
//     dependency, a begin time or a limit) and has planned (a START_TIME:
//     backfill plans a job only once its limits allow it), that may run
//     only on managed nodes (placesJob: its partitions, --nodelist and
//     --exclude as read this cycle; no --constraint) and that those nodes
//     can hold (enough nodes with its GPUs per node, of its type): its
//     GPUs times its time limit times the speed of its GPU type, or of
//     the slowest managed type when it names none, so that the
//     bound stays one the cluster cannot beat.
//
// A job whose GPUs, nodes or time cannot be read, or whose time limit is
// UNLIMITED, adds nothing: the bound only shrinks. So does a pending job
// Slurm will not run now or the managed nodes cannot run: anyone may queue
// one at no cost, and it would loosen the bound on other users' jobs
// (found by a tester: a held job, one with a begin time a year away, one
// waiting for a dependency or asking more nodes than its partition has
// let shrink-to-admit shrink another user's running job). It is read once
// per view (the cycle's admission and start-small share it).
func (d *Daemon) drain(v *View) *planner.Drain {
	if !d.cfg.DrainHorizon {
		return nil
	}
	if d.drainView != v {
		d.drainView, d.drainBound = v, d.readDrain(v)
	}
	return d.drainBound
}

// readDrain is drain's reading of v.
func (d *Daemon) readDrain(v *View) *planner.Drain {
	speed := func(typ string) float64 {
		if sp, ok := d.cfg.Speeds[typ]; ok && sp > 0 {
			return sp
		}
		return 1
	}
	dr := &planner.Drain{}
	managed := map[string]float64{} // managed node -> speed
	slowest := 0.0
	for _, n := range v.Nodes {
		if !n.Managed || n.Total < 1 {
			continue
		}
		sp := speed(n.GPUType)
		managed[n.Name] = sp
		dr.Capacity += float64(n.Total) * sp
		if slowest == 0 || sp < slowest {
			slowest = sp
		}
	}
	if dr.Capacity == 0 {
		return nil
	}
	for _, j := range v.Running {
		if e := v.Elastic[j.ID]; e != nil {
			left, ok := d.elasticLeft(v, e, 0)
			if !ok {
				continue
			}
			for _, b := range e.Base {
				if sp, ok := managed[b.Node]; ok {
					dr.Add(v.ownerKey(j), float64(b.GPUs)*left.Seconds()*sp)
				}
			}
			continue
		}
		gpus, err := j.GPUs()
		nodes, errNodes := slurmcli.ExpandHostlist(j.NodeList)
		end, errEnd := slurmcli.ParseTime(j.EndTime, d.snap.loc())
		if err != nil || gpus < 1 || errNodes != nil || len(nodes) == 0 || errEnd != nil {
			continue
		}
		perNode := float64(gpus) / float64(len(nodes))
		for _, n := range nodes {
			if sp, ok := managed[n]; ok {
				dr.Add(v.ownerKey(j), perNode*end.Sub(v.Now).Seconds()*sp)
			}
		}
	}
	for _, j := range v.Pending {
		q, ok := readQueued(j)
		if !ok || q.limit <= 0 || !slices.Contains(mayStartSoon, j.Reason) || !d.planned(j) || !d.managedCanRun(v, j, q) {
			continue
		}
		sp := slowest
		if q.gpuType != "" {
			sp = speed(q.gpuType)
		}
		dr.Add(v.ownerKey(j), float64(q.nodes*q.perNode)*q.limit.Seconds()*sp)
	}
	return dr
}

// managedCanRun reports whether pending job j, asking q, may run only on
// nodes this daemon manages (keepOffMay, with its --exclude as read this
// cycle) and enough of them have q's GPUs per node, of its type when it
// names one; false when its placement was not read (an array or
// heterogeneous job, or a cycle whose read failed) or it asks a
// --constraint.
func (d *Daemon) managedCanRun(v *View, j slurmcli.Job, q queuedRequest) bool {
	p, read := v.Placements[j.ID]
	if !read || p.Features != "" { // its --exclude unknown, or a --constraint: which nodes it may use is not known
		return false
	}
	excluded, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err != nil {
		return false
	}
	may, all := d.keepOffMay(v, j, excluded) // all: no node it may use is another daemon's or unmanaged
	if !all {
		return false
	}
	fit := 0
	for _, n := range v.Nodes {
		if may(n) && n.Total >= q.perNode && (q.gpuType == "" || n.GPUType == q.gpuType) {
			fit++
		}
	}
	return fit >= q.nodes
}
