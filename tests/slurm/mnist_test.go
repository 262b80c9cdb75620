package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// submit runs easyscale-sbatch --parsable on the example script from the
// repository root with extra arguments and environment; it returns the
// job id and the summary path.
func submit(t *testing.T, lab *slurmlab.Lab, steps int, args ...string) (id, summary string) {
	t.Helper()
	return submitEnv(t, lab, []string{fmt.Sprintf("EASYSCALE_STEPS=%d", steps)}, args...)
}

// submitEnv is submit with env (KEY=VALUE, e.g. EASYSCALE_CONFIG=FILE)
// added to easyscale-sbatch's environment, which the job inherits.
func submitEnv(t *testing.T, lab *slurmlab.Lab, env []string, args ...string) (id, summary string) {
	t.Helper()
	return submitWith(t, lab, filepath.Join(lab.Root, "bin", "easyscale-sbatch"), "examples/slurm/mnist.sbatch", env, args...)
}

// submitWith is submitEnv with another submitter than easyscale-sbatch
// ("sbatch" submits the script as Slurm's own sbatch does: the SPANK plugin
// reads its --elastic; no --no-kill) or another batch script than
// examples/slurm/mnist.sbatch (its output file must be es-mnist-%j.out).
func submitWith(t *testing.T, lab *slurmlab.Lab, submitter, script string, env []string, args ...string) (id, summary string) {
	t.Helper()
	summary = filepath.Join(t.TempDir(), "summary.json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := append([]string{"--parsable"}, args...)
	all = append(all, script)
	cmd := lab.Command(ctx, submitter, all...)
	cmd.Dir = lab.Root
	// each task's own log on its node (easyscale run --task-log): what a
	// task did after srun died with the first node is only there
	tasks := filepath.Join(lab.Dir, "task-logs", fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
	cmd.Env = append(append(cmd.Env, env...), "EASYSCALE_SUMMARY="+summary, "EASYSCALE_TASK_LOG="+tasks)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(submitter), err, out)
	}
	id = strings.TrimSpace(string(out))
	taskLogDirs.Store(id, tasks)
	t.Cleanup(func() {
		// in the lab's environment: without its SLURM_CONF scancel fails
		// and the job runs on, holding nodes, after the test
		lab.Command(context.Background(), "scancel", id).Run()
		os.RemoveAll(filepath.Join(lab.Root, ".easyscale", id))
		os.Remove(filepath.Join(lab.Root, "es-mnist-"+id+".out"))
	})
	return id, summary
}

// taskLogDirs is each submitted job's --task-log directory, by job id.
var taskLogDirs sync.Map

// jobOutput is the job's output file, then each task's own log (the part
// after the loss of the first node is only there).
func jobOutput(lab *slurmlab.Lab, id string) string {
	b, _ := os.ReadFile(filepath.Join(lab.Root, "es-mnist-"+id+".out"))
	out := string(b)
	if dir, ok := taskLogDirs.Load(id); ok {
		files, _ := filepath.Glob(filepath.Join(dir.(string), "easyscale-"+id+".*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			out += fmt.Sprintf("\n--- %s (the task's own log on its node)\n%s", f, b)
		}
	}
	return out
}

// waitDone waits until the job has left the queue and returns its summary.
func waitDone(t *testing.T, lab *slurmlab.Lab, id, summary string) map[string]any {
	t.Helper()
	return waitDoneWithin(t, lab, id, summary, 3*time.Minute)
}

// waitDoneWithin is waitDone with its deadline, for the longer jobs.
func waitDoneWithin(t *testing.T, lab *slurmlab.Lab, id, summary string, d time.Duration) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		out, _ := lab.Command(ctx, "squeue", "-h", "-j", id, "-o", "%T").Output()
		if strings.TrimSpace(string(out)) == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %s still queued:\n%s", id, jobOutput(lab, id))
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("job %s wrote no summary (%v); its output:\n%s", id, err, jobOutput(lab, id))
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestElasticMNISTJobMatchesTheLocalRun submits examples/slurm/mnist.sbatch
// (elastic 1-4, 8 logical workers) with easyscale-sbatch on 2 nodes; the
// status is visible in squeue while it runs, and its model is the local
// run's, bit for bit.
func TestElasticMNISTJobMatchesTheLocalRun(t *testing.T) {
	lab := slurmlab.Require(t)
	const steps = 120
	want := lab.LocalMNISTDigest(t, steps)
	id, summary := submit(t, lab, steps, "--elastic=2-4")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var status string
	for status == "" {
		out, _ := lab.Command(ctx, "squeue", "-h", "-j", id, "-o", "%k").Output()
		if c := strings.TrimSpace(string(out)); strings.HasPrefix(c, "es step=") {
			status = c
		} else if c == "" && ctx.Err() == nil {
			if _, err := os.Stat(summary); err == nil {
				break // finished between two polls
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no status in squeue; output:\n%s", jobOutput(lab, id))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status == "" || !strings.Contains(status, "/8 d1 req=2-4") {
		t.Fatalf("status comment %q lacks workers=W/8 d1 req=2-4", status)
	}
	s := waitDone(t, lab, id, summary)
	if s["digest"] != want {
		t.Fatalf("Slurm job digest %v, local run %s\n%s", s["digest"], want, jobOutput(lab, id))
	}
	if s["schedule"] != "0:2" {
		t.Errorf("ran on %v, want 2 physical workers (one task per node)", s["schedule"])
	}
	out, err := lab.Command(ctx, filepath.Join(lab.Root, "bin", "easyscale"), "status", id).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("finished: step %d", steps)) || !strings.Contains(string(out), "slurm job "+id) {
		t.Fatalf("easyscale status %s: %v\n%s", id, err, out)
	}
}

// TestShrinkByScontrolKeepsTheDigest shrinks a running 3-node job to 2
// nodes with scontrol update: Slurm kills the task on the released node,
// the survivors redo the step and the model is still the local run's.
func TestShrinkByScontrolKeepsTheDigest(t *testing.T) {
	lab := slurmlab.Require(t)
	const steps = 234
	want := lab.LocalMNISTDigest(t, steps)
	id, summary := submit(t, lab, steps, "--elastic=3-4")
	state := filepath.Join(lab.Root, ".easyscale", id, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for lastStep(state) < 30 {
		if ctx.Err() != nil {
			t.Fatalf("the job never reached step 30:\n%s", jobOutput(lab, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// scontrol update JobId=ID NumNodes=2 (with the job's NumTasks from Slurm 23.02 on: slurmcli.TaskCountKept)
	if err := lab.CLI.SetNodes(ctx, id, 2); err != nil {
		t.Fatalf("scontrol update: %v", err)
	}
	shrunkAt := lastStep(state)
	s := waitDone(t, lab, id, summary)
	if shrunkAt >= steps {
		t.Fatalf("the job finished before the shrink took effect")
	}
	if s["digest"] != want {
		t.Fatalf("digest after the shrink %v, local run %s\n%s", s["digest"], want, jobOutput(lab, id))
	}
	// The released node's worker is lost during a step (the step is
	// redone), or between its answer and the next step (the coordinator
	// drops it at the boundary: workers report and start the next step
	// early, so this is common), or it leaves on Slurm's SIGTERM.
	if o := jobOutput(lab, id); !strings.Contains(o, "workers lost; redoing the step") && !strings.Contains(o, "removing a lost worker") &&
		!strings.Contains(o, "released a worker") {
		t.Fatalf("no worker left after the shrink:\n%s", o)
	}
	// srun fails because Slurm killed the released node's task; the job's
	// state must still say it completed (the script returns the
	// coordinator's exit status).
	job, err := lab.CLI.Job(ctx, id)
	if err != nil || job.State != "COMPLETED" {
		t.Fatalf("the shrunk job ended %q (%v), want COMPLETED\n%s", job.State, err, jobOutput(lab, id))
	}
}

func lastStep(state string) int64 {
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		return 0
	}
	defer db.Close()
	s, _, _ := db.LastStep()
	return s
}
