package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// A standby that lost the coordinator can find the writer lock still held
// by the coordinator's dying process (its connection closed before its
// lock): while the coordinator does not answer, it waits for the lock up to
// its grace instead of rejoining a dead coordinator at once.
func TestAStandbyWaitsForADyingCoordinatorsLock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		releaseIn time.Duration // the holder closes the database after this; 0: never
		grace     time.Duration
		wantOpen  bool
	}{
		{"the lock released 300 ms after the loss is taken", 300 * time.Millisecond, 5 * time.Second, true},
		{"a lock held past the grace is the coordinator's", 0, 400 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdv := t.TempDir()
			dir := filepath.Join(rdv, "state")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			holder, err := statedb.Open(dir) // the coordinator, dying
			if err != nil {
				t.Fatal(err)
			}
			released := make(chan struct{})
			if tc.releaseIn > 0 {
				time.AfterFunc(tc.releaseIn, func() { holder.Close(); close(released) })
			} else {
				defer holder.Close()
			}
			// no coordinator file: the coordinator does not answer
			s := &slurmRun{task: &slurmjob.Task{JobID: "7", Rendezvous: rdv}, log: hclog.NewNullLogger(), lockGrace: tc.grace}
			start := time.Now()
			db, err := s.openToTakeOver(dir)
			took := time.Since(start)
			var locked *statedb.LockedError
			switch {
			case tc.wantOpen && err != nil:
				t.Fatalf("after %v: %v, want the state opened once the dying coordinator's lock is released", took, err)
			case tc.wantOpen:
				db.Close()
				select {
				case <-released:
				default:
					t.Fatalf("opened after %v while the lock was held", took)
				}
			case !errors.As(err, &locked):
				t.Fatalf("after %v: %v, want a *statedb.LockedError", took, err)
			case took < tc.grace:
				t.Fatalf("gave up after %v, before the grace of %v", took, tc.grace)
			}
		})
	}
}
