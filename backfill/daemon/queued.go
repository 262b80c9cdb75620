package daemon

import (
	"cmp"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// queuedNodes says where queued job q may run apart from GPUs: on nodes of
// one of its partitions (squeue prints a job submitted to several as
// "a,b"), none of its --exclude, and only its --nodelist when it named
// one. why is non-empty, and may nil, when the daemon cannot tell or must
// not act for q: its placement was not read (v.Placements), it asks for
// node features (--constraint, which the daemon does not check), it must
// run in an advance reservation (--reservation: only that reservation's
// nodes, in its window) or asks for contiguous nodes (--contiguous), a
// node list does not parse, or it waits in extra.partition (preemptible
// work never shrinks another job or starts early). A job in an advance
// reservation is refused with may set all the same: the nodes of its
// reservation (every node its partitions allow for a FLEX one), where it
// may take nodes freed for a job ranked behind it (Slurm ranks such jobs
// first: planner.PriorityKey.InReservation); may is nil when the
// reservation was not read. A tester saw each of
// --reservation and --contiguous make the daemon shrink another user's job
// for a job Slurm then could not start. Shrink-to-admit and
// start-small act only on what this allows, so a job that excludes the
// nodes they would free makes no other job shrink.
func (d *Daemon) queuedNodes(v *View, q slurmcli.Job) (may func(node string) bool, why string) {
	parts := strings.Split(q.Partition, ",")
	if slices.Contains(parts, d.cfg.Extra.Partition) {
		return nil, "it waits in the preemptible partition " + d.cfg.Extra.Partition
	}
	p, ok := v.Placements[q.ID]
	if !ok {
		return nil, "its --exclude and --constraint could not be read"
	}
	return d.queuedNodesOf(v, q, p)
}

// queuedNodesOf is queuedNodes for q with placement p, read.
func (d *Daemon) queuedNodesOf(v *View, q slurmcli.Job, p slurmcli.Placement) (may func(node string) bool, why string) {
	parts := strings.Split(q.Partition, ",")
	if p.Features != "" {
		return nil, "it asks for node features (--constraint " + p.Features + "), which this daemon does not check"
	}
	if p.Reservation != "" {
		why := "it must run in advance reservation " + p.Reservation + " (--reservation), which this daemon does not plan for"
		return d.reservationNodes(v, q, p), why
	}
	if p.Contiguous {
		return nil, "it asks for contiguous nodes (--contiguous), which this daemon does not check"
	}
	excluded, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err != nil {
		return nil, "its --exclude does not parse"
	}
	var only []string
	if q.ReqNodes != "" {
		if only, err = slurmcli.ExpandHostlist(q.ReqNodes); err != nil {
			return nil, "its --nodelist does not parse"
		}
	}
	inPartition := map[string]bool{}
	for _, n := range v.Nodes {
		if slices.ContainsFunc(n.Partitions, func(p string) bool { return slices.Contains(parts, p) }) {
			inPartition[n.Name] = true
		}
	}
	return func(node string) bool {
		return inPartition[node] && !slices.Contains(excluded, node) && (only == nil || slices.Contains(only, node))
	}, ""
}

// reservationNodes says where pending job q, which must run in advance
// reservation p.Reservation, may take nodes: that reservation's nodes
// within its partitions, --exclude and --nodelist, or, for a FLEX
// reservation (its jobs may also use nodes outside it), every node those
// allow; nil when the reservation is not among v.Reservations (not read,
// or gone) or a node list does not parse.
func (d *Daemon) reservationNodes(v *View, q slurmcli.Job, p slurmcli.Placement) func(node string) bool {
	i := slices.IndexFunc(v.Reservations, func(r slurmcli.Reservation) bool { return r.Name == p.Reservation })
	if i < 0 {
		return nil
	}
	r := v.Reservations[i]
	p.Reservation = ""
	may, why := d.queuedNodesOf(v, q, p)
	if why != "" {
		return nil
	}
	if slices.Contains(r.Flags, "FLEX") {
		return may
	}
	in := make(map[string]bool, len(r.Nodes)) // asked once per node of the cluster
	for _, n := range r.Nodes {
		in[n] = true
	}
	return func(node string) bool { return in[node] && may(node) }
}

// waitingForResources are the pending jobs squeue shows waiting for
// resources (Reason "Resources"), in queue order (planner.QueueOrder:
// earliest planned start first, none planned after every planned one,
// then lowest id). The first is the queue head.
func (d *Daemon) waitingForResources(v *View) []slurmcli.Job {
	return d.waitingFor(v, "Resources")
}

// waitingFor are the pending jobs whose squeue Reason is one of reasons,
// in queue order (as waitingForResources).
func (d *Daemon) waitingFor(v *View, reasons ...string) []slurmcli.Job {
	var out []slurmcli.Job
	for _, j := range v.Pending {
		if slices.Contains(reasons, j.Reason) {
			out = append(out, j)
		}
	}
	return d.inQueueOrder(out)
}

// inQueueOrder sorts pending jobs in place in queue order
// (planner.QueueOrder) and returns them.
func (d *Daemon) inQueueOrder(out []slurmcli.Job) []slurmcli.Job {
	keys := make([]planner.QueueKey, len(out)) // each start parsed once, not at every comparison
	for i, j := range out {
		var at int64
		if t, err := slurmcli.ParseTime(j.StartTime, d.snap.loc()); err == nil {
			at = t.Unix()
		}
		keys[i] = planner.NewQueueKey(at, j.ID)
	}
	return sortJobsBy(out, func(a, b int) int { return keys[a].Compare(keys[b]) })
}

// sortJobsBy sorts jobs in place, stably, by cmp over their indexes in
// jobs as given (sorting indexes, then moving each record once: a
// slurmcli.Job is large), and returns them.
func sortJobsBy(jobs []slurmcli.Job, cmp func(a, b int) int) []slurmcli.Job {
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, cmp)
	sorted := make([]slurmcli.Job, len(jobs))
	for i, k := range order {
		sorted[i] = jobs[k]
	}
	copy(jobs, sorted)
	return jobs
}

// advanceReservation is the key under which reservations indexes Slurm's
// advance reservation name: a space never appears in a job id, so no job
// is taken for one.
func advanceReservation(name string) string { return "reservation " + name }

// liveReservations returns v's advance reservations that hold nodes and
// have not ended.
func (v *View) liveReservations() []slurmcli.Reservation {
	var out []slurmcli.Reservation
	for _, r := range v.Reservations {
		if r.End.After(v.Now) && len(r.Nodes) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// reservations indexes the reservations of v's pending jobs once (squeue
// --start: each job's planned start and SCHEDNODES), so that each queued
// job's "when do other jobs plan to start on each node" costs one pass
// over the reserved nodes rather than over the queue; and Slurm's advance
// reservations that have not ended (v.Reservations: their nodes from
// their start, already passed for an active one), under
// advanceReservation keys. A job in an advance reservation is kept off its
// nodes too (the daemon does not read which jobs may use it).
func (d *Daemon) reservations(v *View) *planner.Reservations[string, string] {
	if v.reservationIndex != nil {
		return v.reservationIndex
	}
	ri := planner.NewReservations[string, string]()
	v.reservationIndex = ri
	for _, r := range v.liveReservations() {
		ri.Add(advanceReservation(r.Name), r.Start.Unix(), r.Nodes)
	}
	for _, p := range v.Pending {
		pj, ok := pendingJob(p, d.snap.loc(), v.wholeNode)
		if !ok || len(pj.PlannedNodes) == 0 {
			continue
		}
		nodes := make([]string, len(pj.PlannedNodes))
		for i, ng := range pj.PlannedNodes {
			nodes[i] = ng.Node
		}
		ri.Add(p.ID, pj.PlannedStart, nodes)
	}
	return ri
}

// reservedByOthers returns the nodes, sorted, that the reservation of a
// pending job other than id (or an advance reservation) names, each with
// the earliest such start.
func reservedByOthers(ri *planner.Reservations[string, string], id string) []planner.ReservedNode {
	var out []planner.ReservedNode
	for n, start := range ri.Others(id) {
		out = append(out, planner.ReservedNode{Node: n, Start: start})
	}
	slices.SortFunc(out, func(a, b planner.ReservedNode) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// lentByNode counts the GPUs of this daemon's running extra jobs by node:
// idle for a queued job, since Slurm preempts extra.partition for it. A
// node that also runs any other job in extra.partition (v.All: a user's
// job, or one named like an extra job that this daemon did not submit)
// counts none: Slurm picks which preemptible job to requeue by its own
// order (with equal tiers, an older job first), so that job may go instead
// of the extra job and the GPUs the daemon counted on stay taken (a tester
// saw another user's job requeued so). A running job in extra.partition
// whose node list does not expand makes every node count none.
func lentByNode(live map[string]*lent, v *View, extraPartition string) map[string]int {
	out := map[string]int{}
	for _, l := range live {
		if !l.pending {
			out[l.rec.Node] += l.rec.GPUs
		}
	}
	if len(out) == 0 {
		return out
	}
	for id, j := range v.All {
		if j.State != "RUNNING" || j.Partition != extraPartition || live[id] != nil {
			continue
		}
		nodes, err := slurmcli.ExpandHostlist(j.NodeList)
		if err != nil {
			return map[string]int{}
		}
		for _, n := range nodes {
			delete(out, n)
		}
	}
	return out
}

// freeGPUs are node n's GPUs a queued job may have: idle ones plus those
// of this daemon's extra jobs there (lentOn, lentByNode).
func freeGPUs(n NodeView, lentOn map[string]int) int {
	return min(n.Total, max(0, n.Total-n.Used)+lentOn[n.Name])
}
