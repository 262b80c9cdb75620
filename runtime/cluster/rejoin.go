package cluster

import (
	"fmt"
	"time"
)

// rejoin is RunWorker's deadline for reaching the coordinator: JoinTimeout
// from the worker's start, and again from each loss of a coordinator that
// had accepted it, however long it was connected before. The session that
// lost it is always followed by at least one attempt to rejoin.
type rejoin struct {
	timeout time.Duration
	// since is the worker's start, or (lost) the moment it last lost a
	// coordinator that had accepted it.
	since time.Time
	lost  bool
}

// ended records a session that ended at now with cause; joined says the
// coordinator had accepted the worker in it (admitted it, or queued it for
// an engine session), so the coordinator was lost at now. It returns an
// error wrapping ErrUnreachable and cause when the worker must give up,
// nil when it should try again.
func (r *rejoin) ended(now time.Time, joined bool, join string, cause error) error {
	if joined {
		r.since, r.lost = now, true
		return nil
	}
	waited := now.Sub(r.since)
	if waited < r.timeout {
		return nil
	}
	from := "since the worker started"
	if r.lost {
		from = "since it was lost"
	}
	return fmt.Errorf("coordinator %s %w for %v %s (join timeout %v): %w", join, ErrUnreachable, waited.Round(time.Millisecond), from, r.timeout, cause)
}
