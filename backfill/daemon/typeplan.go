package daemon

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// allowedTypes returns the GPU types job e may grow onto: for d1 (bit-identical
// on one GPU type, the default) the types of the nodes it runs on; nil (any
// type) for d2, whose results do not depend on the type.
func allowedTypes(v *View, e *ElasticJob) map[string]bool {
	if e.Request.Determinism == elastic.D2 {
		return nil
	}
	types := map[string]bool{}
	for _, b := range e.Base {
		if n := v.node(b.Node); n != nil {
			types[n.GPUType] = true
		}
	}
	return types
}

// plan runs planner.Plan and keeps every d1 job on its own GPU type(s). The
// planner has no per-job type constraint, so when it offers a d1 job GPUs of
// another type those grows are dropped and the job is planned again, in one
// more pass per set of allowed types, over the GPUs still free: only that
// set's nodes keep idle GPUs, only the jobs of that set may grow, and every
// grow kept so far counts as an extra job (against maxima, doubling and
// per-job and per-user limits). Shrinks come from the first pass, which sees
// everything. The result's grows are never onto a type a d1 job does not run
// on.
func (d *Daemon) plan(v *View, s planner.Snapshot) (planner.Actions, error) {
	acts, err := planner.Plan(s)
	if err != nil {
		return acts, err
	}
	kept, redo := d.typeCheck(v, acts.Grows, nil)
	groups := map[string][]string{} // allowed types (sorted, joined) → jobs
	for _, job := range redo {
		k := typesKey(allowedTypes(v, v.Elastic[job]))
		groups[k] = append(groups[k], job)
	}
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		types := map[string]bool{}
		for _, t := range strings.Split(k, ",") {
			types[t] = true
		}
		more, err := planner.Plan(restricted(s, kept, types, groups[k]))
		if err != nil {
			return acts, fmt.Errorf("planning d1 jobs %v on GPU types %s: %w", groups[k], k, err)
		}
		ok, _ := d.typeCheck(v, more.Grows, groups[k])
		kept = append(kept, ok...)
	}
	acts.Grows = kept
	return acts, nil
}

// typeCheck splits grows into those that respect their job's allowed types
// (only jobs in only, when only is non-nil) and the ids of d1 jobs offered
// another type.
func (d *Daemon) typeCheck(v *View, grows []planner.Grow, only []string) (kept []planner.Grow, redo []string) {
	seen := map[string]bool{}
	for _, g := range grows {
		if only != nil && !slices.Contains(only, g.Job) {
			continue
		}
		e := v.Elastic[g.Job]
		if e == nil {
			continue
		}
		if types := allowedTypes(v, e); types != nil && !types[g.GPUType] {
			if !seen[g.Job] {
				seen[g.Job] = true
				redo = append(redo, g.Job)
				d.log.Debug("d1 job offered another GPU type; planning it on its own type", "job_id", g.Job,
					"gpu_type", g.GPUType, "runs_on", typesKey(types))
			}
			continue
		}
		kept = append(kept, g)
	}
	return kept, redo
}

// restricted returns s with the grows kept so far taken out of the idle GPUs
// and added as extra jobs, idle GPUs only on nodes of types, and only jobs
// may grow; the lent GPUs of jobs that may not grow move to OtherLent so
// per-user limits still see them.
func restricted(s planner.Snapshot, kept []planner.Grow, types map[string]bool, jobs []string) planner.Snapshot {
	taken := map[string]int{}
	extras := map[string][]planner.Extra{}
	for i, g := range kept {
		taken[g.Node] += g.GPUs
		extras[g.Job] = append(extras[g.Job], planner.Extra{ID: fmt.Sprintf("planned-%d", i), Node: g.Node, GPUs: g.GPUs, End: g.End})
	}
	out := s
	out.Nodes = slices.Clone(s.Nodes)
	for i := range out.Nodes {
		n := &out.Nodes[i]
		n.Idle = max(0, n.Idle-taken[n.Name])
		if !types[n.GPUType] {
			n.Idle = 0
		}
	}
	out.OtherLent = maps.Clone(s.OtherLent)
	if out.OtherLent == nil {
		out.OtherLent = map[string]int{}
	}
	out.Running = slices.Clone(s.Running)
	for i := range out.Running {
		j := &out.Running[i]
		j.Extras = append(slices.Clone(j.Extras), extras[j.ID]...)
		if j.Elastic && !slices.Contains(jobs, j.ID) {
			j.Elastic = false
			for _, x := range j.Extras {
				out.OtherLent[j.User] += x.GPUs
			}
		}
	}
	return out
}

func typesKey(types map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(types)), ",")
}
