package daemon

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// afreshJob is the status comment of a d1 torch job of 4 GPUs whose run
// starts over where its checkpoint has other numerics (easyscale run
// --on-other-numerics=start-over), 5 times faster on a V100 than on a T4,
// at step STEP of 1,000.
func afreshJob(step string) string {
	return "es step=" + step + "/1000 workers=1/4 d1 req=1-4 numerics=start-over speeds=t4:0.2,v100:1"
}

// A d1 job that names no GPU type, runs on a T4 node with the V100s idle
// and whose run starts over is moved like a d2 job, onto one type: it
// restarts excluding every node of another type (both T4 nodes), and the
// decision says it starts over. The work it has done counts against the
// move (planner.MoveRequest.Redo): half way it moves, four fifths of the
// way (its rerun on V100s would end no sooner) it stays; a job whose
// comment stops saying numerics=start-over before the requeue stays, and
// so does one without it (TestTheDaemonMovesNoJobItMustNot's "a d1 job").
func TestTheDaemonMovesAD1JobThatStartsOverOntoOneType(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		withdraw   bool
		want       bool
	}{
		{name: "half way", step: "500", want: true},
		{name: "four fifths of the way", step: "800"},
		{name: "the consent withdrawn before the requeue", step: "500", withdraw: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			j := td.fake.running("10", afreshJob(tc.step), "n3", 4, 10*time.Hour, rendezvous(t, "10"))
			td.fake.set(func() { j.start = td.now.Add(-100 * time.Hour) })
			if tc.withdraw {
				td.fake.onJobs = func() { j.comment = "es step=" + tc.step + "/1000 workers=1/4 d1 req=1-4 speeds=t4:0.2,v100:1" }
			}
			td.cycle(t)
			got := td.fake.commands("scontrol")
			if !tc.want {
				if len(td.fake.commands("scontrol requeue")) != 0 {
					t.Fatalf("commands %q, want no requeue", got)
				}
				return
			}
			if want := []string{"scontrol requeue 10", "scontrol update JobId=10 ExcNodeList=n3,n4"}; !slices.Equal(got, want) {
				t.Fatalf("commands %q, want %q", got, want)
			}
			ds := decisionsOf(t, td, "move")
			if len(ds) != 1 || ds[0].Node != "n1" || !strings.Contains(ds[0].Detail, "starts over from step 0 on v100") {
				t.Fatalf("move decisions %+v, want one to n1 saying it starts over on v100", ds)
			}
		})
	}
}
