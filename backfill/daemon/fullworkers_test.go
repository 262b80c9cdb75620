package daemon

import (
	"testing"
	"time"
)

// Helper 112's, seen on the 22.05 lab: job 10 runs 4 tasks on its 2 GPUs
// of n1, and its runtime reports that every one of its 4 logical workers
// has a worker (status comment workers=4/4). The cap of one worker per GPU
// let the daemon lend it 2 more GPUs, whose workers waited unadmitted
// (runtime/cluster: Coordinator.Boundary) for the whole lend while the
// extra job held them. Now such a job keeps what it holds; below its
// logical workers it is grown as before.
func TestNoLendToAJobWhoseWorkersCoverItsLogicalWorkers(t *testing.T) {
	for _, tc := range []struct {
		comment string
		grown   bool
	}{
		{"es step=100/100000 workers=4/4 d2 req=1-2", false},
		{"es step=100/100000 workers=2/4 d2 req=1-2", true},
	} {
		t.Run(tc.comment, func(t *testing.T) {
			td := newTestDaemon(t, "")
			td.fake.running("10", tc.comment, "n1", 2, 10*time.Hour, rendezvous(t, "10"))
			td.cycle(t)
			if subs := td.fake.commands("sbatch"); (len(subs) > 0) != tc.grown {
				t.Fatalf("submitted %q; want a lend: %v", subs, tc.grown)
			}
		})
	}
}

// Reviewer 113's: the cap above left a job on fewer nodes than its
// request's minimum (its owner writes req=; a node lost under --no-kill
// does the same) with its minimum above its maximum, and the planner
// refused the whole snapshot: no job of any user was grown, shrunk or
// admitted. Job 11, another user's in effect, must still be grown.
func TestAJobCappedBelowItsMinimumStopsNoOtherJob(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", "es step=100/100000 workers=4/4 d2 req=4-4", "n1", 1, 10*time.Hour, rendezvous(t, "10"))
	td.fake.running("11", "es step=100/100000 workers=2/4 d2 req=1-2", "n2", 2, 10*time.Hour, rendezvous(t, "11"))
	r, err := td.Cycle(t.Context())
	if err != nil {
		t.Fatalf("cycle: %v", err)
	}
	grown := false
	for _, g := range r.Planned.Grows {
		grown = grown || g.Job == "11"
	}
	if !grown {
		t.Fatalf("job 11 not grown (grows %+v, sbatch %q)", r.Planned.Grows, td.fake.commands("sbatch"))
	}
}
