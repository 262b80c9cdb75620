package daemon

import (
	"fmt"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// extraChanged says how the owner of this daemon's extra job x (recorded
// as rec) changed it from what was lent, "" when it is as lent. Changed
// is any of:
//   - out of the extra QOS terms.qos (the configured [extra] qos; "":
//     not compared) or of the partition it was lent in;
//   - more than one node, a node list other than the one lent (emptied
//     included) while it waits, or running on another node;
//   - requeueable (lent --no-requeue), a longer time limit than lent, or
//     running to an end more than terms.startWithin past the end lent
//     (restarted: requeued while Requeue read 0 between two cycles);
//   - GPUs per task or per socket, more GPUs than lent (rec.GPUs; 0: not
//     recorded, not compared) or a GPU request it cannot read; running,
//     holding more GPUs than lent (tres-alloc: an exclusive job holds its
//     node's);
//   - more CPUs than terms.cpus, its GPUs' share of the node's CPUs
//     (cpuShare; 0: not compared): with all of a node's CPUs (`scontrol
//     update JobId=ID NumCPUs=` while it waits, measured on the 22.05
//     lab) it keeps every other job off the node's other GPUs, which the
//     daemon counts as idle.
//
// While it waits, its owner may change all of these (`scontrol update
// JobId=ID Partition= | NumNodes= | ReqNodeList= | Gres= | Requeue= |
// TimeLimit=`); out of extra.partition it would outlive its parent and
// pass the per-user cap, with more GPUs it holds what the daemon counts as
// idle, past the reservations the lend was planned around, and requeued
// with a raised limit it ran two days past its parent (testers' findings).
// A lend is for what the planner lent only, so reconcile cancels a changed
// one.
func extraChanged(x *ExtraView, rec backfillstore.ExtraJob, terms lendTerms) string {
	j := x.Job
	switch {
	case terms.qos != "" && !strings.EqualFold(j.QOS, terms.qos): // sacctmgr keeps QOS names in lower case
		// The extra QOS's limits and priority are the admin's (a partition
		// move escapes its partition's the same way).
		return fmt.Sprintf("moved by its owner out of the extra QOS %s into %q", terms.qos, j.QOS)
	case terms.account != "" && !strings.EqualFold(j.Account, terms.account): // sacctmgr keeps account names in lower case
		// Lent under its parent's account (ExtraSpec.Account), whose
		// limits and fair share the lend is charged to.
		return fmt.Sprintf("moved by its owner out of its parent's account %s into %q", terms.account, j.Account)
	case j.Partition != rec.Partition:
		return fmt.Sprintf("moved by its owner out of the partition it was lent in (%s) into %s", rec.Partition, j.Partition)
	case j.Nodes > 1:
		return fmt.Sprintf("changed by its owner to %d nodes (lent one: %s)", j.Nodes, rec.Node)
	case j.State == "PENDING" && rec.Node != "" && j.ReqNodes != rec.Node:
		// Emptied (`scontrol update ReqNodeList=`, squeue then prints ""
		// on 22.05 and 24.11): it may start on any node.
		return fmt.Sprintf("changed by its owner to node list %q (lent %s)", j.ReqNodes, rec.Node)
	case j.State != "PENDING" && x.Node != "" && rec.Node != "" && x.Node != rec.Node:
		return fmt.Sprintf("running on node %s (lent %s)", x.Node, rec.Node)
	case j.Requeue:
		// Submitted --no-requeue; requeued (`scontrol update Requeue=1`, then
		// `scontrol requeuehold`), it restarts with a whole new time limit,
		// which its owner may raise while it waits (a tester's: 2 days).
		return "made requeueable by its owner (lent --no-requeue: a requeued job restarts with a new time limit)"
	}
	// Lent for rec.Lent (its --time); in a record written before it was
	// kept, rec.End − rec.Submitted, except in an adopted one, whose End is
	// what squeue printed, not the limit lent.
	lent := rec.Lent
	if lent <= 0 && !rec.Adopted {
		lent = rec.End.Sub(rec.Submitted)
	}
	if lent > 0 {
		if limit, err := slurmcli.ParseTimeLimit(j.TimeLimit); err != nil || limit > lent {
			return fmt.Sprintf("changed by its owner to time limit %q (lent %v)", j.TimeLimit, lent)
		}
		// Running, it ends by rec.End plus the wait it was allowed
		// (terms.startWithin). Later, it was requeued and restarted with a
		// new limit: its owner may set Requeue=1 for the moment of a
		// `scontrol requeuehold` and back to 0 before this daemon reads it
		// (a tester's, on both labs; `scontrol update StartTime=now` cut the
		// wait to 0.7 s). So a requeued extra job gains at most that wait.
		// (A suspended one's end moves by the time suspended: past the end
		// lent, its lend is over too.)
		if late := x.End.Sub(rec.End); j.State != "PENDING" && !x.End.IsZero() && late > terms.startWithin {
			return fmt.Sprintf("ending %s, %v past the end lent (%s): restarted (requeued), or suspended, since it was lent",
				x.End.Format(time.RFC3339), late.Round(time.Second), rec.End.Format(time.RFC3339))
		}
	}
	// The daemon lends GPUs per node only (ExtraSpec.Args: --gres); GPUs per
	// task or per socket are its owner's, and their count depends on tasks
	// or sockets the request does not name.
	for _, req := range []struct{ what, tres string }{{"task", j.TRESPerTask}, {"socket", j.TRESPerSocket}} {
		if g, err := slurmcli.ParseGRES(req.tres); err != nil || slurmcli.GPUs(g) > 0 {
			return fmt.Sprintf("changed by its owner to GPUs per %s (%q; lent %d per node on %s)", req.what, req.tres, rec.GPUs, rec.Node)
		}
	}
	if terms.cpus > 0 && j.CPUs > terms.cpus {
		return fmt.Sprintf("changed by its owner to %d CPUs (lent %d GPUs on %s: at most %d CPUs, their share of the node's)", j.CPUs, rec.GPUs, rec.Node, terms.cpus)
	}
	if rec.GPUs <= 0 {
		return ""
	}
	g, err := j.GPUs()
	switch {
	case err != nil:
		return fmt.Sprintf("changed by its owner to a GPU request the daemon cannot read (%v; lent %d on %s)", err, rec.GPUs, rec.Node)
	case g > rec.GPUs:
		return fmt.Sprintf("changed by its owner to %d GPUs (lent %d on %s)", g, rec.GPUs, rec.Node)
	}
	// What a running job holds, whatever it asked for: an exclusive job
	// (OverSubscribe=NO) is given all of its node's GPUs (22.05: 4 for
	// --exclusive --gres=gpu:1).
	if j.State != "PENDING" {
		held, err := j.AllocatedGPUs()
		switch {
		case err != nil:
			return fmt.Sprintf("holding GPUs the daemon cannot read (%v; lent %d on %s)", err, rec.GPUs, rec.Node)
		case held > rec.GPUs:
			return fmt.Sprintf("holding %d GPUs (lent %d on %s)", held, rec.GPUs, rec.Node)
		}
	}
	return ""
}

// lendTerms are the daemon's terms for every extra job: qos, the
// configured [extra] qos ("": not compared), account, its parent's account
// as squeue prints it now ("": not compared), and startWithin, how much
// later than the end lent a running extra job may end because it started
// late (pending_timeout, after which a waiting one is cancelled, plus a
// poll interval for the cycle that sees it, plus 5 s for Slurm's
// whole-second times and sbatch's return).
type lendTerms struct {
	qos         string
	account     string
	startWithin time.Duration
	// cpus is the most CPUs the extra job may hold (cpuShare; 0: not
	// compared).
	cpus int
}

// cpuShare is the most CPUs an extra job lent gpus GPUs on node n may
// hold: its GPUs' share of the node's CPUs, rounded up, and at least 2 a
// GPU (the daemon asks one task a GPU, and Slurm's CR_Core gives a task a
// whole core: two CPUs with two threads a core). 0, not compared, when
// the node, its CPUs or its GPUs are unknown or no GPUs were recorded.
func cpuShare(n *NodeView, gpus int) int {
	if n == nil || n.CPUs <= 0 || n.Total <= 0 || gpus <= 0 {
		return 0
	}
	return max((gpus*n.CPUs+n.Total-1)/n.Total, 2*gpus)
}
