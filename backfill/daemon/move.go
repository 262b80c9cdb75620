package daemon

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Mover requeues a running job so that it restarts elsewhere
// (move_to_faster).
type Mover interface {
	// Requeue runs `scontrol requeue ID`.
	Requeue(ctx context.Context, id string) error
}

// SlurmMover is the Mover over scontrol.
type SlurmMover struct{ Slurm slurmcli.Runner }

var _ Mover = (*SlurmMover)(nil)

// Requeue runs slurmcli.Runner.Requeue.
func (s *SlurmMover) Requeue(ctx context.Context, id string) error { return s.Slurm.Requeue(ctx, id) }

// movePlan is one running job to move: the nodes slower than its target
// (from: those it runs on, then the other slower nodes it may run on; it
// restarts without them), the nodes of a faster type it would run on (to,
// none of its own; their GPUs idle or lent to this daemon's extra jobs)
// and its GPUs.
type movePlan struct {
	job      *ElasticJob
	from, to []string
	gpus     int
	// extras are the job's extra jobs, all recorded by this daemon: the
	// move cancels them once Slurm has requeued the job.
	extras []backfillstore.ExtraJob
	// owner is the job's own excluded nodes (its --exclude, read while it
	// runs), which the move keeps and puts back.
	owner []string
	// afresh: a d1 job whose run starts over (startsOver) moved to another
	// GPU type, target; it restarts excluding every node of another type.
	afresh bool
	target string
}

// startsOver reports whether running job e is a d1 job that may be moved
// to another GPU type: its runtime's status comment says it starts the job
// over where its checkpoint was computed with other numerics
// (numerics=start-over, easyscale run --on-other-numerics=start-over) and
// counts its steps (Progress, for the work the move makes it redo). Its
// GPU type named at submission (--gres=gpu:TYPE:N) is checked with the
// other placement rules.
func startsOver(e *ElasticJob) bool {
	p := e.Progress
	return e.Request.Determinism == elastic.D1 && p != nil && p.StartsOver && p.TotalSteps > p.Step
}

// timeLeft is how long running job e has left, in seconds, at the pace it
// has kept: from its progress (steps done since its start, the runtime's
// status comment) and capped by its time limit; its time limit alone
// before the runtime reported. ok is false when neither is known.
func (d *Daemon) timeLeft(e *ElasticJob, now time.Time) (left float64, ok bool) {
	limit := math.Inf(1)
	if !e.End.IsZero() {
		limit = max(e.End.Sub(now).Seconds(), 0)
	}
	if p := e.Progress; p != nil && p.Step > 0 && p.TotalSteps >= p.Step {
		if start, err := slurmcli.ParseTime(e.Job.StartTime, d.snap.loc()); err == nil && now.After(start) {
			return min(now.Sub(start).Seconds()*float64(p.TotalSteps-p.Step)/float64(p.Step), limit), true
		}
	}
	return limit, !math.IsInf(limit, 1)
}

// planMoves decides this cycle's moves (move_to_faster), in job id order.
// A running elastic job qualifies when it is d2 or a d1 job whose run
// starts over (startsOver: then on one type, with the work it has done as
// planner.MoveRequest.Redo, excluding every node of another type), its nodes are all this
// daemon's and known (not BaseGuessed), its partition lets the daemon
// shrink running jobs (config.Config.ShrinkOn), every extra job Slurm
// lists for it under its owner is one this daemon recorded (ownExtras: the
// move cancels them), it was not moved before (moved), and its time left
// is known (timeLeft). Its pace now counts its running extra jobs when
// they run it faster (planner.Pace), as the simulator's move does.
// It must name no GPU type and no --nodelist, and placement (the job's
// --exclude and --constraint as squeue lists them under its own id; an
// array task or a heterogeneous job's component, which %i prints
// otherwise, reads as none: slurmcli.Runner.JobPlacement) must read,
// with no --constraint. Its target is the fewest nodes of GPU types on
// which it runs faster than on the slowest of its own (its speeds: es-req
// speeds= or the configured table), fastest type first, whose idle GPUs
// plus those of this daemon's running extra jobs there (in the preemptible
// extra.partition: Slurm preempts them for the moved job, as for an
// admitted one; none on a node where another job runs in extra.partition,
// lentByNode) hold its GPUs per node, that are schedulable, none of its
// own, in one of its partitions and outside its --exclude, and on which no
// pending job may start (a job naming another type aside); it restarts
// excluding every slower node it may run on. A job with started extra
// jobs is weighed at the GPUs it holds with them (at most its maximum) on
// the fewest nodes of one such type that hold that many, when there are
// (it restarts on its own node count and the next cycles grow it onto the
// rest when it is still idle: nothing holds it; BENCHMARKS.md E55). planner.MoveToFaster then
// weighs its time left there and here, the move's cost (move_cost) and the
// longest time left of the other running jobs. Pure translation: the rule
// is the planner's; placement is asked only for jobs that pass the other
// checks.
func (d *Daemon) planMoves(v *View, ps planner.Snapshot, live map[string]*lent, moved map[string]backfillstore.Moved,
	placement func(id string) (slurmcli.Placement, bool)) []movePlan {
	idle := map[string]int{} // idle GPUs and those of this daemon's running extra jobs, which Slurm preempts for the moved job
	lentOn := lentByNode(live, v, d.cfg.Extra.Partition)
	for _, n := range ps.Nodes {
		idle[n.Name] = min(n.Total, n.Idle+lentOn[n.Name])
	}
	var wanted map[string]bool // nodesPendingJobsMayUse, worked out for the first candidate only: it walks every pending job
	lefts := map[string]float64{}
	for id, e := range v.Elastic {
		if l, ok := d.timeLeft(e, v.Now); ok {
			lefts[id] = l
		}
	}
	var plans []movePlan
	for _, r := range ps.Running {
		e := v.Elastic[r.ID]
		left, known := lefts[r.ID]
		afresh := e != nil && startsOver(e)
		if afresh {
			r.GPUTypes = nil // its checkpoint pins it to no type: it starts over on the one it moves to
		}
		if e == nil || !r.Elastic || (e.Request.Determinism != elastic.D2 && !afresh) || e.BaseGuessed || !e.Managed || !known ||
			!d.cfg.ShrinkOn(e.Job.Partition) || len(r.Base) == 0 {
			continue
		}
		if _, done := moved[r.ID]; done || e.Job.ReqNodes != "" {
			continue
		}
		extras, ours := ownExtras(v, e, live)
		if !ours {
			continue
		}
		if q, ok := readQueued(e.Job); !ok || q.gpuType != "" {
			continue // --gres=gpu:TYPE:N: it runs on that type alone
		}
		perNode, gpus, slowest := 0, 0, math.Inf(1)
		var now []planner.SpeedCount
		own := map[string]float64{} // its nodes, with its speed there
		for _, b := range r.Base {
			n := v.node(b.Node)
			if n == nil {
				own = nil
				break
			}
			sp := r.SpeedOf(n.GPUType, ps.Speeds)
			slowest, perNode, gpus = min(slowest, sp), max(perNode, b.GPUs), gpus+b.GPUs
			now = planner.AddSpeedCount(now, sp, b.GPUs)
			own[b.Node] = sp
		}
		if own == nil || perNode == 0 || len(d.fasterIdle(v, r, ps.Speeds, idle, slowest, perNode)) == 0 {
			continue
		}
		p, ok := placement(r.ID)
		if !ok || p.Features != "" {
			continue
		}
		owner, err := slurmcli.ExpandHostlist(p.ExcNodes)
		if err != nil {
			continue
		}
		may := d.placesJob(e.Job, owner)
		if wanted == nil {
			wanted = d.nodesPendingJobsMayUse(v)
		}
		to, toSpeeds := d.moveTarget(v, r, ps.Speeds, idle, wanted, own, may, slowest, perNode, len(r.Base))
		if to == nil {
			continue
		}
		// Weighed at the GPUs it holds, its started extra jobs' included (at
		// most its maximum), when nodes of a faster type hold that many: it
		// restarts on its own node count there, and the next cycles grow it
		// onto the rest as onto any idle GPUs (the simulator's move does the
		// same: BENCHMARKS.md E55).
		if held := min(gpus+startedGPUs(extras), r.MaxGPUs); held > gpus && !afresh {
			if more, sp := d.moveTarget(v, r, ps.Speeds, idle, wanted, own, may, slowest, perNode, (held+perNode-1)/perNode); more != nil {
				to, toSpeeds = more, []planner.SpeedCount{{Speed: sp[0].Speed, N: held}}
			}
		}
		// It restarts without its nodes slower than the target and without
		// every other slower node it may run on, so that Slurm starts it on
		// the faster ones (preempting extra jobs there) and not on other
		// idle slow nodes.
		var from []string
		for _, b := range r.Base {
			if own[b.Node] < toSpeeds[0].Speed {
				from = append(from, b.Node)
			}
		}
		target := v.node(to[0]).GPUType
		for _, n := range v.Nodes {
			sp := r.SpeedOf(n.GPUType, ps.Speeds)
			other := sp < toSpeeds[0].Speed || (afresh && n.GPUType != target) // a d1 job restarts on one type
			if !mine(own, n.Name) && n.Managed && may(n) && sp > 0 && other {
				from = append(from, n.Name)
			}
		}
		now = planner.Pace(r.Model, now, withExtras(now, extras, func(node string) float64 {
			if n := v.node(node); n != nil {
				return r.SpeedOf(n.GPUType, ps.Speeds)
			}
			return 0
		}))
		q := planner.MoveRequest{Model: r.Model, Now: now, To: toSpeeds, Cost: d.cfg.MoveCost.Seconds()}
		tp, _ := r.Model.Throughput(now)
		q.Work = left * tp / float64(r.Model.RefGPUs)
		for id, l := range lefts {
			if id != r.ID {
				q.Longest = max(q.Longest, l)
			}
		}
		if afresh { // the work done, at the pace of the work left
			p := e.Progress
			q.Redo = q.Work * float64(p.Step) / float64(p.TotalSteps-p.Step)
		}
		if !planner.MoveToFaster(q) {
			continue
		}
		mp := movePlan{job: e, from: from, to: to, gpus: gpus, owner: owner, afresh: afresh}
		if afresh {
			mp.target = target
		}
		for _, x := range extras {
			mp.extras = append(mp.extras, x.rec)
		}
		plans = append(plans, mp)
		for _, n := range to { // one job per idle node a cycle
			idle[n] = 0
		}
	}
	return plans
}

// startsOverOf is "as read" unless a move of a d1 job that starts over
// (afresh) finds comment no longer saying numerics=start-over.
func startsOverOf(comment string, afresh bool) string {
	if c, err := elastic.ParseComment(comment); !afresh || (err == nil && c.Progress != nil && c.Progress.StartsOver) {
		return "as read"
	}
	return "withdrawn"
}

// mine reports whether node is one of own's.
func mine(own map[string]float64, node string) bool {
	_, ok := own[node]
	return ok
}

// moveTarget picks nodes nodes for running job r, perNode idle GPUs each,
// none of its own, all of the fastest of its types on which it runs
// faster than slowest that has enough of them, by name; nil when none
// does.
func (d *Daemon) moveTarget(v *View, r planner.RunningJob, speeds map[string]float64, idle map[string]int, wanted map[string]bool,
	own map[string]float64, may func(NodeView) bool, slowest float64, perNode, nodes int) ([]string, []planner.SpeedCount) {
	byType := map[string][]string{}
	for _, n := range v.Nodes {
		_, mine := own[n.Name]
		if mine || !may(n) || !n.Managed || !n.Schedulable || wanted[n.Name] || idle[n.Name] < perNode || n.GPUType == "" {
			continue
		}
		if len(r.GPUTypes) > 0 && !slices.Contains(r.GPUTypes, n.GPUType) {
			continue
		}
		if r.SpeedOf(n.GPUType, speeds) > slowest {
			byType[n.GPUType] = append(byType[n.GPUType], n.Name)
		}
	}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b string) int {
		if c := cmp.Compare(r.SpeedOf(b, speeds), r.SpeedOf(a, speeds)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, t := range types {
		if names := byType[t]; len(names) >= nodes {
			slices.Sort(names)
			return names[:nodes], []planner.SpeedCount{{Speed: r.SpeedOf(t, speeds), N: nodes * perNode}}
		}
	}
	return nil, nil
}

// fasterIdle is the managed, schedulable nodes with perNode idle GPUs of
// a type on which running job r runs faster than slowest: a cheap first
// check before its placement is read.
func (d *Daemon) fasterIdle(v *View, r planner.RunningJob, speeds map[string]float64, idle map[string]int, slowest float64, perNode int) []string {
	var out []string
	for _, n := range v.Nodes {
		if n.Managed && n.Schedulable && n.GPUType != "" && idle[n.Name] >= perNode && r.SpeedOf(n.GPUType, speeds) > slowest {
			out = append(out, n.Name)
		}
	}
	return out
}

// nodesPendingJobsMayUse is the set of nodes some pending job other than
// an extra job may start on (its partitions, --nodelist, --exclude when
// read), its GPU type aside: those GPUs are the queue's, and a move must
// not take them.
func (d *Daemon) nodesPendingJobsMayUse(v *View) map[string]bool {
	out := map[string]bool{}
	for _, j := range v.Pending {
		var excluded []string
		if p, ok := v.Placements[j.ID]; ok {
			excluded, _ = slurmcli.ExpandHostlist(p.ExcNodes)
		}
		typ := ""
		if q, ok := readQueued(j); ok {
			typ = q.gpuType
		}
		places := d.placesJob(j, excluded)
		for _, n := range v.Nodes {
			if places(n) && (typ == "" || typ == n.GPUType) {
				out[n.Name] = true
			}
		}
	}
	return out
}

// ownExtras is job e's extra jobs recorded by this daemon (live, by id),
// and whether they are all it has: ok is false when Slurm lists a live
// extra job of e's owner's with e's id as parent that this daemon did not
// record (its workers would lose their job, and it is not the daemon's to
// cancel). Another user's job that only looks like e's extra job (its
// name and comment are the user's to set) does not stop e's move.
func ownExtras(v *View, e *ElasticJob, live map[string]*lent) (ls []*lent, ok bool) {
	for _, x := range v.Extras {
		if x.Parent == e.Job.ID && sameOwner(x.Job, e.Job) && live[x.Job.ID] == nil {
			return nil, false
		}
	}
	for _, l := range live {
		if l.rec.Parent == e.Job.ID {
			ls = append(ls, l)
		}
	}
	slices.SortFunc(ls, func(a, b *lent) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
	return ls, true
}

// startedGPUs is the GPUs of extras that Slurm started (a pending one holds
// none).
func startedGPUs(extras []*lent) int {
	g := 0
	for _, x := range extras {
		if !x.pending {
			g += x.rec.GPUs
		}
	}
	return g
}

// withExtras is base plus the GPUs of job's running extra jobs (on their
// nodes, at speedOn's speed; a pending one or an unknown node adds none):
// what planner.Pace weighs against base.
func withExtras(base []planner.SpeedCount, extras []*lent, speedOn func(node string) float64) []planner.SpeedCount {
	all := slices.Clone(base)
	for _, x := range extras {
		if sp := speedOn(x.rec.Node); !x.pending && sp > 0 && x.rec.GPUs > 0 {
			all = planner.AddSpeedCount(all, sp, x.rec.GPUs)
		}
	}
	return all
}

// moveToFaster applies this cycle's moves (move_to_faster): each job is
// re-read by id first and left alone when its state, nodes, owner,
// partition or request changed since the snapshot; the move is recorded
// in state_db (moved, state requeued) before `scontrol requeue`, and once
// the job waits its excluded nodes become its owner's plus every node
// slower than the target it may run on, its own included (state
// excluded), so that Slurm restarts it on the faster ones. A requeue
// Slurm refuses (--no-requeue) ends the move: the job runs on, and is not
// tried again. It reports whether an allocation changed. Only a database
// error is returned.
func (d *Daemon) moveToFaster(ctx context.Context, v *View, ps planner.Snapshot, live map[string]*lent, r *Report) (bool, error) {
	if !d.cfg.MoveToFaster {
		return false, nil
	}
	moved, err := d.db.MovedJobs(ctx)
	if err != nil {
		return false, err
	}
	for id := range d.moveTried { // forget the jobs no longer running: the map stays as small as the running jobs
		if v.Elastic[id] == nil {
			delete(d.moveTried, id)
		}
	}
	placement := func(id string) (slurmcli.Placement, bool) {
		p, ok, err := d.snap.Slurm.JobPlacement(ctx, id)
		if err != nil {
			d.log.Named("move").Warn("reading a running job's excluded nodes failed; not moving it this cycle", "job_id", id, "error", err)
			return slurmcli.Placement{}, false
		}
		return p, ok
	}
	changed := false
	for _, p := range d.planMoves(v, ps, live, moved, placement) {
		id := p.job.Job.ID
		log := d.log.Named("move").With("job_id", id, "from", strings.Join(p.from, ","), "to", strings.Join(p.to, ","))
		detail := fmt.Sprintf("requeue it to restart without %s (faster GPUs, idle or lent, on %s end it sooner)", strings.Join(p.from, ","), strings.Join(p.to, ","))
		if p.afresh {
			detail += fmt.Sprintf("; a d1 job, it starts over from step 0 on %s (numerics=start-over)", p.target)
		}
		if len(p.extras) > 0 {
			detail += fmt.Sprintf("; its %d extra jobs cancelled once it waits", len(p.extras))
		}
		if d.cfg.DryRun {
			if d.moveTried[id] {
				continue
			}
			if d.moveTried == nil {
				d.moveTried = map[string]bool{}
			}
			d.moveTried[id] = true
			log.Info("would move the job to faster GPUs (dry run)")
			if err := d.decide(ctx, "move", id, "", strings.Join(p.to, ","), p.gpus, detail+" (dry run)"); err != nil {
				return changed, err
			}
			continue
		}
		j, why, err := d.reReadJob(ctx, id, "moving it to faster GPUs")
		if err == nil && why == "" {
			why = firstDifference("the snapshot read",
				fieldCheck{"state", j.State, "RUNNING"},
				fieldCheck{"node list", j.NodeList, p.job.Job.NodeList},
				fieldCheck{"owner", j.User, p.job.Job.User},
				fieldCheck{"partition", j.Partition, p.job.Job.Partition},
				fieldCheck{"request", requestOf(j.Comment), elastic.Comment{Request: p.job.Request}.String()},
				fieldCheck{"start-over consent", startsOverOf(j.Comment, p.afresh), "as read"})
		}
		if err != nil || why != "" {
			if err != nil {
				log.Error("re-reading the job before moving it failed; leaving it", "error", err)
			} else {
				log.Info("not moving the job", "why", why)
			}
			d.metrics.Moves.WithLabelValues("skipped").Inc()
			continue
		}
		// The owner's list is recorded before anything changes, so that a
		// daemon killed after the ExcNodeList update never takes the list
		// it set for the owner's.
		rec := backfillstore.Moved{Job: id, From: p.from, Owner: p.owner, Since: v.Now, State: backfillstore.MoveRequeued}
		if err := d.db.PutMoved(ctx, rec); err != nil {
			return changed, err
		}
		if err := d.mover.Requeue(ctx, id); err != nil {
			// A timeout may come after slurmctld requeued the job: what
			// counts is whether it waits now.
			if j, _, rerr := d.reReadJob(ctx, id, "checking a requeue that failed"); rerr != nil || j.State != "PENDING" {
				log.Warn("Slurm did not requeue the job; it runs on where it is and is not moved again", "error", err)
				d.metrics.Moves.WithLabelValues("failed").Inc()
				rec.State = backfillstore.MoveRestored
				if err := d.db.PutMoved(ctx, rec); err != nil {
					return changed, err
				}
				continue
			}
			log.Warn("the requeue reported an error but the job waits again; going on with the move", "error", err)
		}
		if err := d.decide(ctx, "move", id, "", strings.Join(p.to, ","), p.gpus, detail); err != nil {
			return changed, err
		}
		// Its extra jobs end once it waits: their workers lost their job.
		// Cancelled only now, so that a requeue Slurm refuses (--no-requeue,
		// a job srun started) leaves the job as it ran; one not cancelled
		// here (scancel failed) is cancelled by the next cycle's
		// reconciliation, its parent no longer running.
		for _, x := range p.extras {
			ended, err := d.cancelled(ctx, x, "its job moves to faster GPUs on "+strings.Join(p.to, ","), true)
			if err != nil {
				return changed, err
			}
			if ended {
				r.Cancelled = append(r.Cancelled, x.ID)
			}
		}
		changed = true
		d.moving[id] = true
		r.Moved = append(r.Moved, id)
		d.metrics.Moves.WithLabelValues("requeued").Inc()
		log.Info("requeued the job to move it to faster GPUs", "gpus", p.gpus)
		if err := d.excludeMoved(ctx, rec, log); err != nil {
			return changed, err
		}
	}
	return changed, nil
}
