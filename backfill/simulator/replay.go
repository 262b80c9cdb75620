package simulator

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// Replay loads a planner snapshot, as easyscale-backfilld takes one from
// Slurm (daemon.Report.Snapshot), into the simulator's cluster state and
// runs one planning pass of the simulator's own path on it: the
// simulator's snapshot of that state (which leaves out the jobs that
// cannot matter), planner.Plan, and applying the actions to the simulated
// cluster. It returns the actions applied, so a test can check that the
// simulator and the daemon decide the same from the same cluster. Nodes
// keep their names, types and idle GPUs; a job's GPUs on nodes the
// snapshot does not list are left out, as the planner ignores them.
// Errors: an invalid snapshot (wrapping planner.ErrInvalidSnapshot), or
// actions the simulated cluster cannot hold.
func Replay(snap planner.Snapshot) (planner.Actions, error) {
	s := &sim{cfg: Config{Speeds: snap.Speeds, Limits: snap.Limits, Policy: Elastic}, now: snap.Now,
		nodeIdx: map[string]int{}, extraByID: map[string]*extra{}, replayPending: snap.Pending, replayLent: snap.OtherLent,
		replayNothingQueued: &snap.NothingQueued}
	for i, n := range snap.Nodes {
		if _, dup := s.nodeIdx[n.Name]; dup {
			return planner.Actions{}, fmt.Errorf("simulator: replay: node %q listed twice: %w", n.Name, planner.ErrInvalidSnapshot)
		}
		s.nodeIdx[n.Name] = i
		s.nodes = append(s.nodes, node{name: n.Name, typ: n.GPUType, speed: snap.Speeds[n.GPUType], total: n.Total, free: n.Idle})
		s.total += n.Total
		s.allocated += n.Total - n.Idle
	}
	for _, j := range snap.Running {
		r := &run{j: &trace.Job{ID: j.ID, User: j.User}, id: j.ID, offSince: -1, min: j.MinGPUs, max: j.MaxGPUs, model: j.Model,
			gpuTypes: j.GPUTypes, rigid: !j.Elastic, limit: j.End, last: snap.Now, started: true, pos: len(s.running),
			noGrow: j.NoGrow, noGrowNodes: j.NoGrowNodes, offNodes: j.OffNodes}
		for _, b := range j.Base {
			if n, ok := s.nodeIdx[b.Node]; ok && b.GPUs > 0 {
				r.base = append(r.base, alloc{Node: n, GPUs: b.GPUs})
			}
		}
		if r.rigid {
			r.min, r.max = baseGPUs(r), baseGPUs(r)
		}
		for _, x := range j.Extras {
			n, ok := s.nodeIdx[x.Node]
			if !ok {
				return planner.Actions{}, fmt.Errorf("simulator: replay: extra job %q on unknown node %q: %w", x.ID, x.Node, planner.ErrInvalidSnapshot)
			}
			ex := &extra{id: x.ID, r: r, node: n, gpus: x.GPUs, end: x.End, alive: true}
			r.extras = append(r.extras, ex)
			s.nodes[n].extras = append(s.nodes[n].extras, ex)
			s.extraByID[x.ID] = ex
			s.lent += x.GPUs
		}
		s.running = append(s.running, r)
	}
	if err := s.plan(); err != nil {
		return planner.Actions{}, err
	}
	return s.lastActs, nil
}
