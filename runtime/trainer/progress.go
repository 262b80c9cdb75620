package trainer

import (
	"fmt"
	"time"
)

// progress prints the one-line display: step, loss, samples/s, workers,
// ETA. On a terminal the line is rewritten in place; otherwise a line is
// printed every 10% of the run.
func (j *job) progress(stepTime time.Duration) {
	w := j.opts.Progress
	if w == nil {
		return
	}
	rate := float64(j.n*j.b) / stepTime.Seconds()
	eta := time.Duration(float64(j.stop-j.step) * float64(stepTime)).Round(time.Second)
	line := fmt.Sprintf("step %d/%d  loss %.4f  %.0f samples/s  workers %d/%d  eta %s",
		j.step, j.stop, j.lastLoss, rate, j.eng.Workers(), j.n, eta)
	if j.opts.ProgressIsTerminal {
		fmt.Fprintf(w, "\r\033[K%s", line)
		return
	}
	every := max(1, j.stop/10)
	if j.step%every == 0 || j.step == j.stop {
		fmt.Fprintln(w, line)
	}
}

func (j *job) endProgress() {
	if j.opts.Progress != nil && j.opts.ProgressIsTerminal {
		fmt.Fprintln(j.opts.Progress)
	}
}
