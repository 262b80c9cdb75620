package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// Shedder releases the last nodes of a running job (shed_slow_nodes).
type Shedder interface {
	// KeepFirst shrinks running job id to the first nodes nodes of its
	// node list: `scontrol update JobId=ID NumNodes=N`, the shrink
	// shrink-to-admit uses (Slurm releases the last nodes and kills the
	// tasks of running steps there; the EasyScale runtime takes that as a
	// membership change). Not `NodeList=<kept>`, which could release any
	// node but crashed Slurm 24.11.5's slurmctld ("double free or
	// corruption (fasttop)") when such a job's extra job ended (measured
	// on the current lab, 2 December 2026; 22.05 survived it).
	KeepFirst(ctx context.Context, id string, nodes int) error
}

// SlurmShedder is the Shedder over scontrol.
type SlurmShedder struct{ Slurm slurmcli.Runner }

var _ Shedder = (*SlurmShedder)(nil)

// KeepFirst runs `scontrol update JobId=ID NumNodes=N` as
// slurmcli.Runner.SetNodes does (with the job's NumTasks where Slurm 23.02
// and later refuse it without).
func (s *SlurmShedder) KeepFirst(ctx context.Context, id string, nodes int) error {
	if err := s.Slurm.SetNodes(ctx, id, nodes); err != nil {
		return fmt.Errorf("keeping job %s on its first %d nodes: %w", id, nodes, err)
	}
	return nil
}

// MixedShrinkSafeSeries are the Slurm release series on which shrinking a
// running job whose nodes have more than one GPU type was run on the lab
// and slurmctld survived it. On 24.11.5 slurmctld died ("double free or
// corruption (fasttop)") when such a job, shrunk by `scontrol update
// NumNodes=` (or NodeList=), ended after another job had run on the
// released node: a job with --gres=gpu:4 on a v100 node and a t4 node kept
// its v100 node, a 3 s job ran on the t4 node, and slurmctld died as the
// first job's step ended (reproduced with Slurm's commands alone, 3
// December 2026; a job on two t4 nodes survived the same sequence;
// docs/deploy.md, section 4, has the commands). So shed_slow_nodes, which
// shrinks exactly such jobs, is refused on other series, and
// shrink-to-admit leaves such jobs alone there (planner.DonorFacts.MixedTypesUnsafe).
var MixedShrinkSafeSeries = []string{"22.05"}

// mixedShrinkSafe reports whether series is in MixedShrinkSafeSeries.
func mixedShrinkSafe(series string) bool { return slices.Contains(MixedShrinkSafeSeries, series) }

// checkShedSupported returns an error naming shed_slow_nodes unless the
// Slurm series slurmcli.Runner.Series read (or failed to, err) is in
// MixedShrinkSafeSeries.
func checkShedSupported(series string, err error) error {
	if err != nil {
		return fmt.Errorf("shed_slow_nodes: %w; set shed_slow_nodes = false", err)
	}
	if !mixedShrinkSafe(series) {
		return fmt.Errorf("shed_slow_nodes: Slurm %s is not a series it was run on (%s): on 24.11.5 slurmctld crashed "+
			"after such a shrink; set shed_slow_nodes = false", series, strings.Join(MixedShrinkSafeSeries, ", "))
	}
	return nil
}

// shedPlan is one job's release of the nodes its throughput does not
// need: keep the first nodes of its list, shed the rest (the ones
// planner.ShedNodes released).
type shedPlan struct {
	job        *ElasticJob
	keep, shed []string
	gpus       int // GPUs released
}

// planShed decides this cycle's releases (shed_slow_nodes): only for
// jobs whose nodes this daemon manages, in a partition where it may shrink
// running jobs (config.Config.ShrinkOn: one of partitions, none of
// admit.off_partitions); for every
// running elastic d2 job on more than one node whose base allocation the
// planner knows (planner.RunningJob: its model, minimum and speeds), the
// nodes planner.ShedNodes says it can release without slowing down, its
// batch host never among them, when they are the last nodes of its node
// list as squeue prints it (what NumNodes= releases; ShedNodes prefers the
// last on ties). Jobs in id order. Pure translation: the rule is the
// planner's.
func (d *Daemon) planShed(v *View, ps planner.Snapshot) []shedPlan {
	var plans []shedPlan
	for _, r := range ps.Running {
		e := v.Elastic[r.ID]
		if e == nil || !r.Elastic || e.Request.Determinism != elastic.D2 || len(r.Base) < 2 || e.BaseGuessed ||
			!e.Managed || !d.cfg.ShrinkOn(e.Job.Partition) {
			continue
		}
		if composite, unread := v.compositeOf(e.Job.ID); composite != "" || unread {
			continue // an array's task or a heterogeneous job's component, or not known: a shrink by its id can change the others
		}
		shares := make([]planner.NodeShare, 0, len(r.Base))
		batch := false
		for _, b := range r.Base {
			n := v.node(b.Node)
			if n == nil {
				shares = nil
				break
			}
			isBatch := b.Node == e.Job.BatchHost
			batch = batch || isBatch
			shares = append(shares, planner.NodeShare{Name: b.Node, Speed: r.SpeedOf(n.GPUType, ps.Speeds), GPUs: b.GPUs, Batch: isBatch})
		}
		if len(shares) == 0 || !batch { // a node unknown, or no batch host named among its nodes: leave it
			continue
		}
		shed := planner.ShedNodes(r.Model, shares, r.MinGPUs)
		if len(shed) == 0 {
			continue
		}
		names, err := slurmcli.ExpandHostlist(e.Job.NodeList)
		if err != nil || len(names) != len(shares) {
			continue
		}
		k := len(names) - len(shed)
		if slices.ContainsFunc(names[k:], func(n string) bool { return !slices.Contains(shed, n) }) {
			continue // a node in the middle of its list: NumNodes= cannot release it
		}
		p := shedPlan{job: e, keep: names[:k], shed: names[k:]}
		for _, s := range shares {
			if slices.Contains(shed, s.Name) {
				p.gpus += s.GPUs
			}
		}
		plans = append(plans, p)
	}
	return plans
}

// shedSlow applies this cycle's releases (shed_slow_nodes, on by default
// where the Slurm series allows it, Daemon.shed): each job is re-read by id
// first and left alone when its state, nodes, batch host, owner, partition
// or request (its comment's es-req, which its owner may change; the
// progress the runtime writes there may change) changed since the
// snapshot, or its record cannot be read; a release that slurmctld
// refuses is logged and counted. It reports whether an allocation changed
// (the cycle then lends nothing: the next cycle reads the new
// allocations). Only a database error is returned.
func (d *Daemon) shedSlow(ctx context.Context, v *View, ps planner.Snapshot, r *Report) (bool, error) {
	if !d.shed {
		return false, nil
	}
	changed := false
	if d.shedTried == nil {
		d.shedTried = map[string]bool{}
	}
	for tried := range d.shedTried { // forget the jobs no longer running: the map stays as small as the running jobs
		if id, _, _ := strings.Cut(tried, "/"); v.Elastic[id] == nil {
			delete(d.shedTried, tried)
		}
	}
	for _, p := range d.planShed(v, ps) {
		id := p.job.Job.ID
		// One try per job and allocation: a release refused, skipped or
		// logged in a dry run is not tried again each cycle.
		tried := id + "/" + p.job.Job.NodeList
		if d.shedTried[tried] {
			continue
		}
		d.shedTried[tried] = true
		log := d.log.Named("shed").With("job_id", id, "keep", strings.Join(p.keep, ","), "shed", strings.Join(p.shed, ","))
		detail := fmt.Sprintf("release %s (%d GPUs that add nothing to its throughput: the best placement of its logical workers leaves them idle, and its all-reduce waits for their pace), keep %s",
			strings.Join(p.shed, ","), p.gpus, strings.Join(p.keep, ","))
		if d.cfg.DryRun {
			log.Info("would release the slow nodes the job does not use (dry run)")
			if err := d.decide(ctx, "shed", id, "", strings.Join(p.shed, ","), p.gpus, detail+" (dry run)"); err != nil {
				return changed, err
			}
			continue
		}
		j, why, err := d.reReadJob(ctx, id, "releasing its slow nodes")
		if err == nil && why == "" {
			why = firstDifference("the snapshot read",
				fieldCheck{"state", j.State, "RUNNING"},
				fieldCheck{"node list", j.NodeList, p.job.Job.NodeList},
				fieldCheck{"batch host", j.BatchHost, p.job.Job.BatchHost},
				fieldCheck{"owner", j.User, p.job.Job.User},
				fieldCheck{"partition", j.Partition, p.job.Job.Partition},
				fieldCheck{"request", requestOf(j.Comment), elastic.Comment{Request: p.job.Request}.String()})
		}
		if err != nil || why != "" {
			if err != nil {
				log.Error("re-reading the job before releasing its nodes failed; leaving it", "error", err)
			} else {
				log.Info("not releasing the job's nodes", "why", why)
			}
			d.metrics.Sheds.WithLabelValues("skipped").Inc()
			continue
		}
		if err := d.decide(ctx, "shed", id, "", strings.Join(p.shed, ","), p.gpus, detail); err != nil {
			return changed, err
		}
		if err := d.shedder.KeepFirst(ctx, id, len(p.keep)); err != nil {
			log.Error("releasing the job's slow nodes failed", "error", err)
			d.metrics.Sheds.WithLabelValues("failed").Inc()
			continue
		}
		changed = true
		d.metrics.Sheds.WithLabelValues("ok").Inc()
		r.Shed = append(r.Shed, id)
		log.Info("released nodes that add nothing to the job's throughput", "gpus", p.gpus)
	}
	return changed, nil
}

// requestOf returns the canonical form of the request a job's comment
// carries (elastic.Comment.String of its Request, progress left out), or
// the parse error's text, so that a re-read can tell whether the request
// changed while the runtime's progress did.
func requestOf(comment string) string {
	c, err := elastic.ParseComment(comment)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return elastic.Comment{Request: c.Request}.String()
}
