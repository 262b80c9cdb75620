package daemon

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// admission is one shrink-to-admit the daemon applies, the planner's
// decision (planner.AdmitOnNodes) with the jobs it names: queued starts
// once every donor is shrunk to its ToNodes with its raised time limit.
type admission struct {
	queued slurmcli.Job
	// decision is the planner's; its Alloc is where the queued job is
	// expected to start (node, GPUs).
	decision planner.NodeAdmission
	donors   []donorShrink
}

// donorShrink is one running elastic job to shrink as the planner decided:
// from its current nodes to its first ToNodes (Slurm's `scontrol update
// NumNodes=` keeps the first nodes of the node list and releases the last
// ones), its time limit from OldLimit to NewLimit (whole minutes).
type donorShrink struct {
	job *ElasticJob
	planner.NodeShrink
}

// queuedRequest is what a pending job asks for, as squeue prints it.
type queuedRequest struct {
	nodes, perNode int
	gpuType        string
	limit          time.Duration
	// perJob: the GPUs are asked per job (TRES per job, --gpus=N), which
	// Slurm may spread over nodes unevenly.
	perJob bool
}

// readQueued returns what pending job j asks for: its node count (squeue's
// NumNodes, the minimum requested), GPUs per node (TRES-per-node, else the
// TRES-per-job count split evenly) with their type (from either), and its
// time limit. ok is false for a job asking no GPUs, an unreadable request,
// GPUs of several types per job, or no finite time limit (shrink-to-admit
// then does not consider it).
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
	q.perNode, q.perJob = total/j.Nodes, true
	// --gpus=TYPE:N (TRES per job) pins the job to a type as
	// --gres=gpu:TYPE:N does (a reviewer's finding: it read as untyped);
	// GPUs of several types are not one request the planner can place.
	if types := requestedGPUs(j).types; len(types) > 1 {
		return queuedRequest{}, false
	} else if len(types) == 1 {
		q.gpuType = types[0]
	}
	return q, true
}

// origNodes returns the node count of job j before its first
// shrink-to-admit (from the store), or cur when it was never shrunk. A
// record of another user (a reused job id) does not count, as for
// limitRaised.
func origNodes(records []backfillstore.AdmitShrink, j slurmcli.Job, cur int) int {
	for _, r := range records {
		if r.Job == j.ID && r.State != backfillstore.AdmitAbandoned && ownersRecord(r, j) {
			return r.OrigNodes
		}
	}
	return cur
}

// limitRaised is how much shrink-to-admit has raised the time limit of
// job j: the sum of the raises its records not abandoned name
// (NewLimit − OldLimit; an intent's may not be applied yet, and an admin
// may have lowered the limit since: both only make it more), at most limit.
// A record of another user (a reused job id) does not count. 0: never
// shrunk.
func limitRaised(records []backfillstore.AdmitShrink, j slurmcli.Job, limit time.Duration) time.Duration {
	var raised time.Duration
	for _, r := range records {
		if r.Job == j.ID && r.State != backfillstore.AdmitAbandoned && ownersRecord(r, j) {
			raised += max(r.NewLimit-r.OldLimit, 0)
		}
	}
	return min(raised, max(limit, 0))
}

// ownersRecord reports whether shrink-to-admit record r may be job j's:
// not another user's (compareOwner; a record whose owner cannot be told
// this cycle counts, which only raises the counts it adds to).
func ownersRecord(r backfillstore.AdmitShrink, j slurmcli.Job) bool {
	return r.User == "" || compareOwner(owner{r.User, r.UID}, j) != ownerOther
}

// planAdmission decides shrink-to-admit for this cycle: it translates the
// view into the planner's question (admitInput) and the planner's answer
// (planner.AdmitOnNodes, which holds every rule: the queue order, who may
// give up nodes and how many, whole nodes released from the end of the
// node list, the layout the queued job asked for, the raised time limits)
// into the jobs to change. in is the question, for the cycle's report; ok
// is false when no queued job can be admitted, with why per queued job.
func (d *Daemon) planAdmission(v *View, live map[string]*lent, records []backfillstore.AdmitShrink) (in planner.NodeAdmitInput, a admission, ok bool, why []string) {
	in = d.admitInput(v, live, records)
	if v.ReservationsUnread != nil {
		return in, a, false, []string{"Slurm's advance reservations cannot be read (" + v.ReservationsUnread.Error() + "): a donor's raised limit or the admitted job could reach into one"}
	}
	if v.PartitionsUnread != nil {
		return in, a, false, []string{"the partitions' PriorityTier cannot be read (" + v.PartitionsUnread.Error() + "): which pending jobs Slurm ranks ahead is unknown"}
	}
	dec, ok, why := planner.AdmitOnNodes(in)
	if !ok {
		return in, a, false, why
	}
	a.queued, a.decision = slurmJobCopy(v, dec.Queued), dec
	for _, sh := range dec.Shrinks {
		a.donors = append(a.donors, donorShrink{job: v.Elastic[sh.Job], NodeShrink: sh})
	}
	return in, a, true, why
}

// admitInput is the shrink-to-admit question this view asks: the nodes
// this daemon manages that Slurm may start jobs on, with the GPUs a
// starting job may take (GPUs of this daemon's running extra jobs count as
// free: extra.partition is preemptible, and Slurm preempts them when it
// starts the queued job); the pending jobs waiting for resources or their
// turn (admitCandidates: Reason Resources or Priority, in partitions where
// shrink-to-admit is on, in Slurm's priority order, each with the
// reservations of every other pending job); and every running elastic job as
// a possible donor.
func (d *Daemon) admitInput(v *View, live map[string]*lent, records []backfillstore.AdmitShrink) planner.NodeAdmitInput {
	c := d.cfg
	in := planner.NodeAdmitInput{Now: v.Now.Unix(), StartDelay: admitStartDelay(v), Speeds: c.Speeds, MaxLoss: c.Admit.MaxLoss,
		TimeLimit: c.TimeLimitRule()}
	if c.Admit.Rule == config.AdmitObjective {
		in.Objective = &planner.NodeObjective{Now: v.Now.Unix(), RescaleCost: c.RescaleCost.Duration, Others: d.othersLeft(v),
			Drain: d.drain(v), AdmitHorizon: c.Admit.Horizon, Allowance: c.Admit.Allowance}
	}
	lentOn := lentByNode(live, v, c.Extra.Partition)
	for _, n := range v.Nodes {
		if n.Managed && n.Schedulable {
			in.Nodes = append(in.Nodes, planner.AdmitNode{Name: n.Name, GPUType: n.GPUType, Total: n.Total, Free: freeGPUs(n, lentOn), Weight: n.Weight})
		}
	}
	for _, q := range d.admitCandidates(v) {
		queued := d.admitQueued(v, q)
		if q.aheadOnly != "" && queued.Refused == "" {
			if len(queued.Allowed) == 0 {
				continue // it may run on no managed node, so it takes no node freed here (the planner reads no Allowed as any node)
			}
			queued.Refused = q.aheadOnly
		}
		in.Queue = append(in.Queue, queued)
	}
	for _, id := range sortedIDs(v.Elastic) {
		in.Donors = append(in.Donors, d.admitDonor(v, v.Elastic[id], records))
	}
	return in
}

// admitQueued is pending job c.job as shrink-to-admit sees it: what it
// asks (readQueued), where it may run (queuedNodes: its partitions,
// --exclude, --nodelist) and the nodes the reservations of the other
// pending jobs name, with their earliest starts (c.reserved,
// admitCandidates). Refused says why the daemon
// cannot act for it.
func (d *Daemon) admitQueued(v *View, c admitCandidate) planner.NodeAdmitQueued {
	q := c.job
	out := planner.NodeAdmitQueued{ID: q.ID, User: v.ownerKey(q)}
	if c.aheadOnly == "" && d.cfg.Admit.Rule == config.AdmitObjective {
		out.PeerMedian = d.peerMedianFor(v, q) // only the objective bounds it
	}
	req, readable := readQueued(q)
	if !readable {
		out.Refused = "request or time limit not readable"
		return out
	}
	out.Nodes, out.GPUsPerNode, out.GPUType, out.Limit, out.PerJob = req.nodes, req.perNode, req.gpuType, req.limit, req.perJob
	may, why := d.queuedNodes(v, q)
	if why != "" {
		out.Refused = why
		if may == nil {
			return out
		}
	}
	out.OnlyNodes, _ = slurmcli.ExpandHostlist(q.ReqNodes) // queuedNodes parsed it
	for _, n := range v.Nodes {
		if may(n.Name) {
			out.Allowed = append(out.Allowed, n.Name)
		}
	}
	out.Reserved = c.reserved
	if at, err := slurmcli.ParseTime(q.StartTime, d.snap.loc()); err == nil {
		out.ReservedStart = at.Unix()
	}
	return out
}

// admitStartSlack is added to Slurm's bf_interval for how much later than
// the cycle's snapshot an admitted job may start: the shrink's updates and
// the backfill pass itself take time.
const admitStartSlack = 5 * time.Second

// admitStartDelay is how much later than v.Now an admitted job may start
// (planner.NodeAdmitInput.StartDelay): a job waiting its turn starts at
// Slurm's next backfill pass, up to bf_interval later (a tester saw an
// admitted job that would have ended 2.4 s before a maintenance
// reservation with bf_interval=30 stay pending, its donor shrunk for
// nothing), plus admitStartSlack.
func admitStartDelay(v *View) time.Duration {
	return cmp.Or(v.BackfillInterval, slurmcli.DefaultBackfillInterval) + admitStartSlack
}

// othersLeft is, for each running job that is not an elastic one (those
// are the donors, whose remaining time the planner computes), its owner
// and time left (the end of its time limit − now), for the objective's
// horizon (planner.NodeObjective.Others, planner.HorizonFor). A job whose
// end cannot be read counts as none.
func (d *Daemon) othersLeft(v *View) []planner.JobLeft {
	var out []planner.JobLeft
	for _, j := range v.Running {
		if _, elastic := v.Elastic[j.ID]; elastic {
			continue
		}
		if end, err := slurmcli.ParseTime(j.EndTime, d.snap.loc()); err == nil {
			out = append(out, planner.JobLeft{User: v.ownerKey(j), Left: end.Sub(v.Now)})
		}
	}
	return out
}

// admitDonor is running elastic job e as a possible donor: the facts
// planner.NotDonor checks, its node list in Slurm's order, its request's
// minimum, its node count before its first shrink-to-admit (the store),
// its start, time limit (and how much shrink-to-admit raised it, the
// store) and progress report.
func (d *Daemon) admitDonor(v *View, e *ElasticJob, records []backfillstore.AdmitShrink) planner.NodeAdmitDonor {
	out := planner.NodeAdmitDonor{ID: e.Job.ID, Facts: d.donorFacts(v, e), MinNodes: e.Request.MinNodes,
		OrigNodes: origNodes(records, e.Job, len(e.Base)), Cap: limitCap(v, e.Job.Partition), User: v.ownerKey(e.Job)}
	for _, b := range e.Base {
		out.Nodes = append(out.Nodes, planner.NodeGPUs{Node: b.Node, GPUs: b.GPUs})
	}
	start, errStart := slurmcli.ParseTime(e.Job.StartTime, d.snap.loc())
	limit, errLimit := slurmcli.ParseTimeLimit(e.Job.TimeLimit)
	if errStart != nil || errLimit != nil || e.End.IsZero() {
		out.Unreadable = true // no end: its time left would be −∞
		return out
	}
	out.Elapsed, out.TimeLeft, out.Limit = v.Now.Sub(start), e.End.Sub(v.Now), limit
	out.LimitRaised = limitRaised(records, e.Job, limit)
	if p := e.Progress; p != nil {
		out.Step, out.TotalSteps = p.Step, p.TotalSteps
	}
	out.LogicalWorkers = e.Request.LogicalWorkers
	return out
}

// slurmJobCopy returns pending job id as the view read it.
func slurmJobCopy(v *View, id string) slurmcli.Job {
	if j, ok := v.All[id]; ok {
		return j
	}
	for _, j := range v.Pending {
		if j.ID == id {
			return j
		}
	}
	return slurmcli.Job{ID: id}
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
		queued, ds.FromNodes, ds.ToNodes, strings.Join(ds.Released, ","), ds.OldLimit, ds.NewLimit,
		ds.Remaining.Round(time.Second), ds.FromNodes, ds.AtSmall.Round(time.Second), ds.ToNodes)
}

// donorFacts are what the view says of running job e for planner.NotDonor.
func (d *Daemon) donorFacts(v *View, e *ElasticJob) planner.DonorFacts {
	c := d.cfg
	composite, unread := v.compositeOf(e.Job.ID)
	return planner.DonorFacts{Elastic: e.Request.Elastic(), Ready: e.Ready, Rendezvous: e.Rendezvous, NotReady: e.NotReady, Managed: e.Managed,
		AdmitOn: c.AdmitOn(e.Job.Partition), Partition: e.Job.Partition, Nodes: len(e.Base), HasEnd: !e.End.IsZero(),
		GPUsPerJob: e.BaseGuessed, MixedTypesUnsafe: !d.mixedShrinkSafe && len(baseGPUTypes(v, e)) > 1,
		Composite: composite, CompositeUnread: unread}
}

// baseGPUTypes returns the GPU types of the nodes of e's base allocation
// as sinfo reported them (a node the view lacks counts as type "").
func baseGPUTypes(v *View, e *ElasticJob) map[string]bool {
	types := map[string]bool{}
	for _, b := range e.Base {
		typ := ""
		if n := v.node(b.Node); n != nil {
			typ = n.GPUType
		}
		types[typ] = true
	}
	return types
}
