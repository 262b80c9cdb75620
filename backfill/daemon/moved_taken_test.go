package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// movedTargetsTaken: a moved job's faster nodes count as taken once fewer
// of the nodes left to it (outside the list the daemon set) than it asks
// for hold its GPUs per node idle; the nodes in the set never count, and a
// request of no GPUs or no nodes is never taken.
func TestMovedTargetsTaken(t *testing.T) {
	for _, tc := range []struct {
		name           string
		perNode, nodes int
		free           map[string]int
		set            []string
		taken          bool
		left           []string
	}{
		{name: "both V100 nodes idle", perNode: 4, nodes: 1, free: map[string]int{"n1": 4, "n2": 4, "n3": 4, "n4": 4},
			set: []string{"n3", "n4"}, left: []string{"n1", "n2"}},
		{name: "another job took both V100 nodes (the tester's case)", perNode: 4, nodes: 1,
			free: map[string]int{"n1": 0, "n2": 0, "n3": 4, "n4": 4}, set: []string{"n3", "n4"}, taken: true, left: []string{"n1", "n2"}},
		{name: "one V100 node taken, the other still holds it", perNode: 4, nodes: 1,
			free: map[string]int{"n1": 0, "n2": 4, "n3": 4, "n4": 4}, set: []string{"n3", "n4"}, left: []string{"n1", "n2"}},
		{name: "a V100 node partly taken no longer holds 4 GPUs", perNode: 4, nodes: 1,
			free: map[string]int{"n1": 3, "n2": 0}, set: []string{"n3", "n4"}, taken: true, left: []string{"n1", "n2"}},
		{name: "two nodes asked, one left", perNode: 2, nodes: 2, free: map[string]int{"n1": 4, "n2": 1},
			set: []string{"n3"}, taken: true, left: []string{"n1", "n2"}},
		{name: "two nodes asked, two left", perNode: 2, nodes: 2, free: map[string]int{"n1": 2, "n2": 2},
			set: []string{"n3"}, left: []string{"n1", "n2"}},
		{name: "idle GPUs in the set do not count", perNode: 4, nodes: 1, free: map[string]int{"n3": 4, "n4": 4},
			set: []string{"n3", "n4"}, taken: true},
		{name: "no node left to it at all (down or drained)", perNode: 4, nodes: 1, free: map[string]int{},
			set: []string{"n3", "n4"}, taken: true},
		{name: "a request of no GPUs is never taken", perNode: 0, nodes: 1, free: map[string]int{"n1": 0},
			set: []string{"n3"}, left: []string{"n1"}},
		{name: "a request of no nodes is never taken", perNode: 4, nodes: 0, free: map[string]int{"n1": 0},
			set: []string{"n3"}, left: []string{"n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken, left := movedTargetsTaken(tc.perNode, tc.nodes, tc.free, tc.set)
			if taken != tc.taken || !slices.Equal(left, tc.left) {
				t.Fatalf("movedTargetsTaken(%d, %d, %v, %q) = %v, %q; want %v, %q",
					tc.perNode, tc.nodes, tc.free, tc.set, taken, left, tc.taken, tc.left)
			}
		})
	}
}

// The tester's case on the lab: job 10 is moved off its T4 (n3) to the
// idle V100s and waits excluded from both T4 nodes; another user's job
// takes both V100 nodes before Slurm starts it. The next cycle puts the
// owner's (empty) list back, so that it may start on a T4 again at once
// rather than after moveWaitBound. While a V100 node still holds its 4
// GPUs idle, or holds them in this daemon's extra job (running, or
// completing as Slurm preempts it for the moved job), it keeps its
// exclusions.
func TestAMovedJobWhoseFasterNodesAreTakenMayStartAnywhereAtOnce(t *testing.T) {
	moved := func(t *testing.T, td *testDaemon) *fakeJob {
		t.Helper()
		j := td.fake.running("10", movingJob, "n3", 4, 10*time.Hour, rendezvous(t, "10"))
		if r := td.cycle(t); !slices.Equal(r.Moved, []string{"10"}) {
			t.Fatalf("moved %q, want job 10", r.Moved)
		}
		if got := td.fake.commands("scontrol update JobId=10 ExcNodeList="); !slices.Equal(got, []string{"scontrol update JobId=10 ExcNodeList=n3,n4"}) {
			t.Fatalf("updates %q after the move, want n3,n4 excluded", got)
		}
		return j
	}
	state := func(t *testing.T, td *testDaemon) backfillstore.MoveState {
		t.Helper()
		m, err := td.db.MovedJobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return m["10"].State
	}
	t.Run("another user's job takes both V100 nodes", func(t *testing.T) {
		td := newTestDaemon(t, "")
		j := moved(t, td)
		other := td.fake.running("30", "", "n1,n2", 4, time.Hour, "")
		td.fake.set(func() { other.user = "mallory" })
		td.advance(2 * time.Second)
		r := td.cycle(t)
		want := []string{"scontrol update JobId=10 ExcNodeList=n3,n4", "scontrol update JobId=10 ExcNodeList="}
		if got := td.fake.commands("scontrol update JobId=10 ExcNodeList="); !slices.Equal(got, want) {
			t.Fatalf("updates %q in the cycle after the V100s were taken, want %q (the owner's empty list back)", got, want)
		}
		if j.excNodes != "" || !slices.Equal(r.MoveRestored, []string{"10"}) || state(t, td) != backfillstore.MoveRestored {
			t.Fatalf("excluded %q, restored %q, state %q; want none, job 10, restored", j.excNodes, r.MoveRestored, state(t, td))
		}
		if got := value(td.Metrics().Moves.WithLabelValues("restored")); got != 1 {
			t.Errorf("moves_total{result=restored} = %v, want 1", got)
		}
	})
	for _, tc := range []struct {
		name  string
		setup func(td *testDaemon)
	}{
		{name: "the V100 nodes stay idle"},
		{name: "another job takes one V100 node, the other still holds the job", setup: func(td *testDaemon) {
			other := td.fake.running("30", "", "n1", 4, time.Hour, "")
			td.fake.set(func() { other.user = "mallory" })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			j := moved(t, td)
			if tc.setup != nil {
				tc.setup(td)
			}
			for range 3 {
				td.advance(20 * time.Second)
				td.cycle(t)
			}
			if got := td.fake.commands("scontrol update JobId=10 ExcNodeList="); len(got) != 1 || j.excNodes != "n3,n4" {
				t.Fatalf("updates %q, excluded %q; want the move's only, n3,n4 kept", got, j.excNodes)
			}
			if s := state(t, td); s != backfillstore.MoveExcluded {
				t.Fatalf("state %q, want excluded", s)
			}
		})
	}
	t.Run("the V100s are this daemon's extra job's, running then completing", func(t *testing.T) {
		td := lentV100Cluster(t, func(*testDaemon) {})
		j := td.fake.job("10")
		if r := td.cycle(t); !slices.Equal(r.Moved, []string{"10"}) {
			t.Fatalf("moved %q, want job 10", r.Moved)
		}
		x := td.fake.job("21")
		for i := range 3 {
			if i == 1 {
				td.fake.set(func() { x.state = "COMPLETING" }) // Slurm preempts it for job 10
			}
			td.advance(2 * time.Second)
			td.cycle(t)
		}
		if got := td.fake.commands("scontrol update JobId=10 ExcNodeList="); len(got) != 1 || j.excNodes != "n3,n4" {
			t.Fatalf("updates %q, excluded %q; want the move's only, n3,n4 kept while n1's GPUs are the extra job's", got, j.excNodes)
		}
		if s := state(t, td); s != backfillstore.MoveExcluded {
			t.Fatalf("state %q, want excluded", s)
		}
	})
}
