package daemon

import "github.com/hashicorp/go-hclog"

// unreadNote logs that one of a cycle's optional inputs (the nodes'
// weights, the pending jobs' placements, the advance reservations, ...)
// could not be read: once per distinct error while it fails, not every
// cycle (a helper counted 12 warnings in 12 s at a 1 s poll), and once
// when it reads again.
type unreadNote struct {
	last string // the error last logged; "": none
}

// note logs warn (with why) when why is a new error, and again (with
// args; "" logs nothing) when why is nil, the input was read this cycle
// (read) and an error had been logged.
func (n *unreadNote) note(log hclog.Logger, why error, read bool, warn, again string, args ...any) {
	switch {
	case why != nil && why.Error() != n.last:
		n.last = why.Error()
		log.Warn(warn, "error", why)
	case why == nil && read && n.last != "":
		n.last = ""
		if again != "" {
			log.Info(again, args...)
		}
	}
}
