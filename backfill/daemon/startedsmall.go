package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// followStartedSmall takes each start-small recorded in state_db one step
// on and returns the records still held, by job id (planStartSmall starts
// none of those jobs small again):
//
//   - the job is gone, or Slurm lists its id under another user (the id
//     was reused; compareOwner, by uid): the record is deleted; for a
//     record without a uid (schema before 10), under a stand-in instead of
//     the recorded name (ownerUnresolved), the record is kept and nothing
//     done;
//   - the job waits or runs with more nodes than the daemon set, or more
//     GPUs in all than it asked for on those (its owner set its request
//     back), and a time limit within the daemon's
//     raise (setBack): the old limit is put back (`scontrol update
//     TimeLimit=`; a running job past it ends, as it would have at the size
//     it asked for), since the raise covered its work on fewer nodes only,
//     and the record marked restored;
//   - otherwise nothing changes.
//
// A record stays until the job is gone, so a job is started small once at
// most. A refused update is logged and tried again next cycle; only a
// database error is returned. A dry run changes nothing.
func (d *Daemon) followStartedSmall(ctx context.Context, v *View, r *Report) (map[string]backfillstore.StartedSmall, error) {
	recs, err := d.db.StartedSmallJobs(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range sortedIDs(recs) {
		rec := recs[id]
		rec.UID = v.recordUID(rec.User, rec.UID)
		recs[id] = rec
		j, listed := v.All[id]
		if !listed {
			if _, unreadable := v.Unreadable[id]; unreadable {
				continue
			}
		}
		match := ownerOther
		if listed {
			match = compareOwner(owner{rec.User, rec.UID}, j)
		}
		if match == ownerUnknown {
			continue // kept, unchanged, until squeue prints the name
		}
		if match != ownerSame {
			delete(recs, id)
			if !d.cfg.DryRun {
				if err := d.db.ForgetStartedSmall(ctx, id); err != nil {
					return nil, err
				}
			}
			continue
		}
		nodes, gpus, back := setBack(j, rec)
		if rec.Restored || d.cfg.DryRun || !back {
			continue
		}
		log := d.log.Named("start_small").With("job_id", id, "user", j.User)
		if err := d.resize.SetTimeLimit(ctx, id, minutes(rec.OldLimit)); err != nil {
			log.Warn("putting back the time limit of a job started small whose owner set its node count back failed; trying again next cycle", "error", err)
			continue
		}
		detail := fmt.Sprintf("its owner set its request back to %d nodes, %d GPUs (the daemon set %d nodes, %d GPUs), job %s: time limit %s -> %d min, as asked",
			nodes, gpus, rec.ToNodes, rec.GPUs, strings.ToLower(j.State), j.TimeLimit, minutes(rec.OldLimit))
		log.Warn("put back the time limit start-small raised", "detail", detail)
		rec.Restored = true
		recs[id] = rec
		r.StartSmallRestored = append(r.StartSmallRestored, id)
		if err := d.db.PutStartedSmall(ctx, rec); err != nil {
			return nil, err
		}
		if err := d.decide(ctx, "start-small-restore", id, "", "", 0, detail); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// setBack reports whether job j, started small as rec says, holds or asks
// for more nodes than the daemon set, or more GPUs in all than it asked
// for on those (rec.GPUs, when recorded: more GPUs per node is a set-back
// too, a tester's finding), while its time limit is still above the one
// it asked for and no higher than the daemon raised it to (a higher one is
// an admin's, who alone may raise a limit; an owner may only lower it,
// which does not take it out of the raise). Its owner may set it back
// while it waits or, as Slurm 22.05 lists a requeued job's new request
// only once it runs, before it starts. nodes and gpus are what it holds
// or asks for (gpus 0 when its request does not read).
func setBack(j slurmcli.Job, rec backfillstore.StartedSmall) (nodes, gpus int, back bool) {
	if j.State != "PENDING" && j.State != "RUNNING" || rec.NewLimit <= rec.OldLimit {
		return 0, 0, false
	}
	nodes = j.Nodes
	if names, err := slurmcli.ExpandHostlist(j.NodeList); err == nil && j.NodeList != "" && j.NodeList != "(null)" {
		nodes = max(nodes, len(names))
	}
	gpus = gpusOn(j, nodes)
	if nodes <= rec.ToNodes && (rec.GPUs == 0 || gpus <= rec.GPUs) {
		return nodes, gpus, false
	}
	limit, err := slurmcli.ParseTimeLimit(j.TimeLimit)
	return nodes, gpus, err == nil && limit > rec.OldLimit && limit <= rec.NewLimit
}

// gpusOn is how many GPUs in all job j asks for on nodes nodes
// (slurmcli.Job.GPUs: the larger of its --gpus count and its GPUs per
// node times nodes); 0 when its request does not read.
func gpusOn(j slurmcli.Job, nodes int) int {
	j.Nodes = nodes
	g, err := j.GPUs()
	if err != nil {
		return 0
	}
	return g
}
