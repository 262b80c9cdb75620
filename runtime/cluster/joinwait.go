package cluster

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// Waiting for joiners: Resize waits for the workers it launched, and
// AwaitWorkers, when the last member is gone, for those still on their
// way. With a local launcher (ProcLauncher) the coordinator knows which
// worker processes of this job may still join: the running ones that are
// neither members nor released (OnTheWay), joiners not yet admitted and
// workers rejoining after they lost their session, e.g. one that missed a
// committed step's all-reduce result when a rank upstream of it in the
// ring was killed (step.go's commit). It waits for those, and not for a
// timeout, when none is left.

// joinOutcome is how waitForJoiners ended.
type joinOutcome int

const (
	// joinedAll: the members reached the number asked for.
	joinedAll joinOutcome = iota
	// noneComing: fewer, and no worker is on its way (local launcher only).
	noneComing
	// joinTimedOut: fewer when JoinTimeout passed.
	joinTimedOut
)

// released tells the launcher that m was said goodbye to: its process
// exits on its own and is not waited for.
func (c *Coordinator) released(m *member) {
	if l := c.o.Launcher; l != nil {
		l.Released(m.join.Host, m.join.PID)
	}
}

// onTheWay returns how many launched worker processes may still join (see
// ProcLauncher.OnTheWay) and a channel closed when that may have changed;
// 0 and nil without a launcher.
func (c *Coordinator) onTheWay() (int, <-chan struct{}) {
	if c.o.Launcher == nil {
		return 0, nil
	}
	hn, _ := os.Hostname()
	pids := make(map[int]bool, len(c.members))
	for _, m := range c.members {
		if m.join.Host == hn {
			pids[m.join.PID] = true
		}
	}
	return c.o.Launcher.OnTheWay(func(pid int) bool { return pids[pid] })
}

// waitForJoiners admits joiners, copies of src at the boundary before step
// (-1: outside a step boundary), until there are want members, no worker
// is on its way (with a local launcher), JoinTimeout passes, or ctx ends:
// then it marks the coordinator abandoned and returns an error wrapping
// ctx.Err().
func (c *Coordinator) waitForJoiners(ctx context.Context, want int, src *trainer.Replica, step int64) (joinOutcome, error) {
	deadline := time.NewTimer(c.o.JoinTimeout)
	defer deadline.Stop()
	for len(c.members) < want {
		coming, changed := c.onTheWay()
		if changed != nil && coming == 0 && len(c.joiners) == 0 {
			return noneComing, nil
		}
		select {
		case m := <-c.joiners:
			if err := c.admit(m, src, step); err != nil {
				c.log.Warn("admission failed", "step", step, "error", err)
			}
		case <-changed:
		case <-deadline.C:
			return joinTimedOut, nil
		case <-ctx.Done():
			c.abandoned = true
			return joinTimedOut, ctx.Err()
		}
	}
	return joinedAll, nil
}

// AwaitWorkers implements trainer.WorkerAwaiter for the native engine:
// when no member is left but workers are on their way (joiners waiting
// for admission, or local worker processes not yet admitted or rejoining,
// see onTheWay), it waits for the first of them, for at most JoinTimeout,
// admits it and any other waiting joiner at the boundary before step, and
// returns the number of members. With members, or with none on its way,
// it returns at once. When ctx ends it returns an error wrapping ctx.Err()
// and then accepts only Close.
func (c *Coordinator) AwaitWorkers(ctx context.Context, src *trainer.Replica, step int64) (int, error) {
	if len(c.members) > 0 {
		return len(c.members), nil
	}
	coming, _ := c.onTheWay()
	if coming == 0 && len(c.joiners) == 0 {
		return 0, nil
	}
	t0 := time.Now()
	c.log.Info("no member left; waiting for the workers on their way", "step", step, "on_the_way", max(coming, len(c.joiners)),
		"join_timeout", c.o.JoinTimeout.String())
	outcome, err := c.waitForJoiners(ctx, 1, src, step)
	if err != nil {
		return 0, fmt.Errorf("waiting for the workers on their way at step %d: %w", step, err)
	}
	if _, err := c.Boundary(src, step); err != nil {
		return len(c.members), err
	}
	waited := float64(time.Since(t0).Microseconds()) / 1000
	if len(c.members) == 0 {
		why := "every worker on its way exited"
		if outcome == joinTimedOut {
			why = "none joined within the join timeout (a stopped or hung worker process?)"
		}
		c.log.Warn("no worker came back: "+why, "step", step, "wait_ms", waited, "join_timeout", c.o.JoinTimeout.String())
		return 0, nil
	}
	c.log.Info("waited for workers", "step", step, "world_size", len(c.members), "wait_ms", waited)
	return len(c.members), nil
}
