package simulator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// TestDaemonSnapshotsReplayToTheSameDecisions replays every planner
// snapshot easyscale-backfilld recorded (../testdata/replay: lab-*.json by
// `easyscale-backfilld --once --dry-run --record` on the Slurm 22.05 lab;
// the others by backfill/daemon's TestDaemonSnapshotsAreRecordedForReplay
// from its real Snapshotter over 22.05-format output) through the
// simulator's path and expects exactly the decisions the daemon made.
func TestDaemonSnapshotsReplayToTheSameDecisions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "replay", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in ../testdata/replay (err %v)", err)
	}
	decided := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Snapshot planner.Snapshot `json:"snapshot"`
				Actions  planner.Actions  `json:"actions"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			got, err := Replay(rec.Snapshot)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, rec.Actions) {
				t.Errorf("the simulator decided\n  %+v\nthe daemon\n  %+v", got, rec.Actions)
			}
			decided += len(got.Grows) + len(got.Shrinks)
		})
	}
	if decided == 0 {
		t.Fatal("the recordings hold no decision: the test compares nothing")
	}
}
