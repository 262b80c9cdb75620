package simulator

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// The simulator's constant-time horizon per queued job is the daemon's
// (planner.HorizonFor) on random running sets: users drawn from a few,
// unknown ("") among them, ties included.
func TestTheSimulatorsHorizonIsThePlannersForEveryUser(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	users := []string{"", "alice", "bob", "mallory"}
	for trial := range 2000 {
		jobs := make([]planner.JobLeft, rng.IntN(6))
		for i := range jobs {
			jobs[i] = planner.JobLeft{User: users[rng.IntN(len(users))], Left: time.Duration(rng.IntN(5)) * time.Hour}
		}
		top, topUser, other := horizonTops(len(jobs), func(i int) (string, float64) { return jobs[i].User, jobs[i].Left.Seconds() })
		for _, u := range users {
			got := top
			if u != "" && u == topUser {
				got = other
			}
			if want := planner.HorizonFor(u, jobs).Seconds(); got != want {
				t.Fatalf("trial %d, jobs %+v, user %q: simulator %v s, planner %v s", trial, jobs, u, got, want)
			}
		}
	}
}
