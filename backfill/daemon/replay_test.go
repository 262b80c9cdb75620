package daemon

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
)

var update = flag.Bool("update", false, "rewrite ../testdata/replay/*.json from the daemon's snapshots and decisions")

// ReplayDir holds the daemon's recorded planner snapshots and decisions;
// backfill/simulator replays them through its own path
// (TestDaemonSnapshotsReplayToTheSameDecisions).
const replayDir = "../testdata/replay"

// replayScenario is one daemon scenario whose cycles are recorded.
type replayScenario struct {
	name string
	// config changes the default configuration (nil: none).
	config func(c *config.Config)
	setup  func(td *testDaemon, t *testing.T)
	// between runs before cycle k (k ≥ 1).
	between func(td *testDaemon, k int)
	cycles  int
}

// TestDaemonSnapshotsAreRecordedForReplay runs the daemon's real cycle
// (squeue and sinfo output in Slurm 22.05's format, parsed by its
// Snapshotter) on scenarios that exercise every planner rule the daemon
// relies on: d1 and d2 type rules, the worker cap of lw=, spreading,
// capping at the job's end and whole-minute time limits, shrinks before a
// reservation, shrink-to-admit (whole nodes from the end of a donor's node
// list, max_loss, a donor refused for its single node, the raised time
// limit) and start-small (the size, the rule, the raised time limit).
// Each cycle's snapshot, questions and decisions must match the recording
// in ../testdata/replay (go test -update rewrites it), and every extra job
// it submits and every scontrol update it runs must be exactly one of the
// planner's decisions: the daemon applies decisions, it does not make
// them.
func TestDaemonSnapshotsAreRecordedForReplay(t *testing.T) {
	scenarios := []replayScenario{
		{
			name: "types-caps-and-a-reservation",
			setup: func(td *testDaemon, t *testing.T) {
				td.fake.running("10", "es-req min=1 max=4 lw=8 d1", "n1", 1, 2*time.Hour, rendezvous(t, "10"))
				td.fake.running("11", "es-req min=1 max=2 lw=6 d2", "n3", 2, 2*time.Hour, rendezvous(t, "11"))
				td.fake.running("13", "es-req min=1 max=2 lw=3 d1", "n2", 2, 2*time.Hour, rendezvous(t, "13"))
				td.fake.running("20", "", "n1", 2, 30*time.Minute, "")
			},
			between: func(td *testDaemon, k int) {
				td.advance(2 * time.Second)
				if k == 1 {
					td.fake.pending("30", "n2", 4, td.now.Add(20*time.Minute))
				}
				if k == 2 {
					td.advance(18*time.Minute + 45*time.Second)
				}
			},
			cycles: 3,
		},
		{
			name: "a-job-near-its-end",
			setup: func(td *testDaemon, t *testing.T) {
				td.fake.running("12", "es-req min=1 max=4 lw=4 d1", "n2", 1, 10*time.Minute+30*time.Second, rendezvous(t, "12"))
			},
			cycles: 1,
		},
		{
			// Elastic job 10 holds both v100 nodes; job 20 waits for one of
			// them; elastic job 11 on one t4 node can give nothing. Cycle 1
			// shrinks 10 to n1 for 20; in cycle 2 (20 still queued in the
			// fake) 10 is on one node and nobody can give anything.
			name: "shrink-to-admit",
			setup: func(td *testDaemon, t *testing.T) {
				td.fake.running("10", "es-req min=1 max=3 lw=8 d1", "n1,n2", 4, time.Hour, rendezvous(t, "10"))
				td.fake.running("11", "es-req min=1 max=2 lw=4 d1", "n3", 4, 2*time.Hour, rendezvous(t, "11"))
				q := td.fake.pending("20", "n1", 4, td.now.Add(time.Hour))
				td.fake.set(func() { q.gpuType, q.reason, q.timeLimit = "v100", "Resources", 30*time.Minute })
			},
			between: func(td *testDaemon, k int) { td.advance(2 * time.Second) },
			cycles:  2,
		},
		{
			// A rigid job holds v100 node n2 for 2 h; elastic job 20 (es-req
			// min=1 max=2) waits for both v100 nodes for 30 min: it starts
			// now on n1 with its limit raised to 60 min plus 10 %.
			name:   "start-small",
			config: func(c *config.Config) { c.StartSmall.Rule = "before-reservation" },
			setup: func(td *testDaemon, t *testing.T) {
				td.fake.running("10", "rigid", "n2", 4, 2*time.Hour, "")
				q := td.fake.pending("20", "n1,n2", 4, td.now.Add(2*time.Hour))
				td.fake.set(func() {
					q.gpuType, q.reason, q.timeLimit, q.comment = "v100", "Resources", 30*time.Minute, "es-req min=1 max=2 lw=8 d1"
				})
			},
			cycles: 1,
		},
	}
	scenarios = append(scenarios, replayScenario{
		// The default rule (ends-earlier) weighs the start: elastic job 20
		// (2 v100 nodes, 90 min, reserved in 2 h when rigid job 10 frees
		// n2) would run on n1 alone for 198 min, within the horizon (rigid
		// job 30 holds the t4 nodes for 10 h), but job 21, waiting for both
		// v100 nodes for 11 h and so ending after every running job, would
		// start 78 min later: more than the 30 min job 20 saves. Refused.
		name:   "start-small-weighed",
		setup:  func(td *testDaemon, t *testing.T) { weighedQueue(td, 2, func(*fakeJob) {}) },
		cycles: 1,
	})
	scenarios = append(scenarios, replayScenario{
		// Job 10's extra job fails at once (its coordinator is dead): in
		// cycle 2 it waits out its backoff (NoGrow) and job 11 alone may
		// grow; retry is the planner's rule, replayed with the snapshot.
		name: "a-job-whose-extra-jobs-fail",
		setup: func(td *testDaemon, t *testing.T) {
			td.fake.running("10", "es-req min=1 max=2 lw=2 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
			td.fake.running("11", "es-req min=1 max=4 lw=4 d1", "n3", 1, time.Hour, rendezvous(t, "11"))
			td.fake.pending("20", "", 1, time.Time{}) // someone waits: jobs at most double
		},
		between: func(td *testDaemon, k int) {
			td.advance(2 * time.Second)
			failExtras(td.fake, "10", true)
		},
		cycles: 2,
	})
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			td := replayDaemon(t, sc.config)
			sc.setup(td, t)
			for k := range sc.cycles {
				if k > 0 && sc.between != nil {
					sc.between(td, k)
				}
				before := len(td.fake.commands("sbatch"))
				updates := len(td.fake.commands("scontrol update"))
				r := td.cycle(t)
				checkAppliedAsPlanned(t, r, td.fake.commands("sbatch")[before:])
				checkAppliedAsDecided(t, r, td.fake.commands("scontrol update")[updates:])
				checkRecording(t, filepath.Join(replayDir, sc.name+"-"+strconv.Itoa(k+1)+".json"), NewRecording(sc.name, r))
			}
		})
	}
}

// replayDaemon is a test daemon at a fixed UTC instant whose Snapshotter
// reads Slurm's times in UTC, so the recordings do not depend on the
// machine's time zone. change, when not nil, changes its configuration.
func replayDaemon(t *testing.T, change func(*config.Config)) *testDaemon {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := config.Default()
	// The replay covers what the simulator replays of a snapshot (grows,
	// shrink-to-admit, start-small); a move to faster GPUs (move.go) is
	// not replayed, so the recorded cycles run without it.
	cfg.MoveToFaster = false
	if change != nil {
		change(cfg)
	}
	cfg.StateDB = filepath.Join(t.TempDir(), "backfill.db")
	cfg.MetricsAddress = "off"
	cfg.PollInterval = config.Duration{Duration: 2 * time.Second}
	cfg.GracePeriod = config.Duration{Duration: 10 * time.Second}
	td := newTestDaemonWith(t, newFake(now), cfg)
	td.snap.Loc = time.UTC
	return td
}

// checkAppliedAsPlanned checks that the extra jobs a cycle submitted are the
// planner's grows one for one: same node, GPU type and count, and time
// limit in minutes.
func checkAppliedAsPlanned(t *testing.T, r Report, sbatch []string) {
	t.Helper()
	if len(sbatch) != len(r.Planned.Grows) {
		t.Fatalf("planner grew %d extra jobs, the daemon submitted %d: %v", len(r.Planned.Grows), len(sbatch), sbatch)
	}
	for i, g := range r.Planned.Grows {
		c := sbatch[i]
		wantGRES := "gpu:" + g.GPUType + ":" + strconv.Itoa(g.GPUs)
		if argValue(c, "nodelist") != g.Node || argValue(c, "gres") != wantGRES || argValue(c, "time") != strconv.FormatInt(g.TimeLimit/60, 10) {
			t.Errorf("grow %+v submitted as %s: want --nodelist=%s --gres=%s --time=%d", g, c, g.Node, wantGRES, g.TimeLimit/60)
		}
	}
}

// checkAppliedAsDecided checks that the scontrol updates a cycle ran are
// the planner's shrink-to-admit and start-small decisions one for one: for
// each job, the raised time limit in whole minutes (when it is raised),
// then the node count.
func checkAppliedAsDecided(t *testing.T, r Report, updates []string) {
	t.Helper()
	var want []string
	resize := func(job string, oldLimit, newLimit time.Duration, nodes int) {
		if newLimit > oldLimit {
			want = append(want, "scontrol update JobId="+job+" TimeLimit="+strconv.FormatInt(minutes(newLimit), 10))
		}
		want = append(want, "scontrol update JobId="+job+" NumNodes="+strconv.Itoa(nodes))
	}
	if a := r.AdmitDecided; a != nil {
		for _, sh := range a.Shrinks {
			resize(sh.Job, sh.OldLimit, sh.NewLimit, sh.ToNodes)
		}
	}
	if s := r.StartSmallDecided; s != nil {
		resize(s.Job, s.OldLimit, s.NewLimit, s.ToNodes)
	}
	if !slices.Equal(updates, want) {
		t.Fatalf("the cycle ran %q; the planner decided %q", updates, want)
	}
}

func checkRecording(t *testing.T, path string, rec Recording) {
	t.Helper()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./backfill/daemon -run Replay -update records it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s: the daemon's snapshot or decisions changed (go test -update rewrites the recording after checking the diff):\n%s",
			path, firstDiff(string(want), string(b)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return "line " + strconv.Itoa(i+1) + ":\n  recorded " + al[i] + "\n  now      " + bl[i]
		}
	}
	return "lengths differ"
}
