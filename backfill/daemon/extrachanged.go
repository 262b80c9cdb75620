package daemon

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// extraChanged says how the owner of this daemon's extra job x (recorded
// as rec) changed it from what was lent, "" when it is as lent: moved out
// of the partition it was lent in, or asking for or holding more than one
// node, another node than the one lent, or more GPUs than lent (rec.GPUs;
// 0: not recorded, not compared). While it waits, its owner may change
// all of these (`scontrol update JobId=ID Partition= | NumNodes= |
// ReqNodeList= | Gres=`); out of extra.partition it would outlive its
// parent and pass the per-user cap, and with more GPUs it holds what the
// daemon counts as idle, past the reservations the lend was planned
// around (two testers' findings). A lend is for what the planner lent
// only, so reconcile cancels a changed one.
func extraChanged(x *ExtraView, rec backfillstore.ExtraJob) string {
	j := x.Job
	switch {
	case j.Partition != rec.Partition:
		return fmt.Sprintf("moved by its owner out of the partition it was lent in (%s) into %s", rec.Partition, j.Partition)
	case j.Nodes > 1:
		return fmt.Sprintf("changed by its owner to %d nodes (lent one: %s)", j.Nodes, rec.Node)
	case j.State == "PENDING" && j.ReqNodes != "" && rec.Node != "" && j.ReqNodes != rec.Node:
		return fmt.Sprintf("changed by its owner to node %s (lent %s)", j.ReqNodes, rec.Node)
	case j.State != "PENDING" && x.Node != "" && rec.Node != "" && x.Node != rec.Node:
		return fmt.Sprintf("running on node %s (lent %s)", x.Node, rec.Node)
	}
	if g, err := j.GPUs(); err == nil && rec.GPUs > 0 && g > rec.GPUs {
		return fmt.Sprintf("changed by its owner to %d GPUs (lent %d on %s)", g, rec.GPUs, rec.Node)
	}
	return ""
}
