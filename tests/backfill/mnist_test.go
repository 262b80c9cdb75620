package backfill

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

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestElasticMNISTGrowsIntoIdleGPUsAndKeepsTheFixedRunsDigest submits
// examples/slurm/mnist.sbatch with easyscale-sbatch at its minimum (one
// node, one t4 GPU); easyscale-backfilld, managing n3 and n4, grows it with
// extra jobs running the real `easyscale worker`, and the trained model is
// bit-identical to the fixed run on one machine.
func TestElasticMNISTGrowsIntoIdleGPUsAndKeepsTheFixedRunsDigest(t *testing.T) {
	t.Parallel()
	l := slurmlab.Require(t)
	if _, err := os.Stat(filepath.Join(l.Root, "examples", "slurm", "mnist.sbatch")); err != nil {
		t.Skipf("the runtime's elastic MNIST job is not there yet: %v", err)
	}
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	const steps = 234
	want := l.LocalMNISTDigest(t, steps)
	// the daemon's environment is its own: an extra job's worker runs on
	// the job's (HOME, PYTHONPATH, the user's data paths), never on a root
	// daemon's
	s := settings{dir: t.TempDir(), nodes: []string{"n3", "n4"},
		worker: config.DefaultWorkerCommand, env: []string{"ES_DAEMON_ONLY=secret"}}
	startDaemon(t, l, s, "backfilld")

	summary := filepath.Join(t.TempDir(), "summary.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := l.Command(ctx, filepath.Join(l.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=1-4",
		"-w", "n3", "--gres=gpu:t4:1", "examples/slurm/mnist.sbatch")
	cmd.Dir = l.Root
	// paced (trainer.FaultPaceEnv): at least 75 s on its one first worker,
	// so the lent workers join before the end on a machine of any load
	// (unpaced, under both halves of make test-all, the 234 steps ended in
	// 36 s, before an extra job's worker had joined)
	cmd.Env = append(cmd.Env, fmt.Sprintf("EASYSCALE_STEPS=%d", steps), "EASYSCALE_SUMMARY="+summary, "ES_JOB_ONLY=mine",
		"EASYSCALE_FAULT_PACE=40ms")
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
	cancelExtrasAtEnd(t, l, id)

	grown, workers := false, 0
	onJobEnv := 0 // extra workers seen running on the job's environment
	for {
		if len(extrasOf(t, l, id)) > 0 {
			grown = true
		}
		onJobEnv += checkExtraWorkerEnvironments(t, filepath.Join(l.Root, ".easyscale", id), id,
			[]string{"ES_JOB_ONLY=mine"}, []string{"ES_DAEMON_ONLY=secret"})
		j, err := l.CLI.Job(ctx, id)
		if c, cerr := elastic.ParseComment(j.Comment); err == nil && cerr == nil && c.Progress != nil {
			workers = max(workers, c.Progress.Workers) // the runtime's status: es step=S/T workers=W/L ...
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
	t.Logf("job %s: %d steps, up to %d physical workers, digest %s", id, sum.Steps, workers, sum.Digest)
	if !grown || workers < 2 {
		t.Errorf("the job never grew: extra jobs seen %v, at most %d workers in its status comment", grown, workers)
	}
	if grown && onJobEnv == 0 {
		t.Errorf("no extra worker of job %s was seen running on the job's environment", id)
	}
	if sum.Steps != steps || sum.Digest != want {
		t.Errorf("grown job: %d steps, digest %s; the fixed run: %d steps, digest %s", sum.Steps, sum.Digest, steps, want)
	}
}
