package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestTorchShrinkByScontrolKeepsTheLocalDigest submits
// examples/slurm/torch-mnist.sbatch on 3 nodes with easyscale-sbatch: task
// 0 coordinates and trains on its own Python process, the other tasks'
// workers join with theirs; the job is shrunk to 2 nodes with scontrol
// update mid-run (Slurm kills a task, its Python process dies with it, the
// step is redone) and ends with the digest of a local fixed run.
func TestTorchShrinkByScontrolKeepsTheLocalDigest(t *testing.T) {
	lab := slurmlab.RequireTorch(t)
	const steps = 150
	want := localTorchDigest(t, lab, steps)
	summary := filepath.Join(t.TempDir(), "summary.json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := lab.Command(ctx, filepath.Join(lab.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=3-4", "examples/slurm/torch-mnist.sbatch")
	cmd.Dir = lab.Root
	cmd.Env = append(cmd.Env, fmt.Sprintf("EASYSCALE_STEPS=%d", steps), "EASYSCALE_SUMMARY="+summary)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	output := func() string {
		b, _ := os.ReadFile(filepath.Join(lab.Root, "es-torch-mnist-"+id+".out"))
		return string(b)
	}
	t.Cleanup(func() {
		exec.Command("scancel", id).Run()
		os.RemoveAll(filepath.Join(lab.Root, ".easyscale", id))
		os.Remove(filepath.Join(lab.Root, "es-torch-mnist-"+id+".out"))
	})
	for !strings.Contains(output(), "world_size=3") {
		if ctx.Err() != nil {
			t.Fatalf("the job never ran on 3 workers:\n%s", output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	state := filepath.Join(lab.Root, ".easyscale", id, "state")
	at := lastStep(state)
	for lastStep(state) < at+2 {
		if ctx.Err() != nil {
			t.Fatalf("no step on 3 workers:\n%s", output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// scontrol update JobId=ID NumNodes=2 (with the job's NumTasks from Slurm 23.02 on: slurmcli.TaskCountKept)
	if err := lab.CLI.SetNodes(ctx, id, 2); err != nil {
		t.Fatalf("scontrol update: %v", err)
	}
	shrunkAt := lastStep(state)
	for {
		out, _ := lab.Command(ctx, "squeue", "-h", "-j", id, "-o", "%T").Output()
		if strings.TrimSpace(string(out)) == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %s still queued:\n%s", id, output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("no summary (%v):\n%s", err, output())
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if shrunkAt >= steps {
		t.Fatalf("the job finished before the shrink took effect")
	}
	if s["digest"] != want || s["engine"] != "torch" {
		t.Fatalf("digest after the shrink %v (engine %v), local fixed run %s\n%s", s["digest"], s["engine"], want, output())
	}
	// The shrink's task dies mid-step (the step is redone) or between steps
	// (the boundary drops it): either way the run goes on on 2.
	if !strings.Contains(output(), "world_size=2") {
		t.Fatalf("the run never went on with 2 workers after the shrink:\n%s", output())
	}
	job, err := lab.CLI.Job(ctx, id)
	if err != nil || job.State != "COMPLETED" {
		t.Fatalf("the shrunk job ended %q (%v), want COMPLETED\n%s", job.State, err, output())
	}
	t.Logf("shrunk at step %d; digest %s", shrunkAt, want)
}

// localTorchDigest is the digest of the torch MNIST example on one machine,
// a fixed allocation of 2 processes.
func localTorchDigest(t *testing.T, lab *slurmlab.Lab, steps int) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(lab.Root, "bin", "easyscale"), "run", "--config", "examples/torch-mnist/job.toml",
		"--steps", fmt.Sprint(steps), "--no-eval", "--quiet", "--workers", "2")
	cmd.Dir = lab.Root
	cmd.Env = append(os.Environ(), "EASYSCALE_NO_SLURM=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("local torch MNIST run: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "digest" && i+1 < len(f) {
			return f[i+1]
		}
	}
	t.Fatalf("no digest in %q", out)
	return ""
}

// TestTorchFirstNodeFailureIsTakenOverInPlace kills the first node (its
// slurmd, step daemons and processes, task 0's coordinator and Python
// process among them) of examples/slurm/torch-mnist.sbatch on 3 nodes
// mid-run: the coordinator's standby, the lowest-ranked worker on another
// node, has its Python process write the checkpoint of the step it
// committed and coordinates from it with a fresh engine; the other
// worker rejoins it. Each task keeps its state in a node-local directory
// (the example's script with --state per node), so the checkpoints and the
// ledger of the first node die with it: the standby creates the job's
// state on its node from its copy and its copy of the ledger. At most one
// step is redone, there is no trip through the queue before the training
// ended (the requeue that ends a job whose batch script died trains
// nothing), the job ends COMPLETED with the digest of a local fixed run,
// and the standby's ledger holds every step, those before the takeover as
// the lost coordinator recorded them.
func TestTorchFirstNodeFailureIsTakenOverInPlace(t *testing.T) {
	lab := slurmlab.RequireTorch(t)
	// EASYSCALE_LAB_TASK_LOGS=DIR has each task keep its own log there
	// (easyscale run --task-log, as the native tests always do: written on
	// the task's node, appended across a requeue), so the survivors' logs
	// (the takeover's timeline) outlive the lost node's srun; the kill then also
	// waits until the standby's spare Python process is ready (a node is
	// lost at any time of a job's life; under load the spare's start takes
	// tens of seconds), with more steps to leave room for it. Off by
	// default: the tasks' output then goes through srun, as in production,
	// and the kill may come while the spare still starts.
	taskLogs := os.Getenv("EASYSCALE_LAB_TASK_LOGS")
	steps := int64(150)
	if taskLogs != "" {
		steps = 234 // the job's horizon, one epoch
	}
	want := localTorchDigest(t, lab, int(steps))
	tmp := t.TempDir()
	summary := filepath.Join(tmp, "summary.json")
	example, err := os.ReadFile(filepath.Join(lab.Root, "examples", "slurm", "torch-mnist.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	const srun = "srun easyscale run --config examples/torch-mnist/job.toml\n"
	if !strings.Contains(string(example), srun) {
		t.Fatalf("examples/slurm/torch-mnist.sbatch has no line %q to give a node-local --state", srun)
	}
	script := filepath.Join(tmp, "torch-mnist-node-local.sbatch")
	nodeLocal := strings.Replace(string(example), srun,
		`srun bash -c 'exec easyscale run --config examples/torch-mnist/job.toml --state "$ES_LOCAL_STATE/$SLURMD_NODENAME"'`+"\n", 1)
	if err := os.WriteFile(script, []byte(nodeLocal), 0o755); err != nil {
		t.Fatal(err)
	}
	states := filepath.Join(tmp, "local")
	stateOf := func(node string) string { return filepath.Join(states, node) }
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := lab.Command(ctx, filepath.Join(lab.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=3-4", script)
	cmd.Dir = lab.Root
	cmd.Env = append(cmd.Env, fmt.Sprintf("EASYSCALE_STEPS=%d", steps), "EASYSCALE_SUMMARY="+summary, "ES_LOCAL_STATE="+states)
	if taskLogs != "" {
		if err := os.MkdirAll(taskLogs, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "EASYSCALE_TASK_LOG="+taskLogs)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	output := func() string {
		b, _ := os.ReadFile(filepath.Join(lab.Root, "es-torch-mnist-"+id+".out"))
		if taskLogs != "" {
			logs, _ := filepath.Glob(filepath.Join(taskLogs, "easyscale-"+id+".*.log"))
			for _, l := range logs {
				tb, _ := os.ReadFile(l)
				b = append(b, tb...)
			}
		}
		return string(b)
	}
	t.Cleanup(func() {
		exec.Command("scancel", id).Run()
		os.RemoveAll(filepath.Join(lab.Root, ".easyscale", id))
		os.Remove(filepath.Join(lab.Root, "es-torch-mnist-"+id+".out"))
	})
	// The other tasks' workers join as their Python processes come up
	// (seconds on a busy machine): the kill comes 5 steps after the
	// third joined, so the standby has had the contexts of a step.
	var job slurmcli.JobDetail
	for job.BatchHost == "" {
		job, _ = showJob(ctx, lab, id)
		if ctx.Err() != nil {
			t.Fatalf("job %s never started:\n%s", id, output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	state := stateOf(job.BatchHost)
	var at3 int64 = -1
	spareReady := func() bool { return taskLogs == "" || strings.Contains(output(), "spare python process is ready") }
	for at3 < 0 || lastStep(state) < at3+5 || !spareReady() {
		if at3 < 0 && strings.Contains(output(), "world_size=3") {
			at3 = lastStep(state)
		}
		if ctx.Err() != nil || lastStep(state) > steps-40 {
			t.Fatalf("the job did not run 5 steps on 3 workers in time (3 workers from step %d, at step %d):\n%s", at3, lastStep(state), output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	killedAt := time.Now()
	lab.KillNode(t, job.BatchHost)
	t.Logf("killed the batch host %s at ledger step %d", job.BatchHost, lastStep(state))
	resumed, lost, node := awaitTakeover(ctx, t, lab, id, job.BatchHost, killedAt, stateOf)
	if lost-resumed > 1 {
		t.Fatalf("the standby resumed at step %d, the dead coordinator had recorded %d: %d steps redone", resumed, lost, lost-resumed)
	}
	for {
		out, _ := lab.Command(ctx, "squeue", "-h", "-j", id, "-o", "%T").Output()
		if strings.TrimSpace(string(out)) == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %s still queued:\n%s", id, output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("no summary (%v):\n%s", err, output())
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s["digest"] != want || s["engine"] != "torch" {
		t.Fatalf("digest after losing the first node %v (engine %v), local fixed run %s\n%s", s["digest"], s["engine"], want, output())
	}
	rows := checkStandbyLedger(t, stateOf(node), state, resumed, steps)
	qctx, qcancel := context.WithTimeout(context.Background(), time.Minute)
	defer qcancel()
	job, err = showJob(qctx, lab, id)
	if err != nil || job.State != "COMPLETED" || job.Restarts > 1 {
		t.Fatalf("job %s ended %q after %d restarts (%v), want COMPLETED\n%s", id, job.State, job.Restarts, err, output())
	}
	t.Logf("job %s %s %.1f s after the kill, restarts %d; digest %s; the standby's ledger on %s: steps 1-%d", id, job.State,
		time.Since(killedAt).Seconds(), job.Restarts, want, node, len(rows))
}
