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

// Shedder releases chosen nodes of a running job (shed_slow_nodes).
type Shedder interface {
	// KeepNodes shrinks running job id to the nodes keep: `scontrol update
	// JobId=ID NodeList=KEEP` (Slurm releases the job's other nodes and
	// kills the tasks of its running steps there; the EasyScale runtime
	// takes that as a membership change, as after NumNodes=). keep must
	// hold the batch host: slurmctld refuses a list without it ("Invalid
	// node name specified", measured on Slurm 22.05 and 24.11).
	KeepNodes(ctx context.Context, id string, keep []string) error
}

// SlurmShedder is the Shedder over scontrol.
type SlurmShedder struct{ Slurm slurmcli.Runner }

var _ Shedder = (*SlurmShedder)(nil)

// KeepNodes runs `scontrol update JobId=ID NodeList=A,B` through
// slurmcli.Runner.UpdateJob (which adds the job's NumTasks where Slurm
// 23.02 and later refuse the update without).
func (s *SlurmShedder) KeepNodes(ctx context.Context, id string, keep []string) error {
	if err := s.Slurm.UpdateJob(ctx, id, "NodeList="+strings.Join(keep, ",")); err != nil {
		return fmt.Errorf("keeping job %s on %s: %w", id, strings.Join(keep, ","), err)
	}
	return nil
}

// shedPlan is one job's release of the nodes its throughput does not
// need: keep the nodes it keeps (batch host first as Slurm lists them),
// shed the ones planner.ShedNodes released, slowest first.
type shedPlan struct {
	job        *ElasticJob
	keep, shed []string
	gpus       int // GPUs released
}

// planShed decides this cycle's releases (shed_slow_nodes): for every
// running elastic d2 job on more than one node whose base allocation the
// planner knows (planner.RunningJob: its model, minimum and speeds), the
// nodes planner.ShedNodes says it can release without slowing down, its
// batch host never among them. Jobs in id order. Pure translation: the
// rule is the planner's.
func (d *Daemon) planShed(v *View, ps planner.Snapshot) []shedPlan {
	var plans []shedPlan
	for _, r := range ps.Running {
		e := v.Elastic[r.ID]
		if e == nil || !r.Elastic || e.Request.Determinism != elastic.D2 || len(r.Base) < 2 {
			continue
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
		p := shedPlan{job: e, shed: shed}
		for _, s := range shares {
			if slices.Contains(shed, s.Name) {
				p.gpus += s.GPUs
			} else {
				p.keep = append(p.keep, s.Name)
			}
		}
		plans = append(plans, p)
	}
	return plans
}

// shedSlow applies this cycle's releases (shed_slow_nodes, off by
// default): each job is re-read by id first and left alone when its state,
// nodes, batch host or owner changed since the snapshot, or its record
// cannot be read; a release that slurmctld refuses is logged and counted.
// It reports whether an allocation changed (the cycle then lends nothing:
// the next cycle reads the new allocations). Only a database error is
// returned.
func (d *Daemon) shedSlow(ctx context.Context, v *View, ps planner.Snapshot, r *Report) (bool, error) {
	if !d.cfg.ShedSlowNodes {
		return false, nil
	}
	changed := false
	if d.shedTried == nil {
		d.shedTried = map[string]bool{}
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
		detail := fmt.Sprintf("release %s (%d GPUs its placement leaves idle, whose pace its all-reduce waits for), keep %s",
			strings.Join(p.shed, ","), p.gpus, strings.Join(p.keep, ","))
		if d.cfg.DryRun {
			log.Info("would release the slow nodes the job does not use (dry run)")
			if err := d.decide(ctx, "shed", id, "", strings.Join(p.shed, ","), p.gpus, detail+" (dry run)"); err != nil {
				return changed, err
			}
			continue
		}
		j, _, why, err := d.reReadJob(ctx, id, "releasing its slow nodes")
		if err == nil && why == "" {
			why = firstDifference("the snapshot read",
				fieldCheck{"state", j.State, "RUNNING"},
				fieldCheck{"node list", j.NodeList, p.job.Job.NodeList},
				fieldCheck{"batch host", j.BatchHost, p.job.Job.BatchHost},
				fieldCheck{"owner", j.User, p.job.Job.User})
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
		if err := d.shedder.KeepNodes(ctx, id, p.keep); err != nil {
			log.Error("releasing the job's slow nodes failed", "error", err)
			d.metrics.Sheds.WithLabelValues("failed").Inc()
			continue
		}
		changed = true
		d.metrics.Sheds.WithLabelValues("ok").Inc()
		r.Shed = append(r.Shed, id)
		log.Info("released nodes the job's placement leaves idle", "gpus", p.gpus)
	}
	return changed, nil
}
