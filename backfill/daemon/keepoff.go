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
// of every one of them. The first in queue order are changed; the rest
// wait for the next cycles.
const keepOffPerCycle = 32

// keepOffRetry is how long an update of a job's excluded nodes that Slurm
// refused waits before the same update is tried again. Short, because the
// usual refusal is transient: with slurmdbd, slurmctld refuses to update a
// job whose accounting record is not written yet ("Job update not
// available right now, the DB index is being set, try again in a bit",
// after a 5 s wait; shared/slurm-lab/NOTES.md), which under load lasts a
// few seconds after submission. A refusal that persists costs one update
// of the job every keepOffRetry.
const keepOffRetry = 10 * time.Second

// keepOffTry is the list last set for a job in a dry run, or refused by
// Slurm, and when.
type keepOffTry struct {
	list string
	at   time.Time
}

// keepOffJobsRead bounds how many pending jobs a cycle asks the planner
// about, in queue order: every pending job is sorted and looked at for
// the type it is pinned to, but only the first this many are asked
// whether to keep them off (a job the daemon changed is always looked at,
// so that it is put back).
const keepOffJobsRead = 1024

// keepOffChange is one pending job whose excluded nodes or record the
// cycle changes: Slurm's list goes from from to to, the owner's own nodes
// (those the daemon had not added) plus add, the nodes of the pinned jobs
// ahead of it on the types the planner keeps it off (types).
type keepOffChange struct {
	job        slurmcli.Job
	from, to   []string
	add, types []string
	// since is when the job was first kept off while it waits (zero:
	// never); expired: since then longer than its time limit has passed
	// (planner.KeepOffExpired), so it is not kept off again; released: its
	// owner changed the list the daemon had set, which is then the
	// owner's, and the daemon keeps the job off nothing any more.
	since             time.Time
	expired, released bool
}

// record is the state_db row c leaves.
func (c keepOffChange) record() backfillstore.KeptOff {
	k := backfillstore.KeptOff{Job: c.job.ID, Nodes: c.add, Types: c.types, Since: c.since, Released: c.released}
	if len(c.add) > 0 {
		k.Set = c.to
	}
	return k
}

// keepOffMay says whether pending job j may start on node n as far as
// keep_off_pinned counts nodes: a node this daemon manages (whatever its
// state: a node that is completing or drained for a while must not lift
// and re-apply a keep-off) in one of j's partitions other than
// extra.partition, within its --nodelist and outside excluded. all is
// false when j may also run on a node this daemon does not manage (or
// none at all): another daemon may manage those, and a job is kept off by
// one daemon or none.
func (d *Daemon) keepOffMay(v *View, j slurmcli.Job, excluded []string) (may func(NodeView) bool, all bool) {
	usable := d.placesJob(j, excluded)
	all, any := true, false
	for _, n := range v.Nodes {
		if usable(n) {
			any = true
			all = all && n.Managed
		}
	}
	return func(n NodeView) bool { return n.Managed && usable(n) }, all && any
}

// pinnedNodes are the nodes pending job j, pinned to one GPU type
// (--gres=gpu:TYPE:N), may start on, with the type, when it keeps jobs
// behind it off them: it is in the daemon's partitions, waits for
// resources or its turn (Reason Resources, Priority, or None right after
// an update) with a planned start, its request reads, it asks no
// --constraint, and the nodes of that type it may use (keepOffMay, its
// --exclude as read) can hold it.
// A held job, one waiting for a dependency or its begin time, one Slurm
// has not planned yet, or one asking more than its type holds keeps no
// job off.
func (d *Daemon) pinnedNodes(v *View, j slurmcli.Job) (typ string, nodes []string) {
	if !slices.Contains(mayStartSoon, j.Reason) || !anyIn(strings.Split(j.Partition, ","), d.cfg.Partitions) ||
		!d.planned(j) {
		return "", nil
	}
	r, ok := readQueued(j)
	if !ok || r.gpuType == "" {
		return "", nil
	}
	p, ok := v.Placements[j.ID]
	if !ok || p.Features != "" { // --constraint: which nodes it may use is not known
		return "", nil
	}
	excluded, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err != nil {
		return "", nil
	}
	may, _ := d.keepOffMay(v, j, excluded)
	for _, n := range v.Nodes {
		if n.GPUType == r.gpuType && n.Total >= r.perNode && may(n) {
			nodes = append(nodes, n.Name)
		}
	}
	if len(nodes) < r.nodes {
		return "", nil
	}
	return r.gpuType, nodes
}

// planned reports whether squeue printed a planned start for pending job
// j: a job just submitted shows none until Slurm's next backfill pass and
// sorts after every planned job, so it is neither kept off nor keeps a
// job off before then.
func (d *Daemon) planned(j slurmcli.Job) bool {
	_, err := slurmcli.ParseTime(j.StartTime, d.snap.loc())
	return err == nil
}

// pinnedAhead is what keep_off_pinned knows of the pinned jobs ahead of a
// pending job (pinnedNodes), by GPU type: nodes, the nodes they may use;
// start, the earliest of their planned starts, in seconds from the
// cycle's time (planner.KeepOffRequest.PinnedStart).
type pinnedAhead struct {
	nodes map[string]map[string]bool
	start map[string]float64
}

// add counts one pinned job of GPU type typ that may use nodes and that
// Slurm plans to start in seconds from now.
func (a pinnedAhead) add(typ string, nodes []string, in float64) {
	if a.nodes[typ] == nil {
		a.nodes[typ] = map[string]bool{}
		a.start[typ] = in
	}
	a.start[typ] = min(a.start[typ], in)
	for _, n := range nodes {
		a.nodes[typ][n] = true
	}
}

// plannedIn is how long from the cycle's time until Slurm plans to start
// pending job j (squeue's START_TIME), in seconds, never below 0; 0 when
// squeue printed none (the job is then taken to need its nodes now).
func (d *Daemon) plannedIn(v *View, j slurmcli.Job) float64 {
	at, err := slurmcli.ParseTime(j.StartTime, d.snap.loc())
	if err != nil {
		return 0
	}
	return max(at.Sub(v.Now).Seconds(), 0)
}

// planKeepOff decides keep_off_pinned for this cycle's pending jobs
// (records: the daemon's earlier changes, by job id), in queue order
// (planner.QueueOrder). For each pending job whose excluded nodes were
// read (v.Placements):
//
//   - when Slurm's list is no longer the one the daemon set, the job's
//     owner changed it: the list is the owner's from then on, and the job
//     is released (never kept off again while it waits);
//   - otherwise the owner's own nodes are Slurm's list less those the
//     daemon added and, when keep_off_pinned is on and the job is an
//     elastic EasyScale job (es-req with a node range) in the daemon's
//     partitions, with a planned start, that names no GPU type, no
//     --nodelist and no --constraint and may run only on nodes this
//     daemon manages, planner.KeepOff says which types to keep it off for
//     the pinned jobs ahead of it (pinnedNodes): its capacity per type is
//     the whole nodes (holding its GPUs per node) it may use, its speed
//     there its es-req speeds= or the configured one, d1 on one type. It
//     is kept off the nodes of those types that the pinned jobs may use,
//     until its time limit has passed since it was first kept off
//     (planner.KeepOffExpired; then never again while it waits).
//
// A job whose list or record would change is returned, at most
// keepOffPerCycle; gone lists the recorded jobs Slurm no longer lists
// (a job whose record could not be read this cycle is not gone).
func (d *Daemon) planKeepOff(v *View, records map[string]backfillstore.KeptOff) (changes []keepOffChange, gone []string) {
	for _, id := range sortedIDs(records) {
		_, listed := v.All[id]
		_, unreadable := v.Unreadable[id]
		if !listed && !unreadable {
			gone = append(gone, id)
		}
	}
	ahead := pinnedAhead{nodes: map[string]map[string]bool{}, start: map[string]float64{}}
	for i, j := range d.inQueueOrder(slices.Clone(v.Pending)) {
		if len(changes) == keepOffPerCycle {
			break
		}
		rec, recorded := records[j.ID]
		if i < keepOffJobsRead || recorded {
			if c, ok := d.keepOffOne(v, j, rec, ahead); ok {
				changes = append(changes, c)
			}
		}
		if typ, nodes := d.pinnedNodes(v, j); d.cfg.KeepOffPinned && len(nodes) > 0 {
			ahead.add(typ, nodes, d.plannedIn(v, j))
		}
	}
	return changes, gone
}

// keepOffOne is planKeepOff for one pending job j with its record rec
// (zero: none) behind the pinned jobs' nodes pinned; ok is false when
// nothing changes.
func (d *Daemon) keepOffOne(v *View, j slurmcli.Job, rec backfillstore.KeptOff, pinned pinnedAhead) (c keepOffChange, ok bool) {
	p, read := v.Placements[j.ID]
	if !read {
		return c, false
	}
	cur, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err != nil {
		return c, false
	}
	c = keepOffChange{job: j, from: cur, to: cur, since: rec.Since, released: rec.Released}
	if len(rec.Nodes) > 0 && !sameSet(cur, rec.Set) { // the owner changed the list the daemon set
		c.released = true
		return c, true
	}
	own := slices.DeleteFunc(slices.Clone(cur), func(n string) bool { return slices.Contains(rec.Nodes, n) })
	// One spell per job: it begins only for a job Slurm has planned and
	// never kept off before, and goes on (planned or not) until no pinned
	// job ahead needs the types or its bound passes.
	inSpell, mayBegin := len(rec.Nodes) > 0, rec.Since.IsZero() && !rec.Released && d.planned(j)
	var run float64
	if d.cfg.KeepOffPinned && len(pinned.nodes) > 0 {
		why := ""
		switch {
		case p.Features != "":
			why = "it asks a --constraint"
		case !inSpell && !mayBegin:
			why = fmt.Sprintf("no spell may begin (planned start %q, kept off since %v, released %v)", j.StartTime, rec.Since, rec.Released)
		default:
			c.add, c.types, run, why = d.keepOffNodes(v, j, own, pinned)
		}
		d.noteKeepOffWhy(j, why)
	}
	if len(c.add) > 0 {
		if c.since.IsZero() {
			c.since = v.Now
		}
		if planner.KeepOffExpired(v.Now.Sub(c.since).Seconds(), run) {
			c.add, c.types, c.expired = nil, nil, true
		}
	}
	c.to = append(own, c.add...)
	if sameSet(c.to, cur) && sameSet(c.add, rec.Nodes) && c.since.Equal(rec.Since) && c.released == rec.Released {
		return c, false
	}
	return c, true
}

// keepOffNodes is, for pending job j with its owner's exclusions own and
// the nodes of the pinned jobs ahead of it by type (pinned), the nodes
// planner.KeepOff keeps it off (of the types it returns, those the pinned
// jobs may use that j may use too), the types, and j's time limit in
// seconds (its run time as Slurm knows it, planner.KeepOffExpired's
// bound); nil when it is not a job the daemon keeps off anything.
func (d *Daemon) keepOffNodes(v *View, j slurmcli.Job, own []string, pinned pinnedAhead) (add, types []string, run float64, why string) {
	com, err := elastic.ParseComment(j.Comment)
	if err != nil || com.Progress != nil || !com.Request.Elastic() || j.ReqNodes != "" ||
		!anyIn(strings.Split(j.Partition, ","), d.cfg.Partitions) {
		return nil, nil, 0, ""
	}
	r, ok := readQueued(j)
	if !ok || r.gpuType != "" {
		return nil, nil, 0, "its request does not read or names a GPU type"
	}
	may, all := d.keepOffMay(v, j, own)
	if !all {
		return nil, nil, 0, "it may run on nodes this daemon does not manage"
	}
	q := planner.KeepOffRequest{Need: r.nodes, OneType: com.Request.Determinism != elastic.D2, Pinned: sortedIDs(pinned.nodes),
		PinnedStart: pinned.start, Run: map[string]float64{}}
	at := map[string]int{}
	speeds := planner.CapSpeeds(com.Request.Speeds, d.cfg.Speeds) // as the planner sees them (plan.go)
	for _, n := range v.Nodes {
		if n.Total < r.perNode || !may(n) {
			continue
		}
		k, seen := at[n.GPUType]
		if !seen {
			speed, own := speeds[n.GPUType]
			if !own {
				speed = d.cfg.Speeds[n.GPUType]
			}
			k = len(q.Types)
			at[n.GPUType] = k
			q.Types = append(q.Types, planner.TypeOffer{Type: n.GPUType, Speed: speed})
			q.Run[n.GPUType] = d.longestHold(com.Request, r).Seconds() // whatever the type: Slurm holds it until its time limit
		}
		q.Types[k].Capacity++
	}
	types = planner.KeepOff(q)
	for _, n := range v.Nodes {
		if slices.Contains(types, n.GPUType) && may(n) && pinned.nodes[n.GPUType][n.Name] && !slices.Contains(add, n.Name) {
			add = append(add, n.Name)
		}
	}
	if len(add) == 0 {
		return nil, nil, 0, fmt.Sprintf("planner.KeepOff keeps it off %v of %+v (pinned jobs ahead need %v)", types, q.Types, q.Pinned)
	}
	return add, types, r.limit.Seconds(), ""
}

// noteKeepOffWhy logs at debug level why pending elastic job j is not kept
// off anything this cycle (why "": it is, or it is not an elastic request),
// once per job and reason, so that a job left on a pinned job's type can
// be explained from the log (a lab test's failure printed no reason).
func (d *Daemon) noteKeepOffWhy(j slurmcli.Job, why string) {
	if d.keepOffWhy == nil {
		d.keepOffWhy = map[string]string{}
	}
	if why == "" || d.keepOffWhy[j.ID] == why {
		return
	}
	if com, err := elastic.ParseComment(j.Comment); err != nil || com.Progress != nil || !com.Request.Elastic() {
		return
	}
	if len(d.keepOffWhy) > 4*keepOffJobsRead { // forget the old reasons: the map stays small
		clear(d.keepOffWhy)
	}
	d.keepOffWhy[j.ID] = why
	d.log.Named("keep_off").Debug("not kept off", "job_id", j.ID, "why", why)
}

// keepOff applies this cycle's keep_off_pinned (planKeepOff): for each job
// whose list changes it re-reads the job by id and changes nothing unless
// it is still pending with the excluded nodes the snapshot read, records
// the change (state_db kept_off: the nodes added before the update, so
// that a daemon killed in between still takes them out later), sets the
// job's excluded nodes, and updates v.Placements so that the rest of the
// cycle (shrink-to-admit, start-small) sees them. A change that only
// touches the record (a job released by its owner, the start of a spell
// kept) is written without a Slurm command. Records of jobs Slurm no
// longer lists are forgotten. A dry run only logs and records the
// decision, once per job and list, as does an update Slurm refuses
// (tried again when the list to set changes); a database error stops the
// cycle.
func (d *Daemon) keepOff(ctx context.Context, v *View, r *Report) error {
	records, err := d.db.KeptOffJobs(ctx)
	if err != nil {
		return err
	}
	for id := range d.keepOffTried {
		if _, listed := v.All[id]; !listed {
			delete(d.keepOffTried, id)
		}
	}
	if !d.cfg.KeepOffPinned && len(records) == 0 {
		return nil
	}
	if v.Placements == nil && len(records) > 0 && len(v.Pending) > 0 { // keep_off_pinned turned off: put the nodes back
		ps, err := d.snap.Slurm.PendingPlacements(ctx)
		if err != nil {
			d.log.Named("keep_off").Warn("reading the pending jobs' excluded nodes failed; changing none this cycle", "error", err)
			return nil
		}
		v.setPendingPlacements(ps)
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
		if sameSet(c.to, c.from) { // only the record changes
			if c.released && !records[c.job.ID].Released {
				log.Info("the job's owner changed its excluded nodes: they are the owner's now, and the job is kept off nothing more",
					"excluded", strings.Join(c.to, ","))
			}
			if !d.cfg.DryRun {
				if err := d.db.PutKeptOff(ctx, c.record()); err != nil {
					return err
				}
			}
			continue
		}
		key := strings.Join(c.to, ",")
		if tried, ok := d.keepOffTried[c.job.ID]; ok && tried.list == key && (d.cfg.DryRun || v.Now.Sub(tried.at) < keepOffRetry) {
			continue // dry run: once per list; refused: again after keepOffRetry
		}
		kind, detail := c.describe()
		if d.cfg.DryRun {
			d.keepOffTried[c.job.ID] = keepOffTry{list: key, at: v.Now}
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
			if err := d.db.PutKeptOff(ctx, c.record()); err != nil {
				return err
			}
		}
		if err := d.excluder.SetExcluded(ctx, c.job.ID, c.to); err != nil {
			d.keepOffTried[c.job.ID] = keepOffTry{list: key, at: v.Now}
			d.metrics.KeepOffs.WithLabelValues("failed").Inc()
			log.Warn("changing excluded nodes failed; trying again shortly", "error", err, "retry_in", keepOffRetry.String())
			if len(c.add) > 0 { // not applied: the record goes back to what Slurm holds (none: deleted)
				prev := records[c.job.ID]
				prev.Job = c.job.ID
				if err := d.db.PutKeptOff(ctx, prev); err != nil {
					return err
				}
			}
			continue
		}
		delete(d.keepOffTried, c.job.ID)
		if len(c.add) == 0 { // taken out: the record keeps when the job was first kept off
			if err := d.db.PutKeptOff(ctx, c.record()); err != nil {
				return err
			}
		}
		if p, ok := v.Placements[c.job.ID]; ok {
			p.ExcNodes = key
			v.Placements[c.job.ID] = p
		}
		d.metrics.KeepOffs.WithLabelValues(kind).Inc()
		r.KeptOff = append(r.KeptOff, c.job.ID)
		log.Info("changed excluded nodes", "detail", detail)
	}
	return nil
}

// describe is the decision kind ("keep-off" or "keep-off-lifted") and its
// detail for the state_db log.
func (c keepOffChange) describe() (kind, detail string) {
	lists := fmt.Sprintf("excluded nodes %q -> %q", strings.Join(c.from, ","), strings.Join(c.to, ","))
	switch {
	case len(c.add) > 0:
		return "keep-off", lists + " (kept off " + strings.Join(c.types, ",") + ": pinned jobs queued ahead need it)"
	case c.expired:
		return "keep-off-lifted", fmt.Sprintf("%s (first kept off at %s, longer ago than its time limit %s)",
			lists, c.since.UTC().Format(time.RFC3339), c.job.TimeLimit)
	default:
		return "keep-off-lifted", lists + " (no pinned job queued ahead needs the types it was kept off)"
	}
}

// verifyKeepOff re-reads pending job c.job by id right before its
// excluded nodes are changed and returns why they must not be ("" when
// they may): it must still be pending, the user's, in the partition the
// snapshot read, with its comment, and then its excluded nodes
// (slurmcli.Runner.PendingPlacement) must be c.from. err is a failed
// squeue.
func (d *Daemon) verifyKeepOff(ctx context.Context, c keepOffChange) (string, error) {
	j, why, err := d.reReadJob(ctx, c.job.ID, "changing its excluded nodes")
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

// longestHold is the longest pending elastic job j, asking q, could hold
// the nodes it starts on: its time limit, or with start-small on and a
// minimum below its request, the limit start-small would give it started
// at its minimum node count (planner.RaisedTimeLimit), so that a job left
// on a pinned job's type because it would end in time (planner.KeepOff)
// still ends in time when it is started small there.
func (d *Daemon) longestHold(req elastic.Request, q queuedRequest) time.Duration {
	if d.cfg.StartSmallRule() == planner.StartSmallOff || req.MinNodes < 1 || req.MinNodes >= q.nodes {
		return q.limit
	}
	limit, _ := planner.RaisedTimeLimit(q.limit, 0, q.limit, q.nodes, req.MinNodes, d.cfg.TimeLimitRule())
	return limit
}
