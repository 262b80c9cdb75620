package daemon

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// A d2 elastic job with 2 logical workers on one V100 (n2, its batch host)
// and one T4 (n3) runs both logical workers on the V100 (planner.Place), so
// its T4 only slows its all-reduce: with shed_slow_nodes the daemon
// releases n3 with `scontrol update JobId=10 NumNodes=1`, records and
// counts it, lends nothing in that cycle, and does not try again.
func TestTheDaemonReleasesTheSlowNodeAD2JobDoesNotUse(t *testing.T) {
	td := newTestDaemon(t, "shed_slow_nodes = true\n")
	j := td.fake.running("10", "es-req min=1 max=2 lw=2 d2", "n2,n3", 1, time.Hour, rendezvous(t, "10"))
	r := td.cycle(t)
	want := []string{"scontrol update JobId=10 NumNodes=1"}
	if got := td.fake.commands("scontrol update"); !slices.Equal(got, want) || !slices.Equal(r.Shed, []string{"10"}) {
		t.Fatalf("commands %q, report %q; want %q", got, r.Shed, want)
	}
	if len(r.Planned.Grows) != 0 || len(td.fake.commands("sbatch")) != 0 {
		t.Errorf("lent in the cycle that changed an allocation: grows %v", r.Planned.Grows)
	}
	if ds := decisionsOf(t, td, "shed"); len(ds) != 1 || ds[0].Job != "10" || ds[0].Node != "n3" || ds[0].GPUs != 1 {
		t.Errorf("shed decisions %+v, want one for job 10 releasing n3's 1 GPU", ds)
	}
	if got := value(td.Metrics().Sheds.WithLabelValues("ok")); got != 1 {
		t.Errorf("sheds_total{result=ok} = %v, want 1", got)
	}
	if j.nodeList != "n2" {
		t.Fatalf("job 10 on %q after the release, want n2", j.nodeList)
	}
	td.advance(2 * time.Second)
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); len(got) != 1 {
		t.Errorf("updates after the next cycle %q, want the one release", got)
	}
	if len(td.Daemon.shedTried) != 1 {
		t.Errorf("releases remembered %v, want job 10's", td.Daemon.shedTried)
	}
	td.fake.set(func() { j.state = "COMPLETED" })
	td.advance(2 * time.Second)
	td.cycle(t)
	if len(td.Daemon.shedTried) != 0 {
		t.Errorf("releases remembered after job 10 ended %v, want none (a daemon's life of jobs would pile up)", td.Daemon.shedTried)
	}
}

// Which jobs keep their nodes: the option off, a d1 job, a job whose slow
// node is its batch host (Slurm refuses a list without it), a job whose
// every node it uses, a job whose slow node sits in the middle of its
// list (NumNodes= releases the last ones), a dry run (recorded once,
// nothing run); a job whose node list or request changed between the
// snapshot and the re-read by id; and jobs in a partition the daemon does
// not manage or where running jobs are never shrunk.
func TestTheDaemonReleasesNoNodeItMustNot(t *testing.T) {
	for _, tc := range []struct {
		name, toml, comment, nodes string
		gpus                       int
		perJob                     bool // the GPUs asked per job (--gpus=gpus·nodes), not per node
		partition                  string
		changeBeforeReRead         bool
		changeRequest              string // the comment the job's owner sets between the snapshot and the re-read
		printedID                  string // what squeue's %i prints for it: a job array's task, a heterogeneous job's component
		wantDecisions              int
	}{
		{name: "option off", toml: "shed_slow_nodes = false\n", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1},
		{name: "a d1 job", toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=2 lw=2 d1", nodes: "n2,n3", gpus: 1},
		{name: "the slow node is the batch host", toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n3,n2", gpus: 1},
		{name: "the slow node is in the middle of the list", toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=3 lw=2 d2", nodes: "n2,n3,n1", gpus: 1},
		{name: "every node is used", toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=2 lw=16 d2", nodes: "n2,n3", gpus: 4},
		{name: "GPUs asked per job on two nodes: how many each holds is unknown (a tester's --gpus=5 held 1 and 4)",
			toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1, perJob: true},
		{name: "dry run", toml: "shed_slow_nodes = true\ndry_run = true\n", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1, wantDecisions: 1},
		{name: "the job changed before the re-read", toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1, changeBeforeReRead: true},
		{name: "the job's request changed to d1 before the re-read (a tester's squeue wrapper)", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1,
			changeBeforeReRead: true, changeRequest: "es-req min=1 max=2 lw=2 d1"},
		{name: "a partition the daemon does not manage (a tester's job in low with partitions = [normal])", toml: "partitions = [\"normal\"]\n",
			comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1, partition: "low"},
		{name: "a partition where running jobs are never shrunk", toml: "[admit]\noff_partitions = [\"normal\"]\n",
			comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1},
		// helper 106's: a shrink by such an id can change the other tasks or components
		{name: "a job array's task", toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1, printedID: "9_1"},
		{name: "a heterogeneous job's component", toml: "shed_slow_nodes = true\n", comment: "es-req min=1 max=2 lw=2 d2", nodes: "n2,n3", gpus: 1, printedID: "9+1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, tc.toml)
			j := td.fake.running("10", tc.comment, tc.nodes, tc.gpus, time.Hour, rendezvous(t, "10"))
			if tc.perJob {
				td.fake.set(func() { j.gpusPerJob, j.gpusPerNode = tc.gpus*j.nodes, 0 })
			}
			if tc.partition != "" {
				td.fake.set(func() { j.partition = tc.partition })
			}
			if tc.printedID != "" {
				td.fake.set(func() { j.printedID = tc.printedID })
			}
			switch {
			case tc.changeRequest != "":
				td.fake.onJobs = func() { j.comment = tc.changeRequest }
			case tc.changeBeforeReRead:
				td.fake.onJobs = func() { j.nodeList = "n1,n2" } // now on two V100 nodes: nothing to release
			}
			for range 3 {
				td.cycle(t)
				td.advance(2 * time.Second)
			}
			if got := td.fake.commands("scontrol update"); len(got) != 0 {
				t.Fatalf("updated %q; want no release", got)
			}
			if ds := decisionsOf(t, td, "shed"); len(ds) != tc.wantDecisions {
				t.Errorf("shed decisions %+v, want %d", ds, tc.wantDecisions)
			}
			if tc.changeBeforeReRead {
				if got := value(td.Metrics().Sheds.WithLabelValues("skipped")); got != 1 {
					t.Errorf("sheds_total{result=skipped} = %v, want 1", got)
				}
			}
			if tc.wantDecisions > 0 && !strings.Contains(decisionsOf(t, td, "shed")[0].Detail, "dry run") {
				t.Errorf("dry-run decision %+v does not say so", decisionsOf(t, td, "shed")[0])
			}
		})
	}
}

// On Slurm 23.02 and later a job submitted with --ntasks-per-node refuses
// the update unless NumTasks keeps its task count; the release is retried
// with it (slurmcli.Runner.UpdateJob) and goes through.
func TestTheReleaseKeepsTheTaskCountWhereSlurmAsksForIt(t *testing.T) {
	td := newTestDaemon(t, "shed_slow_nodes = true\n")
	td.fake.keepTasks = true
	j := td.fake.running("10", "es-req min=1 max=2 lw=2 d2", "n2,n3", 1, time.Hour, rendezvous(t, "10"))
	td.cycle(t)
	want := []string{"scontrol update JobId=10 NumNodes=1", "scontrol update JobId=10 NumNodes=1 NumTasks=2"}
	if got := td.fake.commands("scontrol update"); !slices.Equal(got, want) || j.nodeList != "n2" {
		t.Fatalf("commands %q, job on %q; want %q and n2", got, j.nodeList, want)
	}
}

// shed_slow_nodes is on when the file does not set it, on the Slurm series
// where releasing nodes was run (22.05): the job of
// TestTheDaemonReleasesTheSlowNodeAD2JobDoesNotUse loses its T4 node. On
// 24.11 the default is off, without an error, and the job keeps its nodes.
func TestShedSlowNodesIsOnByDefaultWhereSlurmAllowsIt(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    []string
	}{
		{"22.05.8", []string{"scontrol update JobId=10 NumNodes=1"}},
		{"24.11.5", nil},
	} {
		t.Run(tc.version, func(t *testing.T) {
			fake := newFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
			fake.version = tc.version
			cfg, err := config.Parse(`metrics_address = "off"
state_db = "` + filepath.Join(t.TempDir(), "backfill.db") + `"
`)
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.ShedSlowNodes || !cfg.ShedSlowNodesDefaulted() {
				t.Fatalf("an empty file: shed_slow_nodes %v (defaulted %v), want true by default", cfg.ShedSlowNodes, cfg.ShedSlowNodesDefaulted())
			}
			td := newTestDaemonWith(t, fake, cfg)
			td.fake.running("10", "es-req min=1 max=2 lw=2 d2", "n2,n3", 1, time.Hour, rendezvous(t, "10"))
			td.cycle(t)
			if got := td.fake.commands("scontrol update"); !slices.Equal(got, tc.want) {
				t.Fatalf("Slurm %s, shed_slow_nodes unset: updates %q, want %q", tc.version, got, tc.want)
			}
		})
	}
}

// shed_slow_nodes is refused at start on a Slurm series it was not run on
// (24.11.5's slurmctld crashed after such a shrink), naming the key and the
// fix; a dry run, which changes nothing, may keep it.
func TestShedSlowNodesIsRefusedOnASlurmItCrashed(t *testing.T) {
	for _, tc := range []struct {
		version, toml string
		wantErr       bool
	}{
		{"22.05.8", "shed_slow_nodes = true\n", false},
		{"wlm 22.05.8", "shed_slow_nodes = true\n", false}, // Debian's "slurm-wlm 22.05.8"
		{"garbled", "shed_slow_nodes = true\n", true},
		{"24.11.5", "shed_slow_nodes = true\n", true},
		{"23.02.7", "shed_slow_nodes = true\n", true},
		{"24.11.5", "shed_slow_nodes = true\ndry_run = true\n", false},
		{"24.11.5", "", false},
	} {
		t.Run(tc.version+" "+strings.TrimSpace(strings.ReplaceAll(tc.toml, "\n", " ")), func(t *testing.T) {
			fake := newFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
			fake.version = tc.version
			cfg, err := config.Parse(`metrics_address = "off"
state_db = "` + filepath.Join(t.TempDir(), "backfill.db") + `"
` + tc.toml)
			if err != nil {
				t.Fatal(err)
			}
			db, err := backfillstore.Open(cfg.StateDB)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, err = New(Options{Config: cfg, DB: db, Slurm: fake.runner(), Logger: hclog.NewNullLogger()})
			if (err != nil) != tc.wantErr {
				t.Fatalf("New: %v; want an error: %v", err, tc.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), "shed_slow_nodes") || !strings.Contains(err.Error(), "shed_slow_nodes = false")) {
				t.Errorf("error %q does not name shed_slow_nodes and the fix", err)
			}
		})
	}
}
