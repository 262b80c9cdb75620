package daemon

import (
	"strconv"
	"testing"
	"time"
)

// Helper 112's, seen on the 22.05 lab: a maintenance reservation on V100
// node n2 began in 5 minutes, and the daemon, which read advance
// reservations only in cycles where shrink-to-admit or start-small may
// act, lent n2 for an hour. Slurm left the extra job PENDING
// (ReqNodeNotAvail, May be reserved for other job) until pending_timeout;
// for a trade up, job 10 had already lost its T4 extra job. Now every
// lend on a reserved node ends by the reservation's start (an active one:
// none is made there), and nothing is lent while reservations cannot be
// read.
func TestALendEndsBeforeAnAdvanceReservationStartsOnItsNode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		trade     bool
		start     time.Duration // from now; negative: active
		fail      string        // scontrol show reservation fails with this
		mostOnN2  int           // the longest lend on n2 (minutes), -1: none
		anySbatch bool
	}{
		{"a grow, the reservation in 5 min", false, 5 * time.Minute, "", 4, true},
		{"a trade up, the reservation in 5 min", true, 5 * time.Minute, "", 4, true},
		{"a grow, the reservation active (the T4s are too slow to mix)", false, -time.Minute, "", -1, false},
		{"a trade up, the reservation active", true, -time.Minute, "", -1, false},
		{"reservations unreadable", false, 5 * time.Minute, "slurm_load_reservations error: Unable to contact slurm controller", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			td.fake.reservations = []string{fakeReservation("maint", "n2", td.now, td.now.Add(tc.start), time.Hour, "MAINT,SPEC_NODES")}
			td.fake.reservationsFail = tc.fail
			td.fake.running("10", tradingJob, "n1", 4, 10*time.Hour, rendezvous(t, "10"))
			if tc.trade {
				recordT4Extra(t, td)
			}
			td.cycle(t)
			subs := td.fake.commands("sbatch")
			if (len(subs) > 0) != tc.anySbatch {
				t.Fatalf("submitted %q; want a lend: %v", subs, tc.anySbatch)
			}
			most := -1
			for _, s := range subs {
				if argValue(s, "nodelist") != "n2" {
					continue
				}
				lim, err := strconv.Atoi(argValue(s, "time"))
				if err != nil {
					t.Fatalf("submitted %q: no --time in minutes: %v", s, err)
				}
				most = max(most, lim)
			}
			if most != tc.mostOnN2 {
				t.Fatalf("the longest lend on n2 is %d min (-1: none), want %d: submitted %q", most, tc.mostOnN2, subs)
			}
		})
	}
}
