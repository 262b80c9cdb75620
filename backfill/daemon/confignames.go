package daemon

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// SlurmNames are the node and partition names sinfo listed (every node,
// CPU-only ones included), to check the configuration's names against.
type SlurmNames struct {
	Nodes, Partitions map[string]bool
}

// slurmNames collects the names of nodes.
func slurmNames(nodes []slurmcli.Node) SlurmNames {
	n := SlurmNames{Nodes: map[string]bool{}, Partitions: map[string]bool{}}
	for _, nd := range nodes {
		n.Nodes[nd.Name] = true
		for _, p := range nd.Partitions {
			n.Partitions[p] = true
		}
	}
	return n
}

// configMismatches returns, for each setting of the daemon's configuration
// that names a partition or node sinfo does not list (sinfo without --all,
// as the daemon reads nodes: a hidden partition's nodes are not managed),
// or a [speeds] GPU type that matches a node's only but for its case,
// or when no node is managed at all, one line naming the key, the value and what Slurm lists
// instead. A daemon so configured runs and does nothing (a tester's
// `--once --dry-run` passed with partitions = ["nosuch"]), so the daemon
// logs each line (warnConfigMismatches). Empty when sinfo listed nothing.
func (d *Daemon) configMismatches(v *View) []string {
	known := v.Names
	if len(known.Nodes) == 0 {
		return nil
	}
	c := d.cfg
	partitions := slices.Sorted(func(yield func(string) bool) {
		for p := range known.Partitions {
			if !yield(p) {
				return
			}
		}
	})
	var out []string
	checkPartitions := func(key string, names []string) {
		for _, p := range names {
			if !known.Partitions[p] {
				out = append(out, fmt.Sprintf("%s names partition %q, which sinfo does not list (it lists %s)", key, p, strings.Join(partitions, ", ")))
			}
		}
	}
	checkPartitions("partitions", c.Partitions)
	if !known.Partitions[c.Extra.Partition] { // extra jobs are submitted to it, whether sinfo shows it or not
		out = append(out, fmt.Sprintf("extra.partition names partition %q, which sinfo does not list (it lists %s); "+
			"expected only when it is hidden (Hidden=YES in slurm.conf), else extra jobs are refused", c.Extra.Partition, strings.Join(partitions, ", ")))
	}
	checkPartitions("admit.off_partitions", c.Admit.OffPartitions)
	checkPartitions("start_small.partitions", c.StartSmall.Partitions)
	for _, n := range c.Nodes {
		if !known.Nodes[n] {
			out = append(out, fmt.Sprintf("nodes names node %q, which sinfo does not list", n))
		}
	}
	types := map[string]bool{}
	for _, n := range v.Nodes {
		if n.GPUType != "" {
			types[n.GPUType] = true
		}
	}
	set, nodeTypes := c.SpeedsSet(), slices.Sorted(maps.Keys(types))
	for _, t := range set {
		if types[t] {
			continue
		}
		for _, u := range nodeTypes {
			if strings.EqualFold(t, u) && !slices.Contains(set, u) { // a key spelt as the nodes' is there too (a reviewer's)
				out = append(out, fmt.Sprintf("speeds.%s names no node's GPU type, but nodes have %q: Slurm's GRES types are "+
					"case-sensitive, so the speed does not apply to them; spell the key %s", t, u, u))
			}
		}
	}
	if !slices.ContainsFunc(v.Nodes, func(n NodeView) bool { return n.Managed }) {
		out = append(out, "no node is managed: none of the nodes in partitions (and nodes, when set) has GPUs of one type that"+
			" gpu_types (when set) and [speeds] name; CPU-only nodes are never lent")
	}
	return out
}

// warnConfigMismatches logs each of configMismatches once while it stays.
func (d *Daemon) warnConfigMismatches(v *View) {
	lines := d.configMismatches(v)
	seen := strings.Join(lines, "\n")
	if seen == d.mismatchesLogged {
		return
	}
	d.mismatchesLogged = seen
	for _, l := range lines {
		d.log.Named("config").Warn("the configuration does not match the cluster; the daemon acts on what matches", "problem", l)
	}
}
