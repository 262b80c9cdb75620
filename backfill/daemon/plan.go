package daemon

import (
	"cmp"
	"slices"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// lent is one live extra job as the planner and the actuator need it: the
// view of Slurm merged with the daemon's record.
type lent struct {
	rec     statedb.ExtraJob
	view    *ExtraView
	pending bool
	end     time.Time // when its GPUs are back (time limit, or signal + grace)
}

// plannerSnapshot turns the view and the live extra jobs into the planner's
// input. Units: seconds since the Unix epoch.
func (d *Daemon) plannerSnapshot(v *View, live map[string]*lent) planner.Snapshot {
	c := d.cfg
	s := planner.Snapshot{
		Now:    v.Now.Unix(),
		Speeds: c.Speeds,
		Limits: planner.Limits{
			MarginSeconds:       int64(c.SafetyMargin.Seconds()),
			MinLendSeconds:      int64(c.MinLend.Seconds()),
			MaxLendSeconds:      int64(c.MaxLend.Seconds()),
			MaxExtraGPUsPerJob:  c.Limits.MaxExtraGPUsPerJob,
			MaxExtraGPUsPerUser: c.Limits.MaxExtraGPUsPerUser,
			WasteCap:            c.Limits.WasteCap,
		},
	}
	pendingOn := map[string]int{} // GPUs of extra jobs submitted but not started, by node
	for _, l := range live {
		if l.pending {
			pendingOn[l.rec.Node] += l.rec.GPUs
		}
	}
	known := map[string]bool{}
	for _, n := range v.Nodes {
		idle := 0
		if n.Lendable {
			idle = max(0, n.Total-n.Used-pendingOn[n.Name])
		}
		s.Nodes = append(s.Nodes, planner.Node{Name: n.Name, GPUType: n.GPUType, Total: n.Total, Idle: idle})
		known[n.Name] = true
	}
	extrasOf := map[string][]planner.Extra{}
	for id, l := range live {
		if !known[l.rec.Node] || l.rec.GPUs < 1 {
			continue
		}
		extrasOf[l.rec.Parent] = append(extrasOf[l.rec.Parent],
			planner.Extra{ID: id, Node: l.rec.Node, GPUs: l.rec.GPUs, End: l.end.Unix()})
	}
	for _, j := range v.Running {
		s.Running = append(s.Running, d.runningJob(v, j, extrasOf[j.ID], known))
	}
	slices.SortFunc(s.Running, func(a, b planner.RunningJob) int { return cmp.Compare(a.ID, b.ID) })
	for _, j := range v.Pending {
		if p, ok := pendingJob(j, d.snap.loc()); ok {
			s.Pending = append(s.Pending, p)
		}
	}
	return s
}

func (d *Daemon) runningJob(v *View, j slurmcli.Job, extras []planner.Extra, known map[string]bool) planner.RunningJob {
	slices.SortFunc(extras, func(a, b planner.Extra) int { return cmp.Compare(a.ID, b.ID) })
	r := planner.RunningJob{ID: j.ID, Extras: extras}
	if end, ok := parseTime(j.EndTime, d.snap.loc()); ok {
		r.End = end.Unix()
	}
	e := v.Elastic[j.ID]
	if e == nil {
		if alloc, err := allocation(j); err == nil {
			for _, a := range alloc {
				r.Base = append(r.Base, planner.NodeGPUs{Node: a.Node, GPUs: a.GPUs})
			}
		}
		return r
	}
	r.User = e.User
	baseGPUs := 0
	for _, a := range e.Base {
		r.Base = append(r.Base, planner.NodeGPUs{Node: a.Node, GPUs: a.GPUs})
		baseGPUs += a.GPUs
	}
	if !d.growable(e, known) || baseGPUs == 0 {
		return r
	}
	perNode := max(1, baseGPUs/len(e.Base))
	lw := e.Request.LogicalWorkers
	if lw == 0 {
		lw = e.Request.MaxNodes * perNode
	}
	r.Elastic = true
	// One physical worker per GPU (own and lent: one task per GPU), at
	// most workerCap of them.
	r.MaxGPUs = max(baseGPUs, workerCap(e))
	r.MinGPUs = min(r.MaxGPUs, max(1, e.Request.MinNodes*perNode))
	r.Model = planner.DefaultModel(lw, baseGPUs)
	return r
}

// baseGPUs is the GPU count of job e's own allocation.
func baseGPUs(e *ElasticJob) int {
	n := 0
	for _, a := range e.Base {
		n += a.GPUs
	}
	return n
}

// workerCap is the most physical workers job e may have: its node range's
// maximum times its GPUs per node g (a physical worker is one task on one
// GPU; the request counts nodes of g GPUs), and at most its logical
// workers.
func workerCap(e *ElasticJob) int {
	perNode := 1
	if len(e.Base) > 0 {
		perNode = max(1, baseGPUs(e)/len(e.Base))
	}
	c := e.Request.MaxNodes * perNode
	if lw := e.Request.LogicalWorkers; lw > 0 {
		c = min(c, lw)
	}
	return c
}

// tasks is the number of physical workers an extra job runs: one per GPU
// (one for a CPU-only extra job).
func tasks(gpus int) int { return max(1, gpus) }

// growable: an elastic request, coordinator ready, every base node managed
// and known to the planner.
func (d *Daemon) growable(e *ElasticJob, known map[string]bool) bool {
	if !e.Request.Elastic() || !e.Ready || !e.Managed {
		return false
	}
	for _, b := range e.Base {
		if !known[b.Node] {
			return false
		}
	}
	return true
}

// pendingJob returns the reservation Slurm's backfill planned for j: its
// expected start and, per planned node (SchedNodes), the GPUs it asks per
// node. Jobs without a planned start or nodes, or asking no GPUs, reserve
// nothing the planner could lend.
func pendingJob(j slurmcli.Job, loc *time.Location) (planner.PendingJob, bool) {
	start, ok := parseTime(j.StartTime, loc)
	if !ok || j.SchedNodes == "" {
		return planner.PendingJob{}, false
	}
	names, err := expandHostlist(j.SchedNodes)
	if err != nil || len(names) == 0 {
		return planner.PendingJob{}, false
	}
	perNode, err := slurmcli.ParseGRES(j.TRESPerNode)
	if err != nil {
		return planner.PendingJob{}, false
	}
	g := slurmcli.GPUs(perNode)
	if g == 0 {
		total, err := j.GPUs()
		if err != nil || total == 0 {
			return planner.PendingJob{}, false
		}
		g = (total + len(names) - 1) / len(names)
	}
	p := planner.PendingJob{ID: j.ID, PlannedStart: start.Unix()}
	for _, n := range names {
		p.PlannedNodes = append(p.PlannedNodes, planner.NodeGPUs{Node: n, GPUs: g})
	}
	return p, true
}

// growOrder is one extra job to submit, derived from the planner's grows.
type growOrder struct {
	job             *ElasticJob
	node, gpuType   string
	gpus            int
	end             time.Time
	timeLimitMinute int64
}

// orders turns the planner's grows into extra jobs: grows of one job on one
// node merge into one extra job (ending at the earliest of their ends); the
// end is capped at the parent's own end (an extra job never outlives its
// job); the time limit is rounded down to whole minutes (Slurm's unit) and
// must reach min_lend; a job's physical workers (one per own GPU plus one
// per extra job's task, i.e. per lent GPU) never exceed workerCap: an order
// that would is trimmed to the workers left, or dropped. Placement follows
// spread (see there).
func (d *Daemon) orders(v *View, grows []planner.Grow, live map[string]*lent) (out []growOrder, skipped []string) {
	workers := map[string]int{}
	for _, l := range live {
		if l.rec.State != statedb.ExtraSignalled {
			workers[l.rec.Parent] += tasks(l.rec.GPUs)
		}
	}
	index := map[[2]string]int{}
	for _, g := range grows {
		e := v.Elastic[g.Job]
		if e == nil {
			continue
		}
		end := time.Unix(g.End, 0)
		if k, ok := index[[2]string{g.Job, g.Node}]; ok {
			out[k].gpus += g.GPUs
			if end.Before(out[k].end) {
				out[k].end = end
			}
			continue
		}
		index[[2]string{g.Job, g.Node}] = len(out)
		out = append(out, growOrder{job: e, node: g.Node, gpuType: g.GPUType, gpus: g.GPUs, end: end})
	}
	d.spread(v, out, live)
	kept := out[:0]
	for _, o := range out {
		if !o.job.End.IsZero() && o.job.End.Before(o.end) {
			o.end = o.job.End
		}
		o.timeLimitMinute = int64(o.end.Sub(v.Now) / time.Minute)
		limit := time.Duration(o.timeLimitMinute) * time.Minute
		room := workerCap(o.job) - max(1, baseGPUs(o.job)) - workers[o.job.Job.ID]
		switch {
		case o.timeLimitMinute < 1 || limit < d.cfg.MinLend.Duration:
			skipped = append(skipped, "job "+o.job.Job.ID+" on "+o.node+": lend shorter than min_lend after capping at the job's end")
		case room < 1:
			skipped = append(skipped, "job "+o.job.Job.ID+" on "+o.node+": at its maximum of physical workers")
		default:
			o.gpus = min(o.gpus, room)
			workers[o.job.Job.ID] += tasks(o.gpus)
			kept = append(kept, o)
		}
	}
	return kept, skipped
}

// spread moves an order off a node where its job already has a live extra
// job, onto another node of the same GPU type that is lendable, has the
// GPUs idle (after pending extra jobs and this cycle's other orders), has
// no pending job planned on it (so the planner's lend end holds there), and
// carries no extra job or order of that job. The planner fills nodes in
// order (longest lend first, then node order), which stacked a job's extra
// jobs on one node cycle after cycle while a whole node idled; spreading
// keeps one extra job per job per node, so a reservation on one node takes
// back fewer of a job's workers. With no such node the order stays
// (stacking beats not growing).
func (d *Daemon) spread(v *View, out []growOrder, live map[string]*lent) {
	has := map[[2]string]bool{} // job, node
	claimed := map[string]int{} // node → GPUs of pending extra jobs and orders
	for _, l := range live {
		if l.rec.State != statedb.ExtraSignalled {
			has[[2]string{l.rec.Parent, l.rec.Node}] = true
		}
		if l.pending {
			claimed[l.rec.Node] += l.rec.GPUs
		}
	}
	for _, o := range out {
		claimed[o.node] += o.gpus
	}
	reserved := map[string]bool{}
	for _, j := range v.Pending {
		if p, ok := pendingJob(j, d.snap.loc()); ok {
			for _, n := range p.PlannedNodes {
				reserved[n.Node] = true
			}
		}
	}
	for i := range out {
		o := &out[i]
		id := o.job.Job.ID
		if !has[[2]string{id, o.node}] {
			has[[2]string{id, o.node}] = true
			continue
		}
		for _, n := range v.Nodes {
			if n.GPUType != o.gpuType || !n.Lendable || reserved[n.Name] || has[[2]string{id, n.Name}] ||
				n.Total-n.Used-claimed[n.Name] < o.gpus {
				continue
			}
			d.log.Debug("spreading extra job", "job_id", id, "from", o.node, "node", n.Name, "gpus", o.gpus)
			claimed[o.node] -= o.gpus
			claimed[n.Name] += o.gpus
			o.node = n.Name
			break
		}
		has[[2]string{id, o.node}] = true
	}
}
