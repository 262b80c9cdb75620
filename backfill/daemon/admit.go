package daemon

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// admission is one shrink-to-admit the daemon applies: queued starts once
// every donor is shrunk to its ToNodes with its raised time limit.
type admission struct {
	queued slurmcli.Job
	// alloc is where the planner expects the queued job to start (node, GPUs).
	alloc  []NodeAlloc
	donors []donorShrink
}

// donorShrink is one running elastic job to shrink: from its current nodes
// to its first toNodes (Slurm's `scontrol update NumNodes=` keeps the
// first nodes of the node list and releases the last ones), its time limit
// from oldLimit to newLimit (whole minutes).
type donorShrink struct {
	job                *ElasticJob
	origNodes, toNodes int
	oldLimit, newLimit time.Duration
	released           []string
	remaining, atSmall time.Duration
}

// queuedRequest is what a pending job asks for, as squeue prints it.
type queuedRequest struct {
	nodes, perNode int
	gpuType        string
	limit          time.Duration
}

// readQueued returns what pending job j asks for: its node count (squeue's
// NumNodes, the minimum requested), GPUs per node (TRES-per-node, else the
// TRES-per-job count split evenly) with their type, and its time limit.
// ok is false for a job asking no GPUs, an unreadable request, or no
// finite time limit (shrink-to-admit then does not consider it).
func readQueued(j slurmcli.Job) (queuedRequest, bool) {
	limit, err := slurmcli.ParseTimeLimit(j.TimeLimit)
	if err != nil || j.Nodes < 1 {
		return queuedRequest{}, false
	}
	q := queuedRequest{nodes: j.Nodes, limit: limit}
	perNode, err := slurmcli.ParseGRES(j.TRESPerNode)
	if err != nil {
		return queuedRequest{}, false
	}
	if g := slurmcli.GPUs(perNode); g > 0 {
		q.perNode = g
		for _, r := range perNode {
			if r.Name == "gpu" && r.Type != "" {
				q.gpuType = r.Type
			}
		}
		return q, true
	}
	total, err := j.GPUs()
	if err != nil || total < 1 || total%j.Nodes != 0 {
		return queuedRequest{}, false
	}
	q.perNode = total / j.Nodes
	return q, true
}

// origNodes returns job id's node count before its first shrink-to-admit
// (from the store), or cur when it was never shrunk.
func origNodes(records []backfillstore.AdmitShrink, id string, cur int) int {
	for _, r := range records {
		if r.Job == id && r.State != backfillstore.AdmitAbandoned {
			return r.OrigNodes
		}
	}
	return cur
}

// planAdmission decides shrink-to-admit for this cycle: the first pending
// job waiting for resources (squeue Reason "Resources") in a partition
// where shrink-to-admit is on, by earliest planned start then id, that
// planner.Cluster.Admit can start now by shrinking donors by whole nodes
// (WholeNodes). Donors are running elastic EasyScale jobs of this daemon's
// managed nodes whose request was read, whose coordinator is up, on ≥ 2
// nodes, with a known end, in partitions where it is on, never below
// keepNodes and never on nodes another pending job's reservation names
// (their time limits grow). Because NumNodes= releases the last nodes of a
// job's node list, each donor's shrink is then turned into "keep the first
// N nodes" and the queued job's allocation is checked again on exactly the
// nodes that releases; the queued job's allocation must also be the layout
// it asked for (its node count, its GPUs per node). ok is false when no
// queued job can be admitted. GPUs of this daemon's running extra jobs
// count as free for the queued job: extra.partition is preemptible, and
// Slurm preempts them when it starts it.
func (d *Daemon) planAdmission(v *View, live map[string]*lent, records []backfillstore.AdmitShrink) (a admission, ok bool, why []string) {
	c := d.cfg
	var nodes []planner.Node
	idx := map[string]int{}
	for _, n := range v.Nodes {
		if n.Managed && n.Schedulable {
			idx[n.Name] = len(nodes)
			nodes = append(nodes, planner.Node{Name: n.Name, GPUType: n.GPUType, Total: n.Total})
		}
	}
	if len(nodes) == 0 {
		return a, false, nil
	}
	cluster := planner.NewCluster(nodes, c.Speeds)
	baseAvail := make([]int, len(nodes))
	lentOn := lentByNode(live)
	for i, n := range nodes {
		baseAvail[i] = freeGPUs(*v.node(n.Name), lentOn)
	}
	for _, q := range d.waitingForResources(v) {
		if !c.AdmitOn(q.Partition) {
			continue
		}
		req, readable := readQueued(q)
		if !readable {
			why = append(why, "queued job "+q.ID+": request or time limit not readable")
			continue
		}
		a, no := d.admitOne(v, records, cluster, idx, baseAvail, q, req)
		if no == "" {
			return a, true, why
		}
		why = append(why, "queued job "+q.ID+": "+no)
	}
	return a, false, why
}

func (d *Daemon) admitOne(v *View, records []backfillstore.AdmitShrink, cluster *planner.Cluster, idx map[string]int,
	baseAvail []int, q slurmcli.Job, req queuedRequest) (admission, string) {
	c := d.cfg
	keepOff := map[int]bool{}
	for name := range d.reservedNodes(v, q.ID) {
		if i, ok := idx[name]; ok {
			keepOff[i] = true
		}
	}
	may, why := d.queuedNodes(v, q)
	if why != "" {
		return admission{}, why
	}
	if q.ReqNodes != "" {
		names, _ := slurmcli.ExpandHostlist(q.ReqNodes) // queuedNodes parsed it
		for _, n := range names {
			if _, ok := idx[n]; !ok {
				return admission{}, "it asks for node " + n + ", which this daemon does not manage"
			}
		}
	}
	allowed := map[int]bool{} // the nodes the queued job may run on (partition, --exclude, --nodelist)
	for name, i := range idx {
		allowed[i] = may(name)
	}
	avail := slices.Clone(baseAvail)
	for i := range avail {
		if keepOff[i] || !allowed[i] {
			avail[i] = 0
		}
	}
	type cand struct {
		e         *ElasticJob
		orig      int
		keep      int
		start     time.Time
		remaining time.Duration
		limit     time.Duration
	}
	var cands []cand
	var donors []planner.Donor
	var skipped []string
	for _, id := range sortedIDs(v.Elastic) {
		e := v.Elastic[id]
		if no := planner.NotDonor(donorFacts(e, c)); no != "" {
			skipped = append(skipped, id+": "+no)
			continue
		}
		start, errStart := slurmcli.ParseTime(e.Job.StartTime, d.snap.loc())
		limit, errLimit := slurmcli.ParseTimeLimit(e.Job.TimeLimit)
		if errStart != nil || errLimit != nil {
			skipped = append(skipped, id+": start or time limit not readable")
			continue
		}
		orig := origNodes(records, id, len(e.Base))
		keep := planner.KeepAfterLoss(orig, e.Request.MinNodes, c.Admit.MaxLoss)
		if keep >= len(e.Base) {
			skipped = append(skipped, fmt.Sprintf("%s: at the fewest nodes it may keep (%d: its minimum, admit.max_loss of %d)", id, keep, orig))
			continue
		}
		perNode := baseGPUs(e) / len(e.Base)
		var base []planner.Alloc
		known := true
		for i := len(e.Base) - 1; i >= 0; i-- { // last node first: NumNodes= releases from the end
			n, ok := idx[e.Base[i].Node]
			if !ok {
				known = false
				break
			}
			base = append(base, planner.Alloc{Node: n, GPUs: e.Base[i].GPUs})
		}
		if !known || perNode < 1 {
			skipped = append(skipped, id+": a node unknown to the planner")
			continue
		}
		step, total := 0, 0
		if p := e.Progress; p != nil {
			step, total = p.Step, p.TotalSteps
		}
		remaining := planner.RemainingAtCurrentSize(e.End.Sub(v.Now), v.Now.Sub(start), step, total)
		if remaining.Seconds() <= req.limit.Seconds() {
			skipped = append(skipped, fmt.Sprintf("%s: %v left, less than the queued job's %v", id, remaining.Round(time.Second), req.limit))
		}
		cands = append(cands, cand{e: e, orig: orig, keep: keep, start: start, remaining: remaining, limit: limit})
		donors = append(donors, planner.Donor{Base: base, Min: keep * perNode, TimeLeft: remaining.Seconds()})
	}
	if len(donors) == 0 {
		return admission{}, "no donor: " + strings.Join(skipped, "; ")
	}
	rule := planner.FitRule{}
	if req.gpuType != "" {
		rule.Types = []string{req.gpuType}
	}
	want := req.nodes * req.perNode
	adm, ok := cluster.Admit(planner.AdmitRequest{Avail: avail, Want: want, Rule: rule, Work: req.limit.Seconds(),
		Donors: donors, KeepOff: func(n int) bool { return keepOff[n] }, WholeNodes: true})
	if !ok {
		return admission{}, "planner.Admit found no admission (reservations, time left, type, layout)" + strings.Join(append([]string{""}, skipped...), "; ")
	}
	// Nodes each donor gives up, as counts: NumNodes= releases its last ones.
	give := map[int]int{}
	for _, sh := range adm.Shrinks {
		give[sh.Donor]++
	}
	tent := slices.Clone(avail)
	out := admission{queued: slurmJobCopy(v, q)}
	for di, k := range give {
		cd := cands[di]
		to := len(cd.e.Base) - k
		if to < cd.keep {
			return admission{}, fmt.Sprintf("job %s would go below %d nodes", cd.e.Job.ID, cd.keep)
		}
		ds := donorShrink{job: cd.e, origNodes: cd.orig, toNodes: to, oldLimit: cd.limit, remaining: cd.remaining}
		for _, b := range cd.e.Base[to:] {
			i := idx[b.Node]
			if allowed[i] {
				tent[i] += b.GPUs
			}
			ds.released = append(ds.released, b.Node)
		}
		ds.newLimit, ds.atSmall = planner.RaisedTimeLimit(cd.limit, v.Now.Sub(cd.start), cd.remaining, len(cd.e.Base), to, c.TimeLimitRule())
		out.donors = append(out.donors, ds)
	}
	slices.SortFunc(out.donors, func(x, y donorShrink) int { return cmp.Compare(x.job.Job.ID, y.job.Job.ID) })
	alloc := cluster.Fit(tent, want, rule)
	if len(alloc) != req.nodes {
		return admission{}, "the released nodes do not hold it in the layout it asked for"
	}
	for _, al := range alloc {
		if al.GPUs != req.perNode {
			return admission{}, "the released nodes do not hold it in the layout it asked for"
		}
		out.alloc = append(out.alloc, NodeAlloc{Node: cluster.Nodes[al.Node].Name, GPUs: al.GPUs})
	}
	return out, ""
}

// slurmJobCopy returns the queued job as the view read it.
func slurmJobCopy(v *View, q slurmcli.Job) slurmcli.Job {
	if j, ok := v.All[q.ID]; ok {
		return j
	}
	return q
}

// schedulable: a node Slurm may start jobs on (idle, mixed, allocated or
// planned; not down, drained, failing or not responding).
func schedulable(state string) bool {
	switch strings.TrimRight(state, "*~#!%$@^-+") {
	case "idle", "mixed", "planned", "allocated":
		return !strings.HasSuffix(state, "*")
	}
	return false
}

// admitDetail describes a shrink for the decision log.
func admitDetail(ds donorShrink, queued string) string {
	return fmt.Sprintf("for job %s: %d -> %d nodes (releases %s), time limit %v -> %v (remaining %v at %d nodes is %v at %d)",
		queued, len(ds.job.Base), ds.toNodes, strings.Join(ds.released, ","), ds.oldLimit, ds.newLimit,
		ds.remaining.Round(time.Second), len(ds.job.Base), ds.atSmall.Round(time.Second), ds.toNodes)
}

// jobOrder orders numeric job ids numerically ("9" before "10").
func jobOrder(id string) string { return fmt.Sprintf("%020s", id) }

// donorFacts are what the view says of running job e for planner.NotDonor.
func donorFacts(e *ElasticJob, c *config.Config) planner.DonorFacts {
	return planner.DonorFacts{Elastic: e.Request.Elastic(), Ready: e.Ready, Rendezvous: e.Rendezvous, Managed: e.Managed,
		AdmitOn: c.AdmitOn(e.Job.Partition), Partition: e.Job.Partition, Nodes: len(e.Base), HasEnd: !e.End.IsZero()}
}
