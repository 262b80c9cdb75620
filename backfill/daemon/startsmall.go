package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// smallStart is one start-small the daemon applies: queued job job, which
// asked for fromNodes, starts on toNodes idle nodes with its time limit
// raised from oldLimit to newLimit (whole minutes).
type smallStart struct {
	job                slurmcli.Job
	request            elastic.Request
	fromNodes, toNodes int
	oldLimit, newLimit time.Duration
	reservedAt         time.Time
}

// planStartSmall decides start-small for this cycle ([start_small]): the
// queue head (the pending job waiting for resources with the earliest
// planned start, then the lowest id, as planAdmission orders them) when it
// is an elastic EasyScale job (its comment an es-req with a node range)
// in a partition where start-small is on, asking more nodes than its
// minimum, with a readable request and time limit, no --nodelist, and a
// planned start in the future. It may start on whole idle nodes of its
// GPU type (GPUs of this daemon's extra jobs count as idle, Slurm preempts
// them) that no other pending job's reservation names, as many as there
// are up to one fewer than it asked for, never below its minimum, when
// planner.StartSmall says so under the configured rule: the job's work is
// its time limit at the size it asked for, its model the planner's
// default for its logical workers (planner.DefaultModel), one GPU type so
// speeds cancel. ok is false with why when it does not.
func (d *Daemon) planStartSmall(v *View, live map[string]*lent) (s smallStart, ok bool, why string) {
	c := d.cfg
	queue := d.waitingForResources(v)
	if len(queue) == 0 {
		return s, false, "no job waits for resources"
	}
	q := queue[0]
	com, err := elastic.ParseComment(q.Comment)
	switch {
	case !c.StartSmallOn(q.Partition):
		return s, false, "queue head " + q.ID + ": start_small is off in its partition " + q.Partition
	case err != nil || com.Progress != nil || !com.Request.Elastic():
		return s, false, "queue head " + q.ID + ": not an elastic EasyScale request (es-req min= max=)"
	case q.ReqNodes != "":
		return s, false, "queue head " + q.ID + ": it names its nodes (--nodelist)"
	}
	may, no := d.queuedNodes(v, q)
	if no != "" {
		return s, false, "queue head " + q.ID + ": " + no
	}
	req, readable := readQueued(q)
	if !readable {
		return s, false, "queue head " + q.ID + ": request or time limit not readable"
	}
	if req.nodes <= com.Request.MinNodes {
		return s, false, fmt.Sprintf("queue head %s: asks %d nodes, its minimum is %d", q.ID, req.nodes, com.Request.MinNodes)
	}
	reservedAt, errAt := slurmcli.ParseTime(q.StartTime, d.snap.loc())
	if errAt != nil || !reservedAt.After(v.Now) {
		return s, false, "queue head " + q.ID + ": no planned start in the future"
	}
	reserved := d.reservedNodes(v, q.ID)
	lentOn := lentByNode(live)
	var idle []string
	for _, n := range v.Nodes {
		if n.Managed && n.Schedulable && may(n.Name) && !reserved[n.Name] && freeGPUs(n, lentOn) == n.Total && n.Total >= req.perNode &&
			(req.gpuType == "" || n.GPUType == req.gpuType) {
			idle = append(idle, n.Name)
		}
	}
	k := min(len(idle), req.nodes-1)
	if k < com.Request.MinNodes {
		return s, false, fmt.Sprintf("queue head %s: %d whole idle nodes for it, its minimum is %d", q.ID, len(idle), com.Request.MinNodes)
	}
	lw := com.Request.LogicalWorkers
	if lw == 0 {
		lw = com.Request.MaxNodes * req.perNode
	}
	sq := planner.StartSmallRequest{Rule: c.StartSmallRule(), Model: planner.DefaultModel(lw, req.nodes*req.perNode),
		Work: req.limit.Seconds(), Now: v.Now.Unix(), ReservedStart: reservedAt.Unix(),
		AtRequest: []planner.SpeedCount{{Speed: 1, N: req.nodes * req.perNode}}, Small: []planner.SpeedCount{{Speed: 1, N: k * req.perNode}}}
	end, yes := planner.StartSmall(sq)
	if !yes {
		return s, false, fmt.Sprintf("queue head %s: on %d of its %d nodes it would end at %s, which rule %s does not allow (reserved start %s)",
			q.ID, k, req.nodes, time.Unix(end, 0).UTC().Format(time.RFC3339), c.StartSmall.Rule, reservedAt.UTC().Format(time.RFC3339))
	}
	// The job has not started: its remaining work is its whole limit at
	// the size it asked for (planner.RaisedTimeLimit, the rule
	// shrink-to-admit uses too).
	newLimit, _ := planner.RaisedTimeLimit(req.limit, 0, req.limit, req.nodes, k, c.TimeLimitRule())
	return smallStart{job: q, request: com.Request, fromNodes: req.nodes, toNodes: k, oldLimit: req.limit, newLimit: newLimit,
		reservedAt: reservedAt}, true, ""
}

// startSmall applies this cycle's start-small (planStartSmall), when
// [start_small] is on somewhere: it re-reads the job by id (verifyQueued),
// records the decision, raises the time limit, then lowers the node count
// (`scontrol update`), and puts the old limit back if Slurm refuses the
// node count. It returns true when it changed the job, so that the cycle
// lends nothing on the state it read before. A dry run only logs.
func (d *Daemon) startSmall(ctx context.Context, v *View, live map[string]*lent, r *Report) (bool, error) {
	if d.cfg.StartSmallRule() == planner.StartSmallOff {
		return false, nil
	}
	s, ok, why := d.planStartSmall(v, live)
	log := d.log.Named("start_small")
	if !ok {
		log.Debug("not starting small", "why", why)
		return false, nil
	}
	log = log.With("job_id", s.job.ID)
	detail := fmt.Sprintf("start on %d of its %d nodes (minimum %d) now instead of at %s; time limit %d -> %d min (rule %s)",
		s.toNodes, s.fromNodes, s.request.MinNodes, s.reservedAt.UTC().Format(time.RFC3339), minutes(s.oldLimit), minutes(s.newLimit), d.cfg.StartSmall.Rule)
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
	if s.newLimit > s.oldLimit {
		if err := d.resize.SetTimeLimit(ctx, s.job.ID, minutes(s.newLimit)); err != nil {
			log.Error("raising the time limit failed; not starting small", "error", err)
			return false, nil
		}
	}
	if err := d.resize.SetNodes(ctx, s.job.ID, s.toNodes); err != nil {
		log.Error("lowering the node count failed; putting the time limit back", "error", err)
		if s.newLimit > s.oldLimit {
			if rerr := d.resize.SetTimeLimit(ctx, s.job.ID, minutes(s.oldLimit)); rerr != nil {
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
	jobs, skipped, err := d.snap.Slurm.ListJobs(ctx, "--jobs="+s.job.ID, "--states=all")
	if noSuchJob(err) {
		return "Slurm no longer knows the job", nil
	}
	if err != nil {
		return "", fmt.Errorf("re-reading job %s before starting it small: %w", s.job.ID, err)
	}
	if slices.ContainsFunc(skipped, func(pe *slurmcli.ParseError) bool { return pe.ID == s.job.ID }) {
		return "its squeue record cannot be read", nil
	}
	for _, j := range jobs {
		if j.ID != s.job.ID {
			continue
		}
		for _, f := range []struct{ what, got, want string }{
			{"state", j.State, "PENDING"}, {"user", j.User, s.job.User}, {"partition", j.Partition, s.job.Partition},
			{"time limit", j.TimeLimit, s.job.TimeLimit}, {"node count", fmt.Sprint(j.Nodes), fmt.Sprint(s.fromNodes)},
		} {
			if f.got != f.want {
				return fmt.Sprintf("its %s is %q, the snapshot read %q", f.what, f.got, f.want), nil
			}
		}
		c, err := elastic.ParseComment(j.Comment)
		if err != nil || !c.Request.Elastic() || c.Request.MinNodes != s.request.MinNodes || c.Request.MaxNodes != s.request.MaxNodes {
			return "its comment is no longer the elastic request the snapshot read", nil
		}
		return "", nil
	}
	return "Slurm no longer knows the job", nil
}
