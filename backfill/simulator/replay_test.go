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
// simulator's path and expects exactly the decisions the daemon made: its
// grows and shrinks (Replay), and, where the cycle asked them, its
// shrink-to-admit (ReplayAdmit) and start-small (ReplayStartSmall)
// decisions, a "no" included. The recordings must hold at least one
// admission and one start-small, or the test compares nothing there.
func TestDaemonSnapshotsReplayToTheSameDecisions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "replay", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in ../testdata/replay (err %v)", err)
	}
	decided, admitted, startedSmall := 0, 0, 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Snapshot planner.Snapshot `json:"snapshot"`
				Actions  planner.Actions  `json:"actions"`
				Admit    *struct {
					Input    planner.NodeAdmitInput `json:"input"`
					Decision *planner.NodeAdmission `json:"decision"`
				} `json:"admit"`
				StartSmall *struct {
					Input    planner.NodeStartSmallInput `json:"input"`
					Decision *planner.NodeStartSmall     `json:"decision"`
				} `json:"start_small"`
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
			if rec.Admit != nil {
				a, err := ReplayAdmit(rec.Admit.Input)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, rec.Admit.Decision) {
					t.Errorf("shrink-to-admit: the simulator decided\n  %+v\nthe daemon\n  %+v", a, rec.Admit.Decision)
				}
				if a != nil {
					admitted++
				}
			}
			if rec.StartSmall != nil {
				s, err := ReplayStartSmall(rec.StartSmall.Input)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(s, rec.StartSmall.Decision) {
					t.Errorf("start-small: the simulator decided\n  %+v\nthe daemon\n  %+v", s, rec.StartSmall.Decision)
				}
				if s != nil {
					startedSmall++
				}
			}
		})
	}
	if decided == 0 || admitted == 0 || startedSmall == 0 {
		t.Fatalf("the recordings hold %d grows and shrinks, %d admissions and %d start-smalls: the test compares nothing where one is 0",
			decided, admitted, startedSmall)
	}
}

// A recorded snapshot whose job excludes a node (planner.RunningJob.
// OffNodes: its owner's --exclude, as easyscale-backfilld records it)
// replays to the planner's own decisions: the simulator's path keeps the
// job off that node too.
func TestAReplayedJobIsNotGrownOntoNodesItsOwnerExcluded(t *testing.T) {
	snap := planner.Snapshot{Now: 0, Speeds: map[string]float64{"v100": 1},
		Limits: planner.Limits{MarginSeconds: 30, MinLendSeconds: 60, MaxLendSeconds: 3600},
		Nodes: []planner.Node{{Name: "a", GPUType: "v100", Total: 4}, {Name: "b", GPUType: "v100", Total: 4, Idle: 4},
			{Name: "c", GPUType: "v100", Total: 4, Idle: 4}},
		Running: []planner.RunningJob{{ID: "1", User: "u", Elastic: true, Base: []planner.NodeGPUs{{Node: "a", GPUs: 4}},
			MinGPUs: 1, MaxGPUs: 8, Model: planner.DefaultModel(8, 4), End: 100000, OffNodes: []string{"b"}}}}
	want, err := planner.Plan(snap)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the simulator decided\n  %+v\nthe planner\n  %+v", got, want)
	}
	if len(got.Grows) != 1 || got.Grows[0].Node != "c" {
		t.Fatalf("grows %+v, want one onto c (b is excluded)", got.Grows)
	}
}
