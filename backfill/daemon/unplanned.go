package daemon

import (
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// mayStartSoon lists the squeue reasons of a waiting job that Slurm may
// start as soon as resources allow: "None" (not yet looked at, as every job
// is right after its submission), "Resources" and "Priority". Other
// reasons (held, a dependency, a begin time, an account or QOS limit, a
// node not available) keep it waiting whatever the daemon lends.
var mayStartSoon = []string{"None", "Resources", "Priority"}

// noteWaiting records when each job squeue lists as pending was first seen
// waiting (d.seenWaiting, by job id) and forgets jobs no longer listed or
// no longer pending. Every pending job counts, in whatever form it is
// listed: a user who renames a pending job into the extra job form and back
// (scontrol update lets them) must not have it seen anew, which would hold
// lends for another unplanned_hold (found by a tester). A daemon that
// restarts sees every waiting job anew, which holds more, not less.
func (d *Daemon) noteWaiting(v *View) {
	if d.seenWaiting == nil {
		d.seenWaiting = map[string]time.Time{}
	}
	for id, j := range v.All {
		if _, ok := d.seenWaiting[id]; !ok && j.State == "PENDING" {
			d.seenWaiting[id] = v.Now
		}
	}
	for id := range d.seenWaiting {
		if j, ok := v.All[id]; !ok || j.State != "PENDING" {
			delete(d.seenWaiting, id)
		}
	}
}

// unplannedJobs returns, of v's waiting jobs that Slurm has not planned
// yet (jobs: those pendingJob finds no planned start and nodes for), the
// ones that may start soon
// (mayStartSoon), each with the nodes it may start on and the GPUs it may
// need on each, for the planner's hold (planner.UnplannedJob). The nodes
// are those of one of its partitions, up and schedulable, within its
// --nodelist, outside its --exclude where that was read, and, for a
// request naming a GPU type (gres:gpu:v100:2), of that type. The GPUs per
// node are its TRES per node, else its whole TRES per job (it may all land
// on one node), else the whole node (no GPUs asked, or a request squeue's
// fields do not carry: what pendingJob reserves too). A job waiting only in
// extra.partition holds nothing: it is preemptible work, as lent GPUs are.
func (d *Daemon) unplannedJobs(v *View, jobs []slurmcli.Job) []planner.UnplannedJob {
	var out []planner.UnplannedJob
	// Jobs of one shape (partitions, node list, exclusions, request) share
	// one node list: a queue of thousands of just-submitted jobs has few
	// shapes, and the planner only reads the lists.
	shapes := map[string][]planner.NodeGPUs{}
	for _, j := range jobs {
		if !slices.Contains(mayStartSoon, j.Reason) {
			continue
		}
		seen, ok := d.seenWaiting[j.ID]
		if !ok {
			seen = v.Now
		}
		exc := "\x00" // placement not read
		if p, ok := v.Placements[j.ID]; ok {
			exc = p.ExcNodes
		}
		key := strings.Join([]string{j.Partition, j.ReqNodes, exc, j.TRESPerNode, j.TRESPerJob}, "\x00")
		nodes, ok := shapes[key]
		if !ok {
			nodes = d.unplannedNodes(v, j)
			shapes[key] = nodes
		}
		if len(nodes) > 0 {
			out = append(out, planner.UnplannedJob{ID: j.ID, Seen: seen.Unix(), Nodes: nodes})
		}
	}
	return out
}

// unplannedNodes are the nodes waiting job j may start on, with the GPUs
// it may need on each (see unplannedJobs).
func (d *Daemon) unplannedNodes(v *View, j slurmcli.Job) []planner.NodeGPUs {
	var out []planner.NodeGPUs
	r := requestedGPUs(j)
	on := d.possibleNodes(v, j)
	for _, n := range v.Nodes {
		if !on(n) || (len(r.types) > 0 && !slices.Contains(r.types, n.GPUType)) || (r.perNode && r.gpus > n.Total) {
			continue // not a node it can start on
		}
		// 0: the whole node; a count above the node's is the whole node too (the planner caps it).
		out = append(out, planner.NodeGPUs{Node: n.Name, GPUs: r.gpus})
	}
	return out
}

// gpuRequest is a pending job's GPU request as squeue's TRES fields give
// it: gpus GPUs per node (perNode) or in all (it may all land on one
// node), 0 when no GPUs are asked or the fields do not parse; types are
// the GPU types it names (none: any type).
type gpuRequest struct {
	gpus    int
	perNode bool
	types   []string
}

// requestedGPUs reads j's GPU request: TRES per node first, else per job.
func requestedGPUs(j slurmcli.Job) gpuRequest {
	for i, field := range []string{j.TRESPerNode, j.TRESPerJob} {
		list, err := slurmcli.ParseGRES(field)
		if err != nil {
			return gpuRequest{}
		}
		r := gpuRequest{gpus: slurmcli.GPUs(list), perNode: i == 0}
		if r.gpus == 0 {
			continue
		}
		for _, g := range list {
			if g.Name == "gpu" && g.Type != "" && !slices.Contains(r.types, g.Type) {
				r.types = append(r.types, g.Type)
			}
		}
		return r
	}
	return gpuRequest{}
}

// possibleNodes says whether waiting job j may start on a node as far as
// the daemon can tell without its GPUs: the node is schedulable, in one of
// j's partitions other than extra.partition (squeue prints several as
// "a,b"; in extra.partition it would be preemptible work, as lent GPUs
// are), within its --nodelist and outside its --exclude (when v.Placements
// holds it). A list that does not parse restricts nothing: the hold errs on
// the side of holding.
func (d *Daemon) possibleNodes(v *View, j slurmcli.Job) func(NodeView) bool {
	var excluded []string
	if p, ok := v.Placements[j.ID]; ok {
		excluded, _ = slurmcli.ExpandHostlist(p.ExcNodes)
	}
	places := d.placesJob(j, excluded)
	return func(n NodeView) bool { return n.Schedulable && places(n) }
}

// placesJob says whether job j may run on a node by its placement alone,
// whatever the node's state: the node is in one of j's partitions other
// than extra.partition, within its --nodelist and outside excluded (its
// --exclude, or the part of it the caller counts). possibleNodes and
// keep_off_pinned (keepOffMay) share it.
func (d *Daemon) placesJob(j slurmcli.Job, excluded []string) func(NodeView) bool {
	parts := slices.DeleteFunc(strings.Split(j.Partition, ","), func(p string) bool { return p == d.cfg.Extra.Partition })
	if len(parts) == 0 {
		return func(NodeView) bool { return false }
	}
	var only []string
	if j.ReqNodes != "" {
		only, _ = slurmcli.ExpandHostlist(j.ReqNodes)
	}
	return func(n NodeView) bool {
		return slices.ContainsFunc(n.Partitions, func(p string) bool { return slices.Contains(parts, p) }) &&
			(only == nil || slices.Contains(only, n.Name)) && !slices.Contains(excluded, n.Name)
	}
}
