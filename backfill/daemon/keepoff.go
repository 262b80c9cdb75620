package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Excluder changes the nodes a pending job may not start on
// (keep_off_pinned).
type Excluder interface {
	// SetExcluded sets pending job id's excluded nodes to nodes (none
	// clears them): `scontrol update JobId=ID ExcNodeList=a,b`.
	SetExcluded(ctx context.Context, id string, nodes []string) error
}

// SlurmExcluder is the Excluder over scontrol.
type SlurmExcluder struct{ Slurm slurmcli.Runner }

var _ Excluder = (*SlurmExcluder)(nil)

// SetExcluded runs slurmcli.Runner.SetExcludedNodes.
func (s *SlurmExcluder) SetExcluded(ctx context.Context, id string, nodes []string) error {
	if err := s.Slurm.SetExcludedNodes(ctx, id, nodes); err != nil {
		return fmt.Errorf("setting the excluded nodes of job %s to %q: %w", id, strings.Join(nodes, ","), err)
	}
	return nil
}

// keepOffPerCycle bounds the ExcNodeList updates one cycle runs: anyone may
// queue many elastic jobs, and a pinned job that starts lifts the keep-off
// of every one of them. The first in squeue's order are changed; the rest
// wait for the next cycles.
const keepOffPerCycle = 32

// keepOffJobsRead bounds how many pending jobs a cycle considers for
// keep_off_pinned, in squeue's order (a 10,000-job queue is not walked
// whole each cycle); a job the daemon changed is always considered, so
// that it is put back.
const keepOffJobsRead = 1024

// keepOffChange is one pending job whose excluded nodes the cycle changes:
// from what Slurm holds (from) to the owner's own (the nodes the daemon had
// not added) plus the nodes of the types the planner keeps it off (add).
type keepOffChange struct {
	job        slurmcli.Job
	from, to   []string
	add, types []string
	// since is when the job was first kept off in this spell (zero: it is
	// not kept off); expired: it waited past planner.KeepOffExpired and is
	// put back while since is kept.
	since   time.Time
	expired bool
}

// pinnedType is the GPU type pending job j is pinned to (--gres=gpu:
// TYPE:N) when it keeps jobs behind it off that type: it is in the
// daemon's partitions, waits for resources or its turn (Reason Resources,
// Priority, or None right after an update), and its request reads and
// fits on the nodes of that type it may use. A held job, one waiting for a
// dependency or its begin time, or one asking more than its type holds
// keeps no job off.
func (d *Daemon) pinnedType(v *View, j slurmcli.Job) (string, bool) {
	if !slices.Contains([]string{"Resources", "Priority", "None"}, j.Reason) || !anyIn(strings.Split(j.Partition, ","), d.cfg.Partitions) {
		return "", false
	}
	r, ok := readQueued(j)
	if !ok || r.gpuType == "" {
		return "", false
	}
	may := d.possibleNodes(v, j) // none in extra.partition: the daemon's own extra jobs pin nothing
	holds := 0
	for _, n := range v.Nodes {
		if n.GPUType == r.gpuType && n.Total >= r.perNode && may(n) {
			holds++
		}
	}
	return r.gpuType, holds >= r.nodes
}

// planKeepOff decides keep_off_pinned for this cycle's pending jobs
// (records: what the daemon added before, by job id), in queue order
// (planner.QueueOrder). For each pending job whose excluded nodes were
// read (v.Placements) it takes the owner's own exclusions (Slurm's list
// less the nodes the daemon added) and, when keep_off_pinned is on and the
// job is an elastic EasyScale job (es-req with a node range) in the
// daemon's partitions that names no GPU type, no --nodelist and no
// --constraint, asks planner.KeepOff which types to keep it off for the
// pinned jobs ahead of it (pinnedType): its capacity per type is the
// whole nodes (holding its GPUs per node) it may use by partition and its
// own exclusions, its speed there its es-req speeds= or the configured
// one, d1 on one type. A spell of keeping a job off ends after its time
// limit (planner.KeepOffExpired, from the record's start). A job whose
// list or record would change is returned, at most keepOffPerCycle; gone
// lists the recorded jobs Slurm no longer lists at all.
func (d *Daemon) planKeepOff(v *View, records map[string]backfillstore.KeptOff) (changes []keepOffChange, gone []string) {
	for _, id := range sortedIDs(records) {
		if _, listed := v.All[id]; !listed {
			gone = append(gone, id)
		}
	}
	var pinned []string // the types of the pinned jobs ahead in the queue
	for i, j := range d.inQueueOrder(slices.Clone(v.Pending)) {
		if len(changes) == keepOffPerCycle {
			break
		}
		ahead := pinned
		if t, ok := d.pinnedType(v, j); ok && d.cfg.KeepOffPinned && !slices.Contains(pinned, t) {
			pinned = append(slices.Clone(pinned), t)
		}
		rec, recorded := records[j.ID]
		if i >= keepOffJobsRead && !recorded {
			continue
		}
		p, ok := v.Placements[j.ID]
		if !ok {
			continue
		}
		cur, err := slurmcli.ExpandHostlist(p.ExcNodes)
		if err != nil {
			continue
		}
		own := slices.DeleteFunc(slices.Clone(cur), func(n string) bool { return slices.Contains(rec.Nodes, n) })
		c := keepOffChange{job: j, from: cur}
		var run float64
		if len(ahead) > 0 && p.Features == "" {
			c.add, c.types, run = d.keepOffNodes(v, j, own, ahead)
		}
		if len(c.add) > 0 {
			if c.since = rec.Since; c.since.IsZero() {
				c.since = v.Now
			}
			if planner.KeepOffExpired(v.Now.Sub(c.since).Seconds(), run) {
				c.add, c.expired = nil, true
			}
		}
		c.to = append(slices.Clone(own), c.add...)
		if sameSet(c.to, cur) && sameSet(c.add, rec.Nodes) && c.since.Equal(rec.Since) {
			continue
		}
		changes = append(changes, c)
	}
	return changes, gone
}

// keepOffNodes is, for pending job j with its owner's exclusions own, the
// nodes of the GPU types planner.KeepOff keeps it off (those it may use
// and did not exclude itself), the types, and its time limit in seconds
// (its run time as Slurm knows it, planner.KeepOffExpired's bound); nil
// when it is not a job the daemon keeps off anything.
func (d *Daemon) keepOffNodes(v *View, j slurmcli.Job, own, pinned []string) (add, types []string, run float64) {
	com, err := elastic.ParseComment(j.Comment)
	if err != nil || com.Progress != nil || !com.Request.Elastic() || j.ReqNodes != "" ||
		!anyIn(strings.Split(j.Partition, ","), d.cfg.Partitions) {
		return nil, nil, 0
	}
	r, ok := readQueued(j)
	if !ok || r.gpuType != "" {
		return nil, nil, 0
	}
	may := d.possibleNodesExcluding(v, j, own)
	q := planner.KeepOffRequest{Need: r.nodes, OneType: com.Request.Determinism != elastic.D2, Pinned: pinned}
	at := map[string]int{}
	for _, n := range v.Nodes {
		if n.Total < r.perNode || !may(n) {
			continue
		}
		k, seen := at[n.GPUType]
		if !seen {
			speed, own := com.Request.Speeds[n.GPUType]
			if !own {
				speed = d.cfg.Speeds[n.GPUType]
			}
			k = len(q.Types)
			at[n.GPUType] = k
			q.Types = append(q.Types, planner.TypeOffer{Type: n.GPUType, Speed: speed})
		}
		q.Types[k].Capacity++
	}
	types = planner.KeepOff(q)
	if len(types) == 0 {
		return nil, nil, 0
	}
	for _, n := range v.Nodes {
		if slices.Contains(types, n.GPUType) && may(n) {
			add = append(add, n.Name)
		}
	}
	return add, types, r.limit.Seconds()
}

// keepOff applies this cycle's keep_off_pinned (planKeepOff): for each job
// it re-reads the job by id and changes nothing unless it is still pending
// with the excluded nodes the snapshot read, records what the daemon adds
// (state_db kept_off, before the update, so that a daemon killed in between
// still takes the nodes out later), sets the job's excluded nodes, and
// updates v.Placements so that the rest of the cycle (shrink-to-admit,
// start-small) sees them. Records of jobs Slurm no longer lists are
// forgotten. A dry run only logs and records the decision. An update Slurm
// refuses is logged and left for the next cycle; a database error stops
// the cycle.
func (d *Daemon) keepOff(ctx context.Context, v *View, r *Report) error {
	records, err := d.db.KeptOffJobs(ctx)
	if err != nil {
		return err
	}
	if !d.cfg.KeepOffPinned && len(records) == 0 {
		return nil
	}
	if v.Placements == nil && len(records) > 0 && len(v.Pending) > 0 { // keep_off_pinned turned off: put the nodes back
		if v.Placements, err = d.snap.Slurm.PendingPlacements(ctx); err != nil {
			d.log.Named("keep_off").Warn("reading the pending jobs' excluded nodes failed; changing none this cycle", "error", err)
			return nil
		}
	}
	changes, gone := d.planKeepOff(v, records)
	log := d.log.Named("keep_off")
	for _, id := range gone {
		if d.cfg.DryRun {
			continue
		}
		if err := d.db.PutKeptOff(ctx, backfillstore.KeptOff{Job: id}); err != nil {
			return err
		}
	}
	for _, c := range changes {
		log := log.With("job_id", c.job.ID)
		record := backfillstore.KeptOff{Job: c.job.ID, Nodes: c.add, Types: c.types, Since: c.since}
		if sameSet(c.to, c.from) { // only the record changes (a spell begins or ends with nothing to change in Slurm)
			if !d.cfg.DryRun {
				if err := d.db.PutKeptOff(ctx, record); err != nil {
					return err
				}
			}
			continue
		}
		kind, detail := "keep-off", fmt.Sprintf("excluded nodes %q -> %q (kept off %s: waiting pinned jobs need it)",
			strings.Join(c.from, ","), strings.Join(c.to, ","), strings.Join(c.types, ","))
		switch {
		case c.expired:
			kind, detail = "keep-off-lifted", fmt.Sprintf("excluded nodes %q -> %q (kept off since %s, longer than its time limit %s)",
				strings.Join(c.from, ","), strings.Join(c.to, ","), c.since.UTC().Format(time.RFC3339), c.job.TimeLimit)
		case len(c.add) == 0:
			kind, detail = "keep-off-lifted", fmt.Sprintf("excluded nodes %q -> %q (no waiting pinned job needs the types it was kept off)",
				strings.Join(c.from, ","), strings.Join(c.to, ","))
		}
		if d.cfg.DryRun {
			log.Info("would change excluded nodes (dry run)", "detail", detail)
			if err := d.decide(ctx, kind, c.job.ID, "", "", 0, detail+" (dry run)"); err != nil {
				return err
			}
			continue
		}
		if why, err := d.verifyKeepOff(ctx, c); err != nil || why != "" {
			if err != nil {
				log.Warn("re-reading the job before changing its excluded nodes failed; leaving it", "error", err)
				continue
			}
			log.Info("not changing excluded nodes: the job changed since the snapshot", "why", why)
			continue
		}
		if err := d.decide(ctx, kind, c.job.ID, "", "", 0, detail); err != nil {
			return err
		}
		if len(c.add) > 0 { // recorded before Slurm holds them: a daemon killed in between still takes them out
			if err := d.db.PutKeptOff(ctx, record); err != nil {
				return err
			}
		}
		if err := d.excluder.SetExcluded(ctx, c.job.ID, c.to); err != nil {
			d.metrics.KeepOffs.WithLabelValues("failed").Inc()
			log.Warn("changing excluded nodes failed; trying again next cycle", "error", err)
			continue
		}
		if len(c.add) == 0 { // taken out: the record goes (or keeps the spell's start when it expired)
			if err := d.db.PutKeptOff(ctx, record); err != nil {
				return err
			}
		}
		if p, ok := v.Placements[c.job.ID]; ok {
			p.ExcNodes = strings.Join(c.to, ",")
			v.Placements[c.job.ID] = p
		}
		d.metrics.KeepOffs.WithLabelValues(kind).Inc()
		r.KeptOff = append(r.KeptOff, c.job.ID)
		log.Info("changed excluded nodes", "detail", detail)
	}
	return nil
}

// verifyKeepOff re-reads pending job c.job by id right before its
// excluded nodes are changed and returns why they must not be ("" when
// they may): it must still be pending, the user's, in the partition the
// snapshot read, with its comment, and then its excluded nodes
// (slurmcli.Runner.PendingPlacement) must be c.from. err is a failed
// squeue.
func (d *Daemon) verifyKeepOff(ctx context.Context, c keepOffChange) (string, error) {
	j, _, why, err := d.reReadJob(ctx, c.job.ID, "changing its excluded nodes")
	if why != "" || err != nil {
		return why, err
	}
	p, ok, err := d.snap.Slurm.PendingPlacement(ctx, c.job.ID)
	if noSuchJob(err) {
		return unknownJob, nil
	}
	if err != nil {
		return "", fmt.Errorf("re-reading the excluded nodes of job %s: %w", c.job.ID, err)
	}
	if !ok {
		return "its excluded nodes cannot be read", nil
	}
	if why := firstDifference("the snapshot read",
		fieldCheck{"state", j.State, "PENDING"}, fieldCheck{"user", j.User, c.job.User}, fieldCheck{"partition", j.Partition, c.job.Partition},
		fieldCheck{"comment", j.Comment, c.job.Comment}); why != "" {
		return why, nil
	}
	cur, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err != nil || !sameSet(cur, c.from) {
		return fmt.Sprintf("its excluded nodes are %q, the snapshot read %q", p.ExcNodes, strings.Join(c.from, ",")), nil
	}
	return "", nil
}

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool {
	for _, n := range a {
		if !slices.Contains(b, n) {
			return false
		}
	}
	for _, n := range b {
		if !slices.Contains(a, n) {
			return false
		}
	}
	return true
}
