package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestAD1TorchJobThatStartsOverIsMovedToAnotherTypeAndEndsWithItsFixedRun
// is E59 on the lab: a d1 torch job that names no GPU type, run with
// --on-other-numerics=start-over, starts on a T4 node (blockers hold the
// V100 nodes n1 and n2); its status comment says numerics=start-over. Its
// batch script stands in for a node type that computes other bits: on the
// V100 nodes it sets ATEN_CPU_CAPABILITY=default (ATen's other kernels, as
// on a CPU with another ISA; on GPUs the device model differs). Once the
// blockers end, the daemon requeues the job and excludes both T4 nodes;
// Slurm restarts it on a V100 node, where the runtime refuses its
// checkpoint (other numerics), keeps the old state under
// STATE/superseded/ and starts over from step 0. The trained model is
// bit-identical to the fixed run with the V100 nodes' numerics.
func TestAD1TorchJobThatStartsOverIsMovedToAnotherTypeAndEndsWithItsFixedRun(t *testing.T) {
	l := slurmlab.RequireTorch(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	// The toy job (runtime/torchengine/python/tests/toyjob.py), paced by
	// TOYJOB_SLOW to at least 0.1 s a forward (4 a step): the status
	// comment comes every 10 s, and the move must come while the work done
	// is a small part of the run (it counts against the move).
	const steps = 60
	dir := t.TempDir()
	module := filepath.Join(l.Root, "runtime", "torchengine", "python", "tests", "toyjob.py")
	job := filepath.Join(dir, "job.toml")
	text := "name = \"torch-toy\"\nengine = \"torch\"\nlogical_workers = 4\nmicro_batch = 3\nsteps = " + strconv.Itoa(steps) +
		"\nseed = 7\ncheckpoint_every = 5\n[torch]\nmodule = " + strconv.Quote(module) + "\n"
	if err := os.WriteFile(job, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ATEN_CPU_CAPABILITY", "default")
	want, err := l.LocalDigest(job, steps)
	if err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("ATEN_CPU_CAPABILITY")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	blockers := blockNodes(ctx, t, l, 5*time.Minute, "n1", "n2")
	state, summary := filepath.Join(dir, "state"), filepath.Join(dir, "summary.json")
	script := filepath.Join(dir, "toy.sbatch")
	jobOut := filepath.Join(dir, "toy.out")
	body := "#!/bin/bash\n#SBATCH --logical-workers=4\n#SBATCH --ntasks-per-node=1\n#SBATCH --time=00:10:00\n#SBATCH --output=" + jobOut + "\n" +
		"case \"$SLURMD_NODENAME\" in n1|n2) export ATEN_CPU_CAPABILITY=default ;; esac\n" +
		"srun " + filepath.Join(l.Root, "bin", "easyscale") + " run --config " + job + " --state " + state +
		" --no-eval --on-other-numerics=start-over --summary " + summary + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := l.Command(ctx, filepath.Join(l.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=1-1", "--determinism=d1",
		"-N", "1", "--gres=gpu:4", script)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "EASYSCALE_PYTHON=/usr/bin/python3", "TOYJOB_SLOW=0:0.1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		exec.Command("scancel", id).Run()
		if t.Failed() {
			b, _ := os.ReadFile(jobOut)
			t.Logf("job %s output:\n%s", id, tail(string(b), 60))
		}
	})
	j, err := l.WaitState(ctx, id, 60*time.Second, "RUNNING")
	if err != nil || (j.NodeList != "n3" && j.NodeList != "n4") {
		t.Fatalf("job %s: %+v, %v; want it running on a t4 node", id, j, err)
	}
	first := j.NodeList
	waitFor(t, 90*time.Second, "job "+id+" reporting progress and numerics=start-over", func() bool {
		j, err := l.CLI.Job(ctx, id)
		c, cerr := elastic.ParseComment(j.Comment)
		return err == nil && cerr == nil && c.Progress != nil && c.Progress.Step > 0 && c.Progress.StartsOver
	})
	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2", "n3", "n4"},
		extra: "speeds = { v100 = 1.0, t4 = 0.2 }\nmove_cost = \"0s\"\n"}
	d := startDaemon(t, l, s, "backfilld")
	if _, err := l.CLI.Output(ctx, "scancel", blockers["n1"], blockers["n2"]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "job "+id+" excluding both t4 nodes after its requeue", func() bool {
		return sameNodes(t, rawExcluded(t, l, id), []string{"n3", "n4"})
	})
	var ranOn string
	for {
		j, err := l.CLI.Job(ctx, id)
		if err == nil && j.State == "RUNNING" && j.NodeList != first {
			ranOn = j.NodeList
		}
		if err == nil && j.State != "PENDING" && j.State != "RUNNING" && j.State != "COMPLETING" {
			if j.State != "COMPLETED" {
				t.Errorf("job %s ended %s, want COMPLETED", id, j.State)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %s did not finish in time", id)
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.stop(syscall.SIGTERM)
	if ranOn != "n1" && ranOn != "n2" {
		t.Errorf("job %s ran again on %q, want a v100 node", id, ranOn)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("job %s wrote no summary: %v", id, err)
	}
	var sum struct {
		Digest      string `json:"digest"`
		Steps       int64  `json:"steps"`
		StartedOver *struct {
			FromStep   int64  `json:"from_step"`
			Superseded string `json:"superseded"`
		} `json:"started_over"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.StartedOver == nil || sum.StartedOver.FromStep <= 0 || !strings.HasPrefix(sum.StartedOver.Superseded, filepath.Join(state, "superseded")) {
		t.Fatalf("job %s's summary: started_over %+v; want a start-over from its checkpoint, the old state under %s/superseded", id, sum.StartedOver, state)
	}
	t.Logf("job %s: moved from %s to %s, started over from step %d, %d steps, digest %s", id, first, ranOn, sum.StartedOver.FromStep, sum.Steps, sum.Digest)
	if sum.Steps != steps || sum.Digest != want {
		t.Errorf("moved job: %d steps, digest %s; the fixed run with the v100 nodes' numerics: %d steps, %s", sum.Steps, sum.Digest, steps, want)
	}
	if ds := decisionsOfKind(t, s, "move"); len(ds) != 1 || !strings.Contains(ds[0].Detail, fmt.Sprintf("starts over from step 0 on %s", "v100")) {
		t.Errorf("move decisions %+v, want one saying the job starts over on v100", ds)
	}
}
