package slurmlab

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestLabHasFourIdleNodesWithTwoGPUTypes(t *testing.T) {
	l := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes, err := l.WaitIdle(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 {
		t.Fatalf("sinfo shows %d nodes, want 4: %+v", len(nodes), nodes)
	}
	nodesByType := map[string][]string{}
	for _, n := range nodes {
		parts := append([]string(nil), n.Partitions...)
		sort.Strings(parts) // sinfo's order of a node's partitions varies
		if strings.Join(parts, ",") != "low,normal" {
			t.Errorf("node %s partitions %v, want normal and low", n.Name, n.Partitions)
		}
		total, used := n.GPUs()
		if total != 4 || used != 0 {
			t.Errorf("node %s has %d GPUs (%d used), want 4 free", n.Name, total, used)
		}
		for _, g := range n.GRES {
			nodesByType[g.Type] = append(nodesByType[g.Type], n.Name)
		}
	}
	want := map[string]string{"v100": "n1,n2", "t4": "n3,n4"}
	for typ, names := range want {
		sort.Strings(nodesByType[typ])
		if got := strings.Join(nodesByType[typ], ","); got != names {
			t.Errorf("GPU type %s on %q, want %q", typ, got, names)
		}
	}
	if len(nodesByType) != 2 {
		t.Errorf("GPU types %v, want exactly v100 and t4", nodesByType)
	}
}

// gpuJob prints what Slurm gave the batch step: the node and its GPU variables.
const gpuJob = `#!/bin/sh
echo "node=$SLURMD_NODENAME cuda=$CUDA_VISIBLE_DEVICES job_gpus=$SLURM_JOB_GPUS"
`

func TestBatchJobSeesTheGPUsItAskedFor(t *testing.T) {
	l := Require(t)
	tests := []struct {
		name  string
		args  []string
		cuda  *regexp.Regexp
		nodes *regexp.Regexp
	}{
		{"one GPU of any type gives one device index", []string{"--gres=gpu:1"}, regexp.MustCompile(`^[0-3]$`), regexp.MustCompile(`^n[1-4]$`)},
		{"two t4 GPUs run on a t4 node with two indices", []string{"--gres=gpu:t4:2"}, regexp.MustCompile(`^[0-3],[0-3]$`), regexp.MustCompile(`^n[34]$`)},
		{"--gpus=v100:1 runs on a v100 node", []string{"--gpus=v100:1"}, regexp.MustCompile(`^[0-3]$`), regexp.MustCompile(`^n[12]$`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			id := l.Submit(t, gpuJob, append(tc.args, "-t", "1", "-o", out)...)
			if _, err := l.WaitState(context.Background(), id, 30*time.Second, "COMPLETED"); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			fields := map[string]string{}
			for _, f := range strings.Fields(string(b)) {
				k, v, _ := strings.Cut(f, "=")
				fields[k] = v
			}
			if !tc.cuda.MatchString(fields["cuda"]) || fields["cuda"] != fields["job_gpus"] {
				t.Errorf("CUDA_VISIBLE_DEVICES=%q SLURM_JOB_GPUS=%q, want %v", fields["cuda"], fields["job_gpus"], tc.cuda)
			}
			if !tc.nodes.MatchString(fields["node"]) {
				t.Errorf("ran on %q, want %v", fields["node"], tc.nodes)
			}
		})
	}
}

func TestNormalJobPreemptsLowPriorityJob(t *testing.T) {
	l := Require(t)
	ctx := context.Background()
	low := l.Submit(t, "#!/bin/sh\nsleep 300\n", "-p", "low", "-N4", "--exclusive", "-t", "5", "-o", "/dev/null")
	if _, err := l.WaitState(ctx, low, 30*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	high := l.Submit(t, "#!/bin/sh\nsleep 2\n", "-p", "normal", "-N4", "--exclusive", "-t", "1", "-o", "/dev/null")
	if _, err := l.WaitState(ctx, high, 30*time.Second, "RUNNING", "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	j, err := l.CLI.Job(ctx, low)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != "PENDING" {
		t.Errorf("low-priority job %s is %s after the normal job started, want PENDING (requeued)", low, j.State)
	}
	// Restarts is only in scontrol's text: read it here, where the job and
	// its name are the test's own (scontrol's text is not read for jobs
	// whose names users set, see package slurmcli).
	out, err := l.CLI.Output(ctx, "scontrol", "show", "job", "-o", low)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := slurmcli.ParseScontrol(out, slurmcli.KindJob)
	if err != nil || len(recs) == 0 {
		t.Fatalf("scontrol show job %s: %d records, %v", low, len(recs), err)
	}
	d, err := slurmcli.JobDetailOf(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	if d.Restarts < 1 {
		t.Errorf("low-priority job %s has Restarts=%d, want >= 1 (requeued by preemption)", low, d.Restarts)
	}
}

// TestANormalJobThatFitsOnIdleNodesPreemptsNothing is the fact the
// simulator's placement rests on (backfill/simulator slurmFit): Slurm
// starts a job on idle nodes when they hold it, even slower ones later in
// node order, and preempts low-priority work only when they do not
// (select/cons_tres tries the job without preemption first).
func TestANormalJobThatFitsOnIdleNodesPreemptsNothing(t *testing.T) {
	l := Require(t)
	ctx := context.Background()
	var low []string
	for _, n := range []string{"n1", "n2"} { // the v100 nodes, first in node order
		id := l.Submit(t, "#!/bin/sh\nsleep 300\n", "-p", "low", "-w", n, "--exclusive", "-t", "5", "-o", "/dev/null")
		if _, err := l.WaitState(ctx, id, 30*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
		low = append(low, id)
	}
	var nodes []string
	for range 2 { // n3 and n4 are idle: each fits without a preemption
		id := l.Submit(t, "#!/bin/sh\nsleep 300\n", "-p", "normal", "-N1", "--exclusive", "-t", "5", "-o", "/dev/null")
		if _, err := l.WaitState(ctx, id, 30*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
		j, err := l.CLI.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, j.NodeList)
	}
	slices.Sort(nodes)
	if !slices.Equal(nodes, []string{"n3", "n4"}) {
		t.Errorf("the normal jobs ran on %v, want the idle n3 and n4", nodes)
	}
	lowStates := func() []string { // sorted
		var states []string
		for _, id := range low {
			j, err := l.CLI.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			states = append(states, j.State)
		}
		slices.Sort(states)
		return states
	}
	if states := lowStates(); !slices.Equal(states, []string{"RUNNING", "RUNNING"}) {
		t.Errorf("the low-priority jobs are %v, want both RUNNING: nothing had to be preempted", states)
	}
	// With no idle node left, the next normal job preempts one of them,
	// and only one.
	last := l.Submit(t, "#!/bin/sh\nsleep 300\n", "-p", "normal", "-N1", "--exclusive", "-t", "5", "-o", "/dev/null")
	if _, err := l.WaitState(ctx, last, 30*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	if states := lowStates(); !slices.Equal(states, []string{"PENDING", "RUNNING"}) {
		t.Errorf("the low-priority jobs are %v after a third normal job started, want one requeued (PENDING) and one RUNNING", states)
	}
}

// Go runs a package's tests in source order: this one sees what the others left.
func TestNoNodeDrainedAfterTheJobs(t *testing.T) {
	l := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drained, err := l.DrainedNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(drained) > 0 {
		t.Errorf("drained nodes: %v", drained)
	}
	nodes, err := l.CLI.ShowNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Drained() {
			t.Errorf("scontrol shows node %s %s: %s", n.Name, n.State, n.Reason)
		}
	}
}
