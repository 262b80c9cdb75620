package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// daemonExcluded maps a running job's id to the nodes of its excluded
// nodes (--exclude, ExcNodeList) that this daemon added while it waited,
// not its owner: a job moved to faster GPUs restarts without its slower
// nodes (move_to_faster), a queued job is kept off pinned types
// (keep_off_pinned), and Slurm refuses to change a running job's list, so
// a job that started before the daemon put the owner's list back runs
// with the daemon's. Those nodes do not bound its growth (offNodes).
type daemonExcluded map[string][]string

// excludedByDaemon reads, for the running elastic jobs of v whose excluded
// nodes are not empty, the nodes this daemon added to them: a move record
// (state_db's moved table) whose list is the job's list now adds its
// From nodes its owner had not excluded; a keep-off record its owner did
// not release, whose list is the job's list now, adds its Nodes. nil when
// no such job runs (no query). Errors are state_db's.
func (d *Daemon) excludedByDaemon(ctx context.Context, v *View) (daemonExcluded, error) {
	lists := map[string][]string{}
	for id := range v.Elastic {
		if p, ok := v.RunningPlacements[id]; ok && p.ExcNodes != "" {
			if list, err := slurmcli.ExpandHostlist(p.ExcNodes); err == nil {
				lists[id] = list
			}
		}
	}
	if len(lists) == 0 {
		return nil, nil
	}
	moved, err := d.db.MovedJobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the moved jobs' records: %w", err)
	}
	kept, err := d.db.KeptOffJobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the kept-off jobs' records: %w", err)
	}
	out := daemonExcluded{}
	for id, list := range lists {
		if m, ok := moved[id]; ok && len(m.Set) > 0 && sameSet(list, m.Set) {
			for _, n := range m.From {
				if !slices.Contains(m.Owner, n) && !slices.Contains(out[id], n) {
					out[id] = append(out[id], n)
				}
			}
		}
		if k, ok := kept[id]; ok && !k.Released && len(k.Set) > 0 && sameSet(list, k.Set) {
			for _, n := range k.Nodes {
				if !slices.Contains(out[id], n) {
					out[id] = append(out[id], n)
				}
			}
		}
	}
	return out, nil
}

// offNodes is where elastic job e's extra jobs may not go, from its
// running placement (View.RunningPlacements): the nodes its owner
// excluded (--exclude, without added, the nodes this daemon added: an
// extra job on an excluded node would run the job where its owner said it
// must not, a tester's finding on the lab) and, when it asks node features
// (--constraint), which this daemon does not evaluate, every node but its
// own. noGrow is true when its placement was not read (squeue failed or
// did not list it) or its excluded nodes do not read: where it may run is
// unknown, so it is not grown this cycle.
func offNodes(v *View, e *ElasticJob, added []string) (noGrow bool, off []string) {
	p, ok := v.RunningPlacements[e.Job.ID]
	if !ok {
		return true, nil
	}
	excluded, err := slurmcli.ExpandHostlist(p.ExcNodes)
	if err != nil {
		return true, nil
	}
	if p.Features == "" {
		return false, slices.DeleteFunc(excluded, func(n string) bool { return slices.Contains(added, n) })
	}
	for _, n := range v.Nodes {
		if !slices.ContainsFunc(e.Base, func(b NodeAlloc) bool { return b.Node == n.Name }) {
			off = append(off, n.Name)
		}
	}
	return false, off
}
