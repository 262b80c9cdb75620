package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// smallStart is one start-small the daemon applies, the planner's
// decision (planner.StartSmallOnNodes) with the job it names: queued job
// job, which asked for FromNodes, starts on ToNodes idle nodes with its
// time limit raised from OldLimit to NewLimit (whole minutes).
type smallStart struct {
	job        slurmcli.Job
	request    elastic.Request
	reservedAt time.Time
	planner.NodeStartSmall
}

// planStartSmall decides start-small for this cycle ([start_small]): the
// pending jobs waiting for resources, in planner.QueueOrder, are tried in
// turn and the first that may start small does (at most one per cycle);
// a job started small before (started, the store's records) is not tried.
// A job is tried when it is an elastic EasyScale job (its comment an
// es-req with a node range) in a partition where start-small is on, with
// a readable request and time limit and no --nodelist, whose placement
// (partitions, --exclude, --constraint) the daemon can check. The rest is
// the planner's (planner.StartSmallOnNodes: more nodes asked than its
// minimum, a planned start in the future, how many whole idle nodes of its
// GPU type no other job's reservation names, the rule, the raised time
// limit); GPUs of this daemon's extra jobs count as idle (Slurm preempts
// them). A job behind the queue head takes only nodes no reservation
// names either, so the head's reserved start cannot move. in is the
// question put to the planner for the job that started, else for the
// last job asked (nil when every job was refused before); ok is false
// with why (one reason per job) when none starts small.
func (d *Daemon) planStartSmall(v *View, live map[string]*lent, records []backfillstore.AdmitShrink,
	started map[string]backfillstore.StartedSmall) (in *planner.NodeStartSmallInput, s smallStart, ok bool, why string) {
	queue := d.waitingForResources(v)
	if len(queue) == 0 {
		return nil, s, false, "no job waits for resources"
	}
	if v.ReservationsUnread != nil {
		return nil, s, false, "Slurm's advance reservations cannot be read (" + v.ReservationsUnread.Error() + "): a job started small could reach into one"
	}
	var whys []string
	running := d.runningLeft(v, records)
	drain := d.drain(v)
	resv := d.reservations(v) // once per cycle: every job's "nodes others reserve" from one index
	// Weighed against every job that waits its turn: behind the first,
	// Slurm's Reason is Priority as often as Resources.
	weigh := startSmallWeighing{running: d.runningReleases(v), queued: d.queuedJobs(v, d.waitingFor(v, "Resources", "Priority"))}
	unplanned := "" // the first job so far whose reservation names no nodes
	asks := 0       // jobs put to the planner so far
	for i, q := range queue {
		who := "queued job " + q.ID
		if i == 0 {
			who = "queue head " + q.ID
		}
		// A job behind one whose reservation names no nodes (Slurm's
		// backfill has not planned it yet) cannot tell which idle nodes
		// that job will need: it waits.
		if unplanned != "" {
			whys = append(whys, who+": job "+unplanned+" ahead of it has no planned nodes (squeue --start), so the nodes it will need are unknown")
			continue
		}
		if len(resv.Nodes(q.ID)) == 0 {
			unplanned = q.ID
		}
		if rec, done := started[q.ID]; done && compareOwner(owner{rec.User, rec.UID}, q) != ownerOther {
			whys = append(whys, who+": it was started small before (start-small acts once per job: a raise is computed from its limit and node count, which its owner may set back)")
			continue
		}
		if asks == startSmallAsksPerCycle {
			whys = append(whys, fmt.Sprintf("%s and the jobs behind it: %d jobs were asked this cycle (start_small's bound per cycle)", who, asks))
			break
		}
		horizon := max(planner.HorizonFor(v.ownerKey(q), running), time.Duration(drain.Bound(v.ownerKey(q))*float64(time.Second)))
		asked, s, ok, why := d.startSmallOne(v, live, q, who, horizon, resv, weigh)
		if asked != nil {
			in = asked
			asks++
		}
		if ok {
			return in, s, true, ""
		}
		whys = append(whys, why)
	}
	return in, s, false, strings.Join(whys, "; ")
}

// startSmallOne asks the planner whether pending job q starts small now;
// who names it in the reasons.
func (d *Daemon) startSmallOne(v *View, live map[string]*lent, q slurmcli.Job, who string, horizon time.Duration,
	resv *planner.Reservations[string, string], weigh startSmallWeighing) (in *planner.NodeStartSmallInput, s smallStart, ok bool, why string) {
	c := d.cfg
	com, err := elastic.ParseComment(q.Comment)
	switch {
	case !c.StartSmallOn(q.Partition):
		return nil, s, false, who + ": start_small is off in its partition " + q.Partition
	case err != nil || com.Progress != nil || !com.Request.Elastic():
		return nil, s, false, who + ": not an elastic EasyScale request (es-req min= max=)"
	case q.ReqNodes != "":
		return nil, s, false, who + ": it names its nodes (--nodelist)"
	}
	may, no := d.queuedNodes(v, q)
	if no != "" {
		return nil, s, false, who + ": " + no
	}
	req, readable := readQueued(q)
	if !readable {
		return nil, s, false, who + ": request or time limit not readable"
	}
	in = &planner.NodeStartSmallInput{Rule: c.StartSmallRule(), Job: q.ID, AskedNodes: req.nodes, GPUsPerNode: req.perNode,
		GPUType: req.gpuType, Limit: req.limit, MinNodes: com.Request.MinNodes, MaxNodes: com.Request.MaxNodes,
		LogicalWorkers: com.Request.LogicalWorkers, Now: v.Now.Unix(), TimeLimit: c.TimeLimitRule(), Horizon: horizon,
		Cap: limitCap(v, q.Partition), Running: weigh.running, Queued: weigh.queued, PeerMedian: d.peerMedianFor(v, q)}
	reservedAt, errAt := slurmcli.ParseTime(q.StartTime, d.snap.loc())
	if errAt == nil {
		in.ReservedStart = reservedAt.Unix()
	}
	reserved := map[string]bool{}
	for n := range resv.Others(q.ID) {
		reserved[n] = true
	}
	lentOn := lentByNode(live, v, d.cfg.Extra.Partition)
	for _, n := range v.Nodes {
		in.Nodes = append(in.Nodes, planner.StartSmallNode{
			AdmitNode: planner.AdmitNode{Name: n.Name, GPUType: n.GPUType, Total: n.Total, Free: freeGPUs(n, lentOn), Weight: n.Weight},
			Usable:    n.Managed && n.Schedulable && may(n.Name), Reserved: reserved[n.Name], Closed: !n.Schedulable})
	}
	dec, ok, why := planner.StartSmallOnNodes(*in)
	if !ok {
		return in, s, false, why
	}
	return in, smallStart{job: q, request: com.Request, reservedAt: reservedAt, NodeStartSmall: dec}, true, ""
}

// startSmallAsksPerCycle bounds how many waiting jobs one cycle puts to
// planner.StartSmallOnNodes: each may weigh up to
// planner.CriticalDelayJobs queued jobs against the running jobs' limit
// ends, and anyone may queue many elastic jobs. The first in queue order
// are asked; the rest wait for a cycle in which fewer are ahead of them.
const startSmallAsksPerCycle = 64

// startSmallWeighing is what a start-small is weighed against, read once
// a cycle (planner.NodeStartSmallInput Running and Queued).
type startSmallWeighing struct {
	running []planner.NodeRelease
	queued  []planner.NodeQueuedJob
}

// queuedWeighed bounds how many waiting jobs a cycle reads for the
// weighing: the planner weighs the first planner.CriticalDelayJobs that
// may use a start's GPU type, so a 10,000-job queue is not parsed whole.
const queuedWeighed = 16 * planner.CriticalDelayJobs

// queuedJobs is the first queuedWeighed jobs of queue (waiting, in
// planner.QueueOrder) whose request and time limit read and that may start
// on some node (possibleNodes: its partitions, --nodelist, --exclude), each
// with those nodes: a job pinned to busy nodes is not delayed by a small
// start elsewhere (helper 38's finding).
func (d *Daemon) queuedJobs(v *View, queue []slurmcli.Job) []planner.NodeQueuedJob {
	var out []planner.NodeQueuedJob
	for _, j := range queue {
		if len(out) == queuedWeighed {
			break
		}
		r, ok := readQueued(j)
		if !ok {
			continue
		}
		may := d.possibleNodes(v, j)
		on := []string{}
		for _, n := range v.Nodes {
			if may(n) {
				on = append(on, n.Name)
			}
		}
		if len(on) > 0 {
			out = append(out, planner.NodeQueuedJob{Job: j.ID, Nodes: r.nodes, GPUsPerNode: r.perNode, GPUType: r.gpuType, Limit: r.limit, On: on, PerJob: r.perJob})
		}
	}
	return out
}

// runningReleases is every running job's own allocation (allocation:
// extra jobs are not in v.Running, their GPUs count as free) with the end
// of its time limit; a job without a readable end or node list is left
// out, as one that never ends.
func (d *Daemon) runningReleases(v *View) []planner.NodeRelease {
	var out []planner.NodeRelease
	for _, j := range v.Running {
		end, err := slurmcli.ParseTime(j.EndTime, d.snap.loc())
		if err != nil {
			continue
		}
		a, _, err := allocation(j)
		if err != nil {
			continue
		}
		r := planner.NodeRelease{At: end.Unix()}
		for _, n := range a {
			r.Nodes = append(r.Nodes, planner.NodeGPUs{Node: n.Node, GPUs: n.GPUs})
		}
		out = append(out, r)
	}
	return out
}

// runningLeft is every running job's owner and time left: the end of its
// time limit − now, for an elastic job its remaining time at its current
// size (planner.RemainingAtCurrentSize, from its progress report), its
// limit without what shrink-to-admit raised it by (records, limitRaised,
// as planner.AdmitOnNodes counts it). A queued job's start-small horizon
// (planner.NodeStartSmallInput) is the longest of those of other users
// (planner.HorizonFor).
func (d *Daemon) runningLeft(v *View, records []backfillstore.AdmitShrink) []planner.JobLeft {
	out := d.othersLeft(v)
	for _, id := range sortedIDs(v.Elastic) {
		e := v.Elastic[id]
		raised := time.Duration(0)
		if limit, err := slurmcli.ParseTimeLimit(e.Job.TimeLimit); err == nil {
			raised = limitRaised(records, e.Job, limit)
		}
		if left, ok := d.elasticLeft(v, e, raised); ok {
			out = append(out, planner.JobLeft{User: v.ownerKey(e.Job), Left: left})
		}
	}
	return out
}

// elasticLeft is running elastic job e's time left: its remaining time at
// its current size (planner.RemainingAtCurrentSize, from its progress
// report), or the end of its time limit − now without a report, its limit
// taken raised less (0: as it is); ok is false when its time limit is
// unlimited or unknown.
func (d *Daemon) elasticLeft(v *View, e *ElasticJob, raisedLess time.Duration) (left time.Duration, ok bool) {
	if e.End.IsZero() {
		return 0, false
	}
	left = max(e.End.Sub(v.Now)-raisedLess, 0)
	if start, err := slurmcli.ParseTime(e.Job.StartTime, d.snap.loc()); err == nil && e.Progress != nil {
		left = planner.RemainingAtCurrentSize(left, v.Now.Sub(start), e.Progress.Step, e.Progress.TotalSteps)
	}
	return left, true
}

// startSmall applies this cycle's start-small (planStartSmall, with the
// shrink-to-admit records read this cycle), when [start_small] is on
// somewhere: it re-reads the job by id (verifyQueued),
// records the decision, raises the time limit, then lowers the node count
// (`scontrol update`), and puts the old limit back if Slurm refuses the
// node count. It returns true when it changed the job, so that the cycle
// lends nothing on the state it read before. A dry run only logs.
func (d *Daemon) startSmall(ctx context.Context, v *View, live map[string]*lent, records []backfillstore.AdmitShrink,
	started map[string]backfillstore.StartedSmall, r *Report) (bool, error) {
	if d.cfg.StartSmallRule() == planner.StartSmallOff {
		return false, nil
	}
	in, s, ok, why := d.planStartSmall(v, live, records, started)
	if in != nil {
		r.StartSmallAsked = in
		if ok {
			r.StartSmallDecided = &s.NodeStartSmall
		}
	}
	log := d.log.Named("start_small")
	if !ok {
		log.Debug("not starting small", "why", why)
		return false, nil
	}
	log = log.With("job_id", s.job.ID)
	detail := fmt.Sprintf("start on %d of its %d nodes (minimum %d) now instead of at %s; time limit %d -> %d min (rule %s)",
		s.ToNodes, s.FromNodes, s.request.MinNodes, s.reservedAt.UTC().Format(time.RFC3339), minutes(s.OldLimit), minutes(s.NewLimit), d.cfg.StartSmall.Rule)
	if d.cfg.DryRun {
		log.Info("would start small (dry run)", "detail", detail)
		return false, d.decide(ctx, "start-small", s.job.ID, "", "", 0, detail+" (dry run)")
	}
	if why, err := d.verifyQueued(ctx, s); err != nil || why != "" {
		if err != nil {
			log.Error("re-reading the job before starting it small failed; leaving it", "error", err)
			return false, nil
		}
		log.Error("not starting small: Slurm's job is not the queued job the snapshot read", "why", why)
		return false, d.decide(ctx, "start-small-skip", s.job.ID, "", "", 0, why)
	}
	if err := d.decide(ctx, "start-small", s.job.ID, "", "", 0, detail); err != nil {
		return false, err
	}
	// Recorded before Slurm is changed: a job is started small once at
	// most, even if the daemon stops halfway (followStartedSmall).
	rec := backfillstore.StartedSmall{Job: s.job.ID, User: s.job.User, UID: s.job.UID, FromNodes: s.FromNodes, ToNodes: s.ToNodes,
		GPUs: gpusOn(s.job, s.ToNodes), OldLimit: s.OldLimit, NewLimit: time.Duration(minutes(max(s.NewLimit, s.OldLimit))) * time.Minute,
		At: v.Now}
	if err := d.db.PutStartedSmall(ctx, rec); err != nil {
		return false, err
	}
	if s.NewLimit > s.OldLimit {
		if err := d.resize.SetTimeLimit(ctx, s.job.ID, minutes(s.NewLimit)); err != nil {
			log.Error("raising the time limit failed; not starting small", "error", err)
			return false, nil
		}
	}
	if err := d.resize.SetNodes(ctx, s.job.ID, s.ToNodes); err != nil {
		log.Error("lowering the node count failed; putting the time limit back", "error", err)
		if s.NewLimit > s.OldLimit {
			if rerr := d.resize.SetTimeLimit(ctx, s.job.ID, minutes(s.OldLimit)); rerr != nil {
				log.Error("putting the time limit back failed", "error", rerr)
			}
		}
		return false, nil
	}
	r.StartedSmall = append(r.StartedSmall, s.job.ID)
	log.Info("started small", "detail", detail)
	return true, nil
}

// verifyQueued re-reads queued job s.job by id right before it is changed
// and returns why it must not be ("" when it may): it must still be pending
// for resources with the user, partition, node count and time limit the
// snapshot read, and its comment must still be the same elastic request.
// err is a failed squeue.
func (d *Daemon) verifyQueued(ctx context.Context, s smallStart) (string, error) {
	j, why, err := d.reReadJob(ctx, s.job.ID, "starting it small")
	if why != "" || err != nil {
		return why, err
	}
	if why := firstDifference("the snapshot read",
		fieldCheck{"state", j.State, "PENDING"}, fieldCheck{"user", j.User, s.job.User}, fieldCheck{"partition", j.Partition, s.job.Partition},
		fieldCheck{"time limit", j.TimeLimit, s.job.TimeLimit}, fieldCheck{"node count", fmt.Sprint(j.Nodes), fmt.Sprint(s.FromNodes)},
	); why != "" {
		return why, nil
	}
	c, err := elastic.ParseComment(j.Comment)
	if err != nil || !c.Request.Elastic() || c.Request.MinNodes != s.request.MinNodes || c.Request.MaxNodes != s.request.MaxNodes {
		return "its comment is no longer the elastic request the snapshot read", nil
	}
	return "", nil
}
