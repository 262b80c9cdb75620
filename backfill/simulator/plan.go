package simulator

import (
	"fmt"
	"strconv"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// plan runs one planner cycle on the simulated cluster and applies it.
func (s *sim) plan() error {
	s.lastActs = planner.Actions{}
	idle := s.total - s.allocated
	if idle == 0 && ((s.resv.r == nil && len(s.replayPending) == 0) || s.lent == 0) {
		return nil // nothing to lend and nothing to take back
	}
	// As the daemon: no queued job, so a job may grow back to its maximum
	// in one round.
	snap := planner.Snapshot{Now: s.now, Speeds: s.cfg.Speeds, Limits: s.cfg.Limits, NothingQueued: len(s.queue) == 0}
	snap.Limits.RescaleSeconds, snap.Limits.TradeUp = s.cfg.RescaleCost, s.cfg.TradeUp
	if s.replayNothingQueued != nil {
		snap.NothingQueued = *s.replayNothingQueued
	}
	if s.snapNodes == nil {
		for _, nd := range s.nodes {
			s.snapNodes = append(s.snapNodes, planner.Node{Name: nd.name, GPUType: nd.typ, Total: nd.total})
		}
	}
	for n := range s.nodes {
		s.snapNodes[n].Idle = s.nodes[n].free
	}
	snap.Nodes, snap.NodeIndex = s.snapNodes, s.nodeIdx
	reserved := map[int]bool{}
	for _, h := range s.holds {
		for _, a := range h.allocs {
			reserved[a.Node] = true
		}
	}
	for _, p := range s.replayPending {
		for _, ng := range p.PlannedNodes {
			if n, ok := s.nodeIdx[ng.Node]; ok {
				reserved[n] = true
			}
		}
	}
	for u, g := range s.replayLent {
		if snap.OtherLent == nil {
			snap.OtherLent = map[string]int{}
		}
		snap.OtherLent[u] += g
	}
	snap.Running = make([]planner.RunningJob, 0, len(s.running))
	for _, r := range s.running {
		if s.planRelevant(r, reserved) {
			snap.Running = append(snap.Running, s.runningJob(r))
			continue
		}
		for _, x := range r.extras {
			if snap.OtherLent == nil {
				snap.OtherLent = map[string]int{}
			}
			snap.OtherLent[r.j.User] += x.gpus
		}
	}
	// As the daemon, which reads every planned start squeue --start
	// shows: the pass's holdings (conservative backfill).
	for _, h := range s.holds {
		if h.r.started {
			continue
		}
		pj := planner.PendingJob{ID: h.r.id, PlannedStart: h.t}
		for _, a := range h.allocs {
			pj.PlannedNodes = append(pj.PlannedNodes, planner.NodeGPUs{Node: s.nodes[a.Node].name, GPUs: a.GPUs})
		}
		snap.Pending = append(snap.Pending, pj)
	}
	snap.Pending = append(snap.Pending, s.replayPending...)
	acts, err := planner.Plan(snap)
	if err != nil {
		return fmt.Errorf("simulator: planning at %d s: %w", s.now, err)
	}
	s.lastActs = acts
	return s.apply(acts)
}

// planRelevant reports whether the planner can act on r or needs its
// release times: it may grow, holds GPUs (its own or lent) on a node a
// reservation needs, or counts against a per-user limit. Leaving the others
// out changes no decision.
func (s *sim) planRelevant(r *run, reserved map[int]bool) bool {
	total := 0
	for _, a := range r.base {
		total += a.GPUs
		if reserved[a.Node] {
			return true
		}
	}
	for _, x := range r.extras {
		total += x.gpus
		if reserved[x.node] {
			return true
		}
	}
	// A job with extra jobs may trade them up (planner: tradeup.go) on a
	// cluster of several GPU types.
	return total < r.max || len(r.extras) > 0 && s.cfg.TradeUp && len(s.cfg.Speeds) > 1
}

func (s *sim) runningJob(r *run) planner.RunningJob {
	j := planner.RunningJob{ID: r.id, User: r.j.User, Elastic: !r.rigid, End: r.limit,
		MinGPUs: r.min, MaxGPUs: r.max, Model: r.model, GPUTypes: r.gpuTypes, Speeds: r.j.Speeds,
		NoGrow: r.noGrow, NoGrowNodes: r.noGrowNodes, OffNodes: r.offNodes}
	if r.snapBase == nil {
		for _, a := range r.base {
			r.snapBase = append(r.snapBase, planner.NodeGPUs{Node: s.nodes[a.Node].name, GPUs: a.GPUs})
		}
	}
	j.Base = r.snapBase
	if r.rate > 0 && !r.rigid {
		j.TimeLeft = max(r.rem, 0) / r.rate
	}
	for _, x := range r.extras {
		j.Extras = append(j.Extras, planner.Extra{ID: x.id, Node: s.nodes[x.node].name, GPUs: x.gpus, End: x.end})
	}
	return j
}

func (s *sim) apply(acts planner.Actions) error {
	for _, sh := range acts.Shrinks {
		x, ok := s.extraByID[sh.Extra]
		if !ok {
			return fmt.Errorf("simulator: planner shrank unknown extra job %q", sh.Extra)
		}
		s.res.Shrinks++
		if sh.Deadline <= s.now {
			s.endExtra(x)
			continue
		}
		x.end = sh.Deadline
		s.pushExtra(x)
	}
	byID := make(map[string]*run, len(s.running))
	for _, r := range s.running {
		byID[r.id] = r
	}
	grown := map[*run]bool{}
	var order []*run
	for _, g := range acts.Grows {
		r, ok := byID[g.Job]
		n, okN := s.nodeIdx[g.Node]
		if !ok || !okN || s.nodes[n].free < g.GPUs {
			return fmt.Errorf("simulator: planner grew job %q by %d GPUs on node %q that cannot hold them", g.Job, g.GPUs, g.Node)
		}
		if !grown[r] {
			s.advance(r)
			grown[r] = true
			order = append(order, r)
		}
		s.nextX++
		x := &extra{id: "x" + strconv.Itoa(s.nextX), r: r, node: n, gpus: g.GPUs, end: g.End, alive: true}
		s.extraByID[x.id] = x
		r.extras = append(r.extras, x)
		s.nodes[n].extras = append(s.nodes[n].extras, x)
		s.nodes[n].free -= g.GPUs
		s.allocated += g.GPUs
		s.lent += g.GPUs
		s.res.Grows++
		s.pushExtra(x)
	}
	for _, r := range order {
		s.reschedule(r)
	}
	return nil
}

func (s *sim) pushExtra(x *extra) {
	s.push(event{t: x.end, x: x})
}
