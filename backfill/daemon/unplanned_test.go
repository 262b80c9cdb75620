package daemon

import (
	"context"
	"testing"
	"time"
)

// A job submitted a moment ago has no planned start or nodes until Slurm's
// next backfill pass; until then (at most unplanned_hold) nothing is lent
// on the nodes it may start on, so it never finds its GPUs lent (seen on
// the lab: a pinned job needing every v100 found one lent 0.2 s after its
// submission). The fake's nodes: n1, n2 v100; n3, n4 t4; 4 GPUs each, in
// partitions normal and low (extra.partition).
func TestNothingIsLentWhereAJobSlurmHasNotPlannedYetMayStart(t *testing.T) {
	tests := []struct {
		name    string
		waiting func(j *fakeJob, now time.Time) // nil: no waiting job
		after   time.Duration                   // since the daemon first saw it waiting
		want    []string                        // nodes extra jobs are submitted onto
	}{
		{name: "no waiting job: the fastest idle GPUs, n2's v100s, are lent", want: []string{"n2"}},
		{name: "a job asking 4 v100 GPUs per node holds n2: the t4s of n3 are lent",
			waiting: func(j *fakeJob, _ time.Time) { j.gpuType = "v100" }, want: []string{"n3"}},
		{name: "a job asking 4 GPUs of any type holds every node",
			waiting: func(j *fakeJob, _ time.Time) {}, want: nil},
		{name: "a job asking 4 GPUs per node with --nodelist=n2 holds n2 only",
			waiting: func(j *fakeJob, _ time.Time) { j.reqNode = "n2" }, want: []string{"n3"}},
		{name: "a job waiting for Resources, not yet planned, excluding n3 and n4 holds n1 and n2",
			waiting: func(j *fakeJob, _ time.Time) { j.excNodes, j.reason = "n[3-4]", "Resources" }, want: []string{"n3"}},
		{name: "a job held by a dependency holds nothing",
			waiting: func(j *fakeJob, _ time.Time) { j.reason = "Dependency" }, want: []string{"n2"}},
		{name: "a job waiting in the preemptible extra partition holds nothing",
			waiting: func(j *fakeJob, _ time.Time) { j.partition = "low" }, want: []string{"n2"}},
		{name: "a job Slurm has not planned after unplanned_hold holds nothing any more",
			waiting: func(j *fakeJob, _ time.Time) { j.gpuType = "v100" }, after: 61 * time.Second, want: []string{"n2"}},
		{name: "a job still within unplanned_hold holds its nodes",
			waiting: func(j *fakeJob, _ time.Time) { j.gpuType = "v100" }, after: 59 * time.Second, want: []string{"n3"}},
		{name: "a job Slurm planned on n2 holds n2 by its reservation, after unplanned_hold too",
			waiting: func(j *fakeJob, now time.Time) {
				j.gpuType, j.reason, j.schedNodes, j.start = "v100", "Resources", "n2", now.Add(30*time.Second)
			},
			after: 61 * time.Second, want: []string{"n3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			// d2: it may grow onto any type, the fastest first.
			td.fake.running("10", "es-req min=1 max=4 lw=16 d2", "n1", 4, 2*time.Hour, rendezvous(t, "10"))
			if tc.waiting != nil {
				p := td.fake.pending("50", "", 4, time.Time{})
				td.fake.set(func() {
					p.start, p.end, p.user = time.Time{}, time.Time{}, "carol"
					tc.waiting(p, td.now)
				})
			}
			if tc.after > 0 {
				// A first cycle sees the job waiting; plan nothing then (the
				// elastic job's coordinator is not ready yet).
				v, err := td.snap.Snapshot(context.Background(), td.now)
				if err != nil {
					t.Fatal(err)
				}
				td.noteWaiting(v)
				td.now = td.now.Add(tc.after)
				td.fake.set(func() { td.fake.now = td.now })
			}
			td.cycle(t)
			td.wantExtrasOn(t, tc.want)
		})
	}
}
