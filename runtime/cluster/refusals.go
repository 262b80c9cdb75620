package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Anyone who can reach a coordinator's port can open connections that it
// refuses (no token, another job or protocol version); a log line for
// each would let them fill its log. So refusals are logged one by one
// only up to refusalBurst per refusalInterval, and the rest counted: one
// summary line when the interval ends says how many were not logged.
// Every refusal is counted (Coordinator.Refused, Listener.Refused).
const (
	refusalBurst    = 5
	refusalInterval = time.Minute
)

// refusalLog counts refused connections and logs them at a bounded rate:
// at most burst lines one by one per interval, then one summary line at
// the interval's end with the refusals not logged and the total. close
// logs the summary still due.
type refusalLog struct {
	log      hclog.Logger
	burst    int
	interval time.Duration

	total atomic.Uint64

	mu sync.Mutex
	// windowEnd is the end of the current interval; logged counts the
	// refusals logged one by one in it.
	windowEnd time.Time
	logged    int
	// suppressed counts the refusals not logged since the last summary;
	// flush logs that summary at windowEnd (nil: none due).
	suppressed uint64
	flush      *time.Timer
	closed     bool
}

func newRefusalLog(log hclog.Logger) *refusalLog {
	return &refusalLog{log: log, burst: refusalBurst, interval: refusalInterval}
}

// refused counts one refused connection and logs it as msg with args
// (key-value pairs) and the total so far, unless this interval's lines
// are spent.
func (r *refusalLog) refused(msg string, args ...any) {
	total := r.total.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.After(r.windowEnd) {
		r.windowEnd, r.logged = now.Add(r.interval), 0
	}
	if r.logged < r.burst {
		r.logged++
		r.log.Warn(msg, append(args, "refused_total", total)...)
		if r.logged == r.burst {
			r.log.Warn("further refused connections are only counted until this interval ends, then summed up in one line", "interval", r.interval.String())
		}
		return
	}
	r.suppressed++
	if r.flush == nil && !r.closed {
		r.flush = time.AfterFunc(time.Until(r.windowEnd), r.summary)
	}
}

// Total is how many connections were refused, logged or not.
func (r *refusalLog) Total() uint64 { return r.total.Load() }

// summary logs how many refusals were not logged since the last summary.
func (r *refusalLog) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flush = nil
	r.summaryLocked()
}

func (r *refusalLog) summaryLocked() {
	if r.suppressed == 0 {
		return
	}
	r.log.Warn("refused connections not logged one by one", "not_logged", r.suppressed, "refused_total", r.total.Load())
	r.suppressed = 0
}

// close logs the summary still due; later refusals are counted and logged
// up to the burst, without summaries.
func (r *refusalLog) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.flush != nil {
		r.flush.Stop()
		r.flush = nil
	}
	r.summaryLocked()
}
