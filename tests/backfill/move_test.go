package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestALongD2JobOnAT4IsMovedToAnIdleV100AndKeepsTheFixedRunsDigest is
// move_to_faster on the lab (issue 17: a job placed on slow GPUs keeps
// their pace to its end; BENCHMARKS.md E40), for a job that grew first
// (E54: such a job was never moved and kept the T4s' pace with every V100
// idle). Blockers hold n1 and n2 (v100), so the elastic MNIST job (d2,
// 1–2 nodes of 4 GPUs, 8 logical workers) starts on n3 (t4), and the
// daemon lends it n4 (t4) as an extra job. With the T4 at 0.6 of a V100,
// one V100 node runs it slower than its two T4 nodes, but two run it
// faster by far (E55: a move is weighed at the GPUs the job holds, its
// extra jobs' included; weighed at its own node count it was not moved).
// With move_cost 0, once the blockers end the daemon requeues the job,
// cancels its extra job and excludes both T4 nodes while it waits; Slurm
// restarts it on a V100 node, where the runtime resumes from its newest
// checkpoint, the daemon grows it onto the other V100 node, and the
// trained model is bit-identical to the fixed run on one machine. (A job
// that never grew is moved by the same code:
// TestALongD2JobOnAT4IsMovedOntoV100sLentToAnotherJob below, and the
// daemon's fake-Slurm tests.)
func TestALongD2JobOnAT4IsMovedToAnIdleV100AndKeepsTheFixedRunsDigest(t *testing.T) {
	l := slurmlab.Require(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	// One epoch of examples/mnist/job.toml (234 steps), paced
	// (trainer.FaultPaceEnv: at least 150 ms a micro-batch, 0.3 s a step on
	// one node, about a minute in all whatever the load): long enough to
	// grow, be moved and grow again while it runs, for the CPU of 234 steps
	// (five unpaced epochs did the same for five times the CPU, which the
	// suite's other tests need).
	const steps = 234
	job := filepath.Join(l.Root, "examples", "mnist", "job.toml")
	want, err := l.LocalDigest(job, steps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	blockers := blockNodes(ctx, t, l, 5*time.Minute, "n1", "n2")
	summary := filepath.Join(t.TempDir(), "summary.json")
	cmd := l.Command(ctx, filepath.Join(l.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=1-2", "--determinism=d2",
		"-N", "1", "--gres=gpu:4", "examples/slurm/mnist.sbatch")
	cmd.Dir = l.Root
	cmd.Env = append(cmd.Env, fmt.Sprintf("EASYSCALE_STEPS=%d", steps), "EASYSCALE_SUMMARY="+summary, "EASYSCALE_CONFIG="+job,
		"EASYSCALE_FAULT_PACE=150ms")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	jobOut := filepath.Join(l.Root, "es-mnist-"+id+".out")
	t.Cleanup(func() {
		exec.Command("scancel", id).Run()
		os.RemoveAll(filepath.Join(l.Root, ".easyscale", id))
		os.Remove(jobOut)
	})
	j, err := l.WaitState(ctx, id, 60*time.Second, "RUNNING")
	if err != nil || j.NodeList != "n3" {
		t.Fatalf("job %s: %+v, %v; want it running on n3", id, j, err)
	}
	waitFor(t, 60*time.Second, "job "+id+" reporting progress", func() bool {
		j, err := l.CLI.Job(ctx, id)
		return err == nil && strings.HasPrefix(j.Comment, "es step=") && !strings.HasPrefix(j.Comment, "es step=0/")
	})
	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2", "n3", "n4"}, worker: config.DefaultWorkerCommand,
		extra: "speeds = { v100 = 1.0, t4 = 0.6 }\nmove_cost = \"0s\"\n"}
	d := startDaemon(t, l, s, "backfilld")
	var lent string // its extra job on n4
	cancelExtrasAtEnd(t, l, id)
	waitFor(t, 60*time.Second, "job "+id+" growing onto n4", func() bool {
		for _, x := range extrasOf(t, l, id) {
			if x.State == "RUNNING" && x.NodeList == "n4" {
				lent = x.ID
				return true
			}
		}
		return false
	})
	if _, err := l.CLI.Output(ctx, "scancel", blockers["n1"], blockers["n2"]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "job "+id+" excluding n3 after its requeue", func() bool {
		return sameNodes(t, rawExcluded(t, l, id), []string{"n3", "n4"}) // its own and the other slower node
	})
	var ranOn, regrew string
	for {
		j, err := l.CLI.Job(ctx, id)
		if err == nil && j.State == "RUNNING" && j.NodeList != "n3" {
			ranOn = j.NodeList
		}
		if ranOn != "" && regrew == "" && j.State == "RUNNING" {
			for _, x := range extrasOf(t, l, id) {
				if x.State == "RUNNING" && x.NodeList != ranOn && (x.NodeList == "n1" || x.NodeList == "n2") {
					regrew = x.NodeList
				}
			}
		}
		if err == nil && j.State != "PENDING" && j.State != "RUNNING" && j.State != "COMPLETING" {
			break
		}
		if ctx.Err() != nil {
			b, _ := os.ReadFile(jobOut)
			t.Fatalf("job %s did not finish in time:\n%s", id, tail(string(b), 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ranOn != "n1" && ranOn != "n2" {
		t.Errorf("job %s ran again on %q, want a v100 node", id, ranOn)
	}
	if regrew == "" {
		t.Errorf("job %s was not seen grown onto the other v100 node after its move", id)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		o, _ := os.ReadFile(jobOut)
		t.Fatalf("job %s wrote no summary (%v):\n%s", id, err, tail(string(o), 40))
	}
	var sum struct {
		Digest string `json:"digest"`
		Steps  int64  `json:"steps"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("job %s: moved from n3 to %s, grown onto %s, %d steps, digest %s", id, ranOn, regrew, sum.Steps, sum.Digest)
	if sum.Steps != steps || sum.Digest != want {
		t.Errorf("moved job: %d steps, digest %s; the fixed run: %d steps, digest %s", sum.Steps, sum.Digest, steps, want)
	}
	d.stop(syscall.SIGTERM)
	if ds := decisionsOfKind(t, s, "move"); len(ds) != 1 || ds[0].Node != "n1,n2" {
		t.Errorf("move decisions %+v, want one weighed on both v100 nodes (n1,n2)", ds)
	}
	if st := rawState(t, l, lent); st != "CANCELLED" && st != "" {
		t.Errorf("the extra job %s on n4 ended %q, want CANCELLED by the move", lent, st)
	}
	if n := countDecisions(t, s, "cancel"); n < 1 {
		t.Errorf("%d cancel decisions recorded, want the extra job's", n)
	}
}

// TestALongD2JobOnAT4IsMovedOntoV100sLentToAnotherJob: the V100s of n2
// are lent to an elastic job (on n1) as an extra job when a long d2 job
// starts on the T4 node n3. The daemon moves it anyway (Slurm preempts
// extra jobs, whose partition is preemptible, for it) and excludes both T4
// nodes, so that Slurm restarts it on n2 rather than on a slower node, and
// the extra job ends by preemption.
func TestALongD2JobOnAT4IsMovedOntoV100sLentToAnotherJob(t *testing.T) {
	l := slurmlab.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	blockers := blockNodes(ctx, t, l, 4*time.Minute, "n3", "n4")
	lender, _ := submitElastic(t, l, "es-req min=1 max=8 lw=8 d2", "-w", "n1", "--gres=gpu:4", "-t", "5")
	cancelExtrasAtEnd(t, l, lender.ID)
	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2", "n3", "n4"},
		extra: "speeds = { v100 = 1.0, t4 = 0.1 }\nmove_cost = \"0s\"\n"}
	d := startDaemon(t, l, s, "backfilld")
	var lent slurmcli.Job
	waitFor(t, 30*time.Second, "an extra job of "+lender.ID+" running on n2", func() bool {
		for _, x := range extrasOf(t, l, lender.ID) {
			if x.State == "RUNNING" && x.NodeList == "n2" {
				lent = x
				return true
			}
		}
		return false
	})
	if _, err := l.CLI.Output(ctx, "scancel", blockers["n3"]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "n3 free", func() bool {
		j, err := l.CLI.Job(ctx, blockers["n3"])
		return err == nil && j.State != "RUNNING" && j.State != "COMPLETING"
	})
	mover, _ := submitElastic(t, l, "es-req min=1 max=4 lw=4 d2", "-N", "1", "--gres=gpu:4", "-t", "10")
	if mover.NodeList != "n3" {
		t.Fatalf("job %s started on %q, want the idle T4 node n3", mover.ID, mover.NodeList)
	}
	waitFor(t, 30*time.Second, "job "+mover.ID+" excluding n3 and n4 after its requeue", func() bool {
		return sameNodes(t, rawExcluded(t, l, mover.ID), []string{"n3", "n4"})
	})
	waitFor(t, 60*time.Second, "job "+mover.ID+" running again on n2", func() bool {
		j, err := l.CLI.Job(ctx, mover.ID)
		return err == nil && j.State == "RUNNING" && j.NodeList == "n2"
	})
	x, err := l.CLI.Job(ctx, lent.ID)
	if err == nil && (x.State == "RUNNING" || x.State == "PENDING") {
		t.Errorf("the extra job %s on n2 is %s after the moved job started there, want it ended", lent.ID, x.State)
	}
	d.stop(syscall.SIGTERM)
	if n := countDecisions(t, s, "move"); n != 1 {
		t.Errorf("%d move decisions recorded, want 1", n)
	}
}

// blockNodes holds every GPU of each node with a job of its own (a sleep
// for limit, its time limit) and waits until each runs; it returns their
// ids by node. The jobs are cancelled when the test ends (Lab.Submit).
func blockNodes(ctx context.Context, t *testing.T, l *slurmlab.Lab, limit time.Duration, nodes ...string) map[string]string {
	t.Helper()
	blockers := map[string]string{}
	for _, n := range nodes {
		blockers[n] = l.Submit(t, fmt.Sprintf("#!/bin/sh\nsleep %d\n", int(limit.Seconds())-50), "-w", n, "--gres=gpu:4",
			"-t", fmt.Sprint(int(limit.Minutes())))
	}
	for n, id := range blockers {
		if _, err := l.WaitState(ctx, id, 60*time.Second, "RUNNING"); err != nil {
			t.Fatalf("blocker on %s: %v", n, err)
		}
	}
	return blockers
}
