package cluster

import (
	"errors"
	"fmt"
)

// frameKind is what a coordinator frame means to a worker busy with a
// step's phase (connecting the ring, computing, all-reducing): each phase
// decides what to do with it, but they read it alike.
type frameKind int

const (
	// frameLost: the connection is gone or a read failed; the session
	// ends (classify's error says which).
	frameLost frameKind = iota
	// frameHeartbeat: nothing to do.
	frameHeartbeat
	// frameAbort: the coordinator aborts the step (a member was lost).
	frameAbort
	// frameBye: this worker is released (s.bye reads the frame).
	frameBye
	// frameOther: any other message, which the phase stashes or refuses.
	frameOther
)

// classify reads frame f as received from s.msgs (ok false: the reader
// ended and closed the channel). For frameLost it returns the error that
// ends the session, wrapping the read error when there is one.
func classify(f frame, ok bool) (frameKind, error) {
	switch {
	case !ok:
		return frameLost, errors.New("reading from the coordinator: the connection is gone")
	case f.err != nil:
		return frameLost, fmt.Errorf("reading from the coordinator: %w", f.err)
	case f.t == typeHeartbeat:
		return frameHeartbeat, nil
	case f.t == typeAbort:
		return frameAbort, nil
	case f.t == typeBye:
		return frameBye, nil
	}
	return frameOther, nil
}
