package slurmjob

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// StatusInterval is the least time between two comment updates, so that a
// job does not flood slurmctld with RPCs.
const StatusInterval = 10 * time.Second

// Status keeps the job's comment at `es step=S/T workers=W/L d1 req=MIN-MAX`
// (internal/elastic's status form). Updates run in the background and are
// rate limited to one per StatusInterval; the first and the final one are
// always written.
type Status struct {
	JobID   string
	Request elastic.Request
	Runner  slurmcli.Runner
	Log     hclog.Logger
	// StartsOver is written as numerics=start-over (elastic.Progress):
	// the run starts the job over where its checkpoint was computed with
	// other numerics, so the backfill daemon may move a d1 job to another
	// GPU type.
	StartsOver bool
	// Interval overrides StatusInterval (tests).
	Interval time.Duration

	mu      sync.Mutex
	last    time.Time
	pending *elastic.Progress
	busy    bool
}

// Update records the progress and writes it if the interval has passed
// (or final is true). It never blocks training, except for the final
// update. workers 0 keeps the last known count.
func (s *Status) Update(step, total int64, workers int, final bool) {
	s.mu.Lock()
	if workers < 1 && s.pending != nil {
		workers = s.pending.Workers
	}
	s.mu.Unlock()
	p := &elastic.Progress{Step: int(step), TotalSteps: int(total), Workers: max(workers, 1), StartsOver: s.StartsOver}
	interval := s.Interval
	if interval == 0 {
		interval = StatusInterval
	}
	s.mu.Lock()
	s.pending = p
	if final {
		for s.busy { // let a background write finish, then write the last word
			s.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			s.mu.Lock()
		}
	}
	due := final || s.last.IsZero() || time.Since(s.last) >= interval
	if !due || s.busy {
		s.mu.Unlock()
		return
	}
	s.busy, s.last = true, time.Now()
	s.mu.Unlock()
	write := func() {
		s.mu.Lock()
		p := s.pending
		s.mu.Unlock()
		comment := elastic.Comment{Request: s.Request, Progress: p}.String()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		// UpdateJob: after a shrink Slurm 24.11 refuses the comment unless the job's task count comes along
		if err := s.Runner.UpdateJob(ctx, s.JobID, "Comment="+comment); err != nil && s.Log != nil {
			s.Log.Warn("updating the job comment", "slurm_job_id", s.JobID, "error", err)
		}
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}
	if final {
		write()
		return
	}
	go write()
}
