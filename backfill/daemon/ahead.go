package daemon

import (
	"cmp"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// AdmitDepth is how many pending jobs, in Slurm's priority order,
// shrink-to-admit considers a cycle: Slurm's backfill tests no more
// (bf_max_job_test's default, 500: https://slurm.schedmd.com/slurm.conf.html),
// and a job waiting with Reason Priority starts only when the backfill
// scheduler tests it. The simulator's backfill pass has the same depth
// (simulator.Config.BackfillDepth's default).
const AdmitDepth = 500

// admitCandidate is a pending job shrink-to-admit may act for, with the
// nodes it must keep donors off: those the planned starts (squeue --start)
// of the pending jobs ahead of it name.
type admitCandidate struct {
	job      slurmcli.Job
	reserved []string // sorted
}

// admitCandidates are the pending jobs squeue shows waiting for resources
// or for their turn (Reason Resources or Priority) in partitions where
// shrink-to-admit is on, at most AdmitDepth of them, in Slurm's priority
// order (inPriorityOrder), each with the nodes the reservations of the
// jobs ahead of it name (aheadOf): Slurm's backfill plans every pending
// job in priority order and starts a job only where it delays no job ahead
// of it, so an admission keeps those reservations; a job behind the
// admitted one may wait for it, as for any job Slurm ranks above it. Jobs
// with Reason Priority wait behind their partition's first blocked job
// (Slurm's main scheduler stops there) and are started by the backfill
// scheduler, within bf_interval of the shrink.
func (d *Daemon) admitCandidates(v *View) []admitCandidate {
	all := d.inPriorityOrder(v, slices.Clone(v.Pending)) // every pending job, for the reservations
	naming, inPart := map[string]int{}, map[string]map[string]int{}
	planned := make([][]string, len(all))
	for i, j := range all {
		planned[i] = d.plannedNodes(v, j)
		if inPart[j.Partition] == nil {
			inPart[j.Partition] = map[string]int{}
		}
		for _, n := range planned[i] {
			naming[n]++
			inPart[j.Partition][n]++
		}
	}
	var out []admitCandidate
	before := map[string]map[string]int{} // per partition, nodes the jobs walked so far plan
	for i, j := range all {
		if len(out) < AdmitDepth && (j.Reason == "Resources" || j.Reason == "Priority") && d.cfg.AdmitOn(j.Partition) {
			out = append(out, admitCandidate{job: j, reserved: aheadOf(naming, inPart[j.Partition], before[j.Partition])})
		}
		if before[j.Partition] == nil {
			before[j.Partition] = map[string]int{}
		}
		for _, n := range planned[i] {
			before[j.Partition][n]++
		}
	}
	return out
}

// aheadOf are the nodes, sorted, that the reservations of the jobs ahead
// of a pending job name: every job of another partition (naming −
// inPart: partitions' PriorityTier orders them before job priority, which
// squeue's %Q does not show, so they all count as ahead) and the jobs of
// its own partition before it in priority order (before).
func aheadOf(naming, inPart, before map[string]int) []string {
	var out []string
	for n, k := range naming {
		if k > inPart[n] || before[n] > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// plannedNodes are the distinct nodes pending job j's planned start names
// (squeue --start's SCHEDNODES; none when it has no readable plan).
func (d *Daemon) plannedNodes(v *View, j slurmcli.Job) []string {
	pj, ok := pendingJob(j, d.snap.loc(), v.wholeNode)
	if !ok {
		return nil
	}
	var out []string
	for _, ng := range pj.PlannedNodes {
		if !slices.Contains(out, ng.Node) {
			out = append(out, ng.Node)
		}
	}
	return out
}

// inPriorityOrder sorts pending jobs in place in the order Slurm's
// schedulers consider them within a partition (sort_job_queue: the higher
// job priority first, squeue's %Q, read with the placements; equal
// priorities the lower job id first), and returns them. A job whose
// priority was not read (no placement) comes first: it counts as ahead of
// every other, so its reservation is kept.
func (d *Daemon) inPriorityOrder(v *View, jobs []slurmcli.Job) []slurmcli.Job {
	type key struct {
		read bool
		prio uint64
		id   planner.QueueKey
	}
	keys := make([]key, len(jobs))
	for i, j := range jobs {
		p, ok := v.Placements[j.ID]
		keys[i] = key{read: ok, prio: p.Priority, id: planner.NewQueueKey(0, j.ID)}
	}
	return sortJobsBy(jobs, func(a, b int) int {
		kx, ky := keys[a], keys[b]
		switch {
		case kx.read != ky.read && !kx.read:
			return -1
		case kx.read != ky.read:
			return 1
		case kx.prio != ky.prio:
			return -cmp.Compare(kx.prio, ky.prio)
		}
		return kx.id.Compare(ky.id)
	})
}
