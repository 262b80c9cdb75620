package daemon

import (
	"testing"
	"time"
)

// Nothing is lent on a node a pending job's reservation names (its start
// 30 s away, too soon for any extra job to run before it), whatever
// squeue shows of its GPUs: one asking GPUs per task (or none), which
// squeue's TRES per node and per job do not show, reserves the whole node.
func TestNothingIsLentOnANodeReservedForAJobWhoseGPUsSqueueDoesNotShow(t *testing.T) {
	tests := []struct {
		name    string
		reserve bool
		gpus    int // of the reserved job, per node as squeue shows it
		lent    bool
	}{
		{name: "no reservation: job 10 grows onto n2", lent: true},
		{name: "a reservation of 4 GPUs per node on n2", reserve: true, gpus: 4},
		{name: "a reservation on n2 whose GPUs squeue does not show", reserve: true, gpus: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := newTestDaemon(t, `nodes = ["n1", "n2"]`)
			td.fake.running("10", "es-req min=1 max=2 lw=8 d1", "n1", 4, time.Hour, rendezvous(t, "10"))
			if tt.reserve {
				p := td.fake.pending("50", "n2", tt.gpus, td.now.Add(30*time.Second))
				td.fake.set(func() { p.user, p.reason = "carol", "Resources" })
			}
			r := td.cycle(t)
			if got := len(r.Submitted) > 0; got != tt.lent {
				t.Fatalf("extra jobs submitted %v (%q), want lent=%v", r.Submitted, td.fake.commands("sbatch"), tt.lent)
			}
		})
	}
}
