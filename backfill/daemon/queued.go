package daemon

import (
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// queuedNodes says where queued job q may run apart from GPUs: on nodes of
// one of its partitions (squeue prints a job submitted to several as
// "a,b"), none of its --exclude, and only its --nodelist when it named
// one. why is non-empty, and may nil, when the daemon cannot tell or must
// not act for q: its placement was not read (v.Placements), it asks for
// node features (--constraint, which the daemon does not check), a node
// list does not parse, or it waits in extra.partition (preemptible work
// never shrinks another job or starts early). Shrink-to-admit and
// start-small act only on what this allows, so a job that excludes the
// nodes they would free makes no other job shrink.
func (d *Daemon) queuedNodes(v *View, q slurmcli.Job) (may func(node string) bool, why string) {
	parts := strings.Split(q.Partition, ",")
	if slices.Contains(parts, d.cfg.Extra.Partition) {
		return nil, "it waits in the preemptible partition " + d.cfg.Extra.Partition
	}
	p, ok := v.Placements[q.ID]
	if !ok {
		return nil, "its --exclude and --constraint could not be read"
	}
	if p.Features != "" {
		return nil, "it asks for node features (--constraint " + p.Features + "), which this daemon does not check"
	}
	excluded, err := expandHostlist(p.ExcNodes)
	if err != nil {
		return nil, "its --exclude does not parse"
	}
	var only []string
	if q.ReqNodes != "" {
		if only, err = expandHostlist(q.ReqNodes); err != nil {
			return nil, "its --nodelist does not parse"
		}
	}
	inPartition := map[string]bool{}
	for _, n := range v.Nodes {
		if slices.ContainsFunc(n.Partitions, func(p string) bool { return slices.Contains(parts, p) }) {
			inPartition[n.Name] = true
		}
	}
	return func(node string) bool {
		return inPartition[node] && !slices.Contains(excluded, node) && (only == nil || slices.Contains(only, node))
	}, ""
}
