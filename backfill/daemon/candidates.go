package daemon

import (
	"slices"
	"strings"

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
// nodes the planned starts (squeue --start) of every other pending job and
// Slurm's advance reservations name, each with the earliest such start: a
// donor there gives only what leaves its raised limit ending by then
// (planner.DonorGives), and the job goes there only if it ends by then
// (planner.TakesReserved).
type admitCandidate struct {
	job      slurmcli.Job
	reserved []planner.ReservedNode // sorted by node
	// aheadOnly, when set, says why shrink-to-admit does not act for the
	// job: it is listed only as a job ranked ahead of the candidates
	// behind it, which an admission must not free nodes for
	// (planner.AdmitOnNodes' takenByAhead).
	aheadOnly string
	// butFor marks a job listed only as ranked ahead for what the daemon
	// cannot tell of it (its partitions' tiers), which would otherwise be
	// a candidate: its reason is reported even when no candidate follows.
	butFor bool
}

// neverStartsNow are the Reasons of pending jobs Slurm starts on no freed
// node this cycle, whatever their request: held, or waiting for a
// dependency, a begin time or the start of their advance reservation
// (Reservation; a tester saw such a job, ranked ahead as every job in a
// reservation is, keep an admission back). Every other pending job may take nodes an
// admission frees if Slurm ranks it ahead (a tester saw a job whose Reason
// named a higher-priority partition start on the node freed for a job
// ranked below it).
var neverStartsNow = []string{"JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime", "Reservation"}

// partitionStopsIt are the Reasons of a pending job whose partition starts
// no job now (DOWN or INACTIVE) or never this one (over its node or time
// limit): https://slurm.schedmd.com/resource_limits.html#reasons and
// squeue(1)'s JOB REASON CODES. A tester saw a job with Reason
// PartitionDown keep every admission back. A job queued in several
// partitions shows the Reason of one of them only, so they count only for
// a job in one.
var partitionStopsIt = []string{"PartitionDown", "PartitionInactive", "PartitionNodeLimit", "PartitionTimeLimit"}

// startsNever reports whether Slurm starts pending job j on no node this
// cycle, whatever nodes an admission frees (neverStartsNow,
// partitionStopsIt, limitNoShrinkLifts).
func startsNever(j slurmcli.Job) bool {
	return slices.Contains(neverStartsNow, j.Reason) ||
		(slices.Contains(partitionStopsIt, j.Reason) || limitNoShrinkLifts(j.Reason)) && len(slurmcli.SplitPartitions(j.Partition)) == 1
}

// limitNoShrinkLifts reports whether reason is a QOS or association limit
// that no shrink lifts (squeue(1)'s JOB REASON CODES; the names are Slurm's
// job_state_reason_string): the job exceeds a per-job or per-node limit or
// asks less than a minimum (QOSMaxGRESPerJob, QOSMaxWallDurationPerJobLimit,
// QOSMinGRES), or its user's, account's or QOS's job count or cumulative
// usage is at its cap (QOSMaxJobsPerUserLimit, AssocGrpSubmitJobsLimit,
// QOSGrpCPUMinutesLimit, QOSGrpWallLimit). A shrink changes no job count
// and no usage so far. Limits on what a user, account or QOS holds now
// (QOSGrpGRES, QOSMaxGRESPerUser, AssocGrpNodeLimit, ...) and on running
// TRES-minutes (...RunMinutes) a donor's shrink may lift, so such a job
// still counts as ranked ahead, as do the generic QOSJobLimit and
// QOSResourceLimit. A job queued in several partitions shows one
// partition's Reason (a partition QOS, or a per-partition association,
// may limit it there alone), so these count only for a job in one.
func limitNoShrinkLifts(reason string) bool {
	rest, ok := strings.CutPrefix(reason, "QOS")
	if !ok {
		if rest, ok = strings.CutPrefix(reason, "Assoc"); !ok {
			return false
		}
	}
	switch {
	case strings.HasPrefix(rest, "Min"), strings.Contains(rest, "PerJob"), strings.Contains(rest, "PerNode"),
		strings.Contains(rest, "Jobs"), strings.Contains(rest, "SubmitJob"), strings.Contains(rest, "Wall"):
		return true
	}
	return strings.Contains(rest, "Minutes") && !strings.Contains(rest, "RunMinutes")
}

// tierUnread reports whether the PriorityTier of one of partitions was
// not read (tierOf).
func tierUnread(v *View, partitions string) bool {
	t, _ := tierOf(v, partitions)
	return t == planner.TierUnknown
}

// byTier is pending job j once per PriorityTier of its partitions, each
// copy with only that tier's partitions: Slurm ranks each partition's
// record of the job apart (sort_job_queue2), and each may use only its
// partition's nodes, so a job also queued in a high-tier partition ranks
// high only on that partition's nodes (a reviewer's: listed once at its
// highest tier with every partition's nodes, a user's cheap job in
// "normal,urgent" held back every admission in normal). A job whose
// tiers are one, or not all read, is itself alone.
func byTier(v *View, j slurmcli.Job) []slurmcli.Job {
	tier, mixed := tierOf(v, j.Partition)
	if !mixed || tier == planner.TierUnknown {
		return []slurmcli.Job{j}
	}
	groups := map[uint32][]string{}
	var tiers []uint32
	for _, p := range slurmcli.SplitPartitions(j.Partition) {
		t := v.Partitions[p].PriorityTier
		if groups[t] == nil {
			tiers = append(tiers, t)
		}
		groups[t] = append(groups[t], p)
	}
	out := make([]slurmcli.Job, 0, len(tiers))
	for _, t := range tiers {
		c := j
		c.Partition = strings.Join(groups[t], ",")
		out = append(out, c)
	}
	return out
}

// admitCandidates are the pending jobs squeue shows waiting for resources
// or for their turn (Reason Resources or Priority) in partitions where
// shrink-to-admit is on, at most AdmitDepth of them, in Slurm's priority
// order (inPriorityOrder), each with the nodes the reservations of every
// other pending job name (reservedByOthers). Jobs with Reason
// Priority wait behind their partition's first blocked job (Slurm's main
// scheduler stops there) and are started by the backfill scheduler, within
// bf_interval of the shrink. The reservations of the jobs behind the
// admitted one are kept too, not only those ahead of it, from the donors'
// raised limits (a tester saw a job behind a 50-s admitted job start 6.5
// min late, at its donor's raised end) and from the admitted job itself:
// Slurm would plan a job it ranks lower after the admitted one, but that
// job's plan was made with the admitted one waiting (a tester saw a job
// Slurm had backfilled start 10 min late when a shrink started the job
// ranked above it early).
//
// Every other pending job Slurm may start (neverStartsNow aside) is listed
// too, in the same order, with aheadOnly set: an admission must not free
// nodes that such a job ranked ahead of the admitted one would take. The
// order is Slurm's across partitions too: a job in a partition of a lower
// PriorityTier (extra.partition, say) is ranked behind every job of a
// higher one, whatever its priority (a tester saw Slurm start the admitted
// job, not a low-tier job with a higher priority number); a job queued in
// partitions of different tiers is listed once per tier, on that tier's
// partitions (byTier), and never admitted.
func (d *Daemon) admitCandidates(v *View) []admitCandidate {
	var waiting []slurmcli.Job // sorted alone: the others' order does not matter
	mixed := map[string]bool{} // jobs queued in partitions of different tiers, listed once per tier
	for _, j := range v.Pending {
		if startsNever(j) {
			continue
		}
		copies := byTier(v, j)
		if len(copies) > 1 {
			mixed[j.ID] = true
		}
		waiting = append(waiting, copies...)
	}
	waiting = inPriorityOrder(v, waiting)
	resv := d.reservations(v)
	out := make([]admitCandidate, 0, min(len(waiting), AdmitDepth))
	for _, j := range waiting[:min(len(waiting), AdmitDepth)] {
		c := admitCandidate{job: j}
		switch {
		case j.Reason != "Resources" && j.Reason != "Priority":
			c.aheadOnly = "Reason " + j.Reason + ": it waits for neither resources nor its turn (counted only as a job ranked ahead)"
		case !d.cfg.AdmitOn(j.Partition):
			c.aheadOnly = "shrink-to-admit is off in its partition " + j.Partition + " (counted only as a job ranked ahead)"
		case tierUnread(v, j.Partition):
			c.aheadOnly, c.butFor = "the PriorityTier of its partitions "+j.Partition+" was not read, so which jobs Slurm ranks ahead of it is unknown (counted only as a job ranked ahead)", true
		case mixed[j.ID]:
			c.aheadOnly = "its partitions have different PriorityTiers: Slurm ranks it apart in each, on that partition's nodes alone (counted only as a job ranked ahead, in each tier on its partitions' nodes; admitting it is not modelled)"
			c.butFor = true
		default:
			c.reserved = reservedByOthers(resv, j.ID) // only a job it may admit needs them
		}
		out = append(out, c)
	}
	// Jobs listed only as ranked ahead matter only to a candidate behind
	// them: none after the last candidate, nothing when there is none,
	// but for a job listed so only for what the daemon cannot tell of it
	// (butFor), whose reason is worth a line (a tester saw none logged).
	last := len(out) - 1
	for last >= 0 && out[last].aheadOnly != "" && !out[last].butFor {
		last--
	}
	return out[:last+1]
}

// tierOf is the PriorityTier under which Slurm first considers a pending
// job in partitions (squeue's comma-separated list): the highest of
// theirs (sort_job_queue2 ranks each partition's record of the job by its
// tier), planner.TierUnknown when one was not read (v.Partitions).
// mixed reports that its partitions' tiers differ: Slurm ranks the record
// of each partition apart, and each may use only its partition's nodes (a
// tester saw a job in a tier-30 partition of other nodes and a tier-1 one
// admitted onto the tier-1 nodes, where Slurm ranked a tier-10 job first).
func tierOf(v *View, partitions string) (tier uint64, mixed bool) {
	names := slurmcli.SplitPartitions(partitions)
	if len(names) == 0 {
		return planner.TierUnknown, false // no partition named: not known, never "tier 0"
	}
	for i, p := range names {
		part, ok := v.Partitions[p]
		if !ok {
			return planner.TierUnknown, false
		}
		t := uint64(part.PriorityTier)
		mixed = mixed || i > 0 && t != tier
		tier = max(tier, t)
	}
	return tier, mixed
}

// priorityOf is pending job j's planner.PriorityKey: its partitions' tier
// (tierOf), whether it runs in an advance reservation (View.InReservation:
// ranked ahead of the others of its tier) and its priority as squeue's %Q printed
// it with the placements (View.Priorities, a job array's pending tasks
// included; not known when none was read).
func priorityOf(v *View, j slurmcli.Job) planner.PriorityKey {
	prio, ok := v.Priorities[j.ID]
	tier, _ := tierOf(v, j.Partition)
	k := planner.NewPriorityKey(ok, tier, prio, j.ID)
	if v.InReservation[j.ID] {
		k = k.InReservation(v.ReservationsFirst)
	}
	return k
}

// inPriorityOrder sorts pending jobs in place in Slurm's priority order
// (planner.PriorityKey: their partitions' tiers, then in an advance
// reservation first, then their priorities read with the placements) and returns them. A job whose priority was not
// read (no placement) comes first within its tier (shrink-to-admit
// refuses it: queuedNodes).
func inPriorityOrder(v *View, jobs []slurmcli.Job) []slurmcli.Job {
	keys := make([]planner.PriorityKey, len(jobs))
	for i, j := range jobs {
		keys[i] = priorityOf(v, j)
	}
	return sortJobsBy(jobs, func(a, b int) int { return keys[a].Compare(keys[b]) })
}
