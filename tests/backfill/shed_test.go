package backfill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/daemon"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestTheDaemonReleasesTheT4NodeAD2JobDoesNotUse runs
// examples/slurm/mnist.sbatch as an elastic d2 job with 2 logical workers
// on n2 (one v100 GPU, its batch host) and n3 (one t4 GPU) under
// easyscale-backfilld with shed_slow_nodes and t4 at 0.3 of a v100: the
// best placement runs both logical workers on the v100, so the t4 adds
// nothing to the job's throughput (planner.ShedNodes). The runtime itself
// places them evenly (one on each GPU: it is given no speeds under Slurm),
// so the release costs a worker and its step, as any shrink does (a
// tester saw "step 33 aborted by the coordinator (a worker was lost)").
// The daemon releases n3 with `scontrol update JobId=ID NumNodes=1`; Slurm
// keeps the job RUNNING on n2, the runtime redoes the step without n3's
// worker, and the job trains to the fixed run's digest (issue 17, E31).
func TestTheDaemonReleasesTheT4NodeAD2JobDoesNotUse(t *testing.T) {
	l := slurmlab.Require(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	ver, err := l.CLI.Output(context.Background(), "scontrol", "--version")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(ver)) // "slurm 24.11.5", Debian's "slurm-wlm 22.05.8"
	if f := strings.Fields(v); len(f) != 2 || !slices.ContainsFunc(daemon.MixedShrinkSafeSeries, func(s string) bool { return strings.HasPrefix(f[1], s+".") }) {
		t.Skipf("%s: shed_slow_nodes is refused there (daemon.MixedShrinkSafeSeries; 24.11.5's slurmctld crashed after this test's shrink)", v)
	}
	job := mnistJobFile(t, l, 1)
	b, err := os.ReadFile(job)
	if err != nil {
		t.Fatal(err)
	}
	const eight = "logical_workers = 8 "
	if !strings.Contains(string(b), eight) {
		t.Fatalf("examples/mnist/job.toml has no %q line to change", eight)
	}
	if err := os.WriteFile(job, []byte(strings.Replace(string(b), eight, "logical_workers = 2 ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	const steps = 937 // one epoch of 60,000 samples at 2 × 32
	want, err := l.LocalDigest(job, steps)
	if err != nil {
		t.Fatal(err)
	}
	s := settings{dir: t.TempDir(), nodes: []string{"n2", "n3"}, worker: config.DefaultWorkerCommand,
		extra: "shed_slow_nodes = true\n[speeds]\nv100 = 1.0\nt4 = 0.3\n"}
	d := startDaemon(t, l, s, "backfilld")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	summary := filepath.Join(t.TempDir(), "summary.json")
	// What easyscale-sbatch would submit (request comment and environment,
	// --no-kill, SLURM_NO_KILL), by sbatch itself on both nodes; untyped
	// GPUs (d2 may mix types).
	req := elastic.Request{MinNodes: 1, MaxNodes: 2, LogicalWorkers: 2, Determinism: elastic.D2}
	script := mnistScriptWithoutWrapperDirectives(t, l)
	cmd := l.Command(ctx, "sbatch", "--parsable", "-N2", "-w", "n[2-3]", "--gres=gpu:1", "--no-kill",
		"--comment="+elastic.Comment{Request: req}.String(), script)
	cmd.Dir = l.Root
	cmd.Env = append(append(cmd.Env, req.Environ()...), "SLURM_NO_KILL=set", fmt.Sprintf("EASYSCALE_STEPS=%d", steps),
		"EASYSCALE_SUMMARY="+summary, "EASYSCALE_CONFIG="+job)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	jobOut := filepath.Join(l.Root, "es-mnist-"+id+".out")
	t.Cleanup(func() {
		l.CLI.Output(context.Background(), "scancel", id)
		os.RemoveAll(filepath.Join(l.Root, ".easyscale", id))
		os.Remove(jobOut)
	})
	cancelExtrasAtEnd(t, l, id)
	dump := func() string { b, _ := os.ReadFile(jobOut); return tail(string(b), 40) }

	started := waitFor(t, 90*time.Second, "job "+id+" running on n2 and n3", func() bool {
		j, err := l.CLI.Job(ctx, id)
		return err == nil && j.State == "RUNNING" && j.Nodes == 2
	})
	shedIn := waitFor(t, 90*time.Second, "job "+id+" released n3", func() bool {
		j, err := l.CLI.Job(ctx, id)
		return err == nil && j.State == "RUNNING" && j.NodeList == "n2"
	})
	t.Logf("job %s ran on n[2-3] after %v; n3 released %v later", id, started, shedIn)
	checkCompletedWithDigest(ctx, t, l, id, summary, steps, want, dump)
	// slurmctld still answers once the job and its extra jobs have ended
	// (24.11.5's died after such a job shrunk by NodeList= lost an extra job).
	time.Sleep(2 * time.Second)
	if _, err := l.CLI.Squeue(ctx); err != nil {
		t.Errorf("slurmctld after the job ended: %v", err)
	}
	d.stop(syscall.SIGTERM)
	if n := countDecisions(t, s, "shed"); n != 1 {
		t.Errorf("%d shed decisions, want 1", n)
	}
}
