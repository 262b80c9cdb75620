package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/data/datatest"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
)

// runWithMNIST runs the binary with EASYSCALE_MNIST_DIR=dir and returns
// its exit code and standard error.
func runWithMNIST(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(easyscale, args...)
	cmd.Env = append(os.Environ(), datasets.MNISTDirEnv+"="+dir, "XDG_CACHE_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// TestResumeWithChangedTrainingDataIsRefused: a job stops, one label in
// its training file changes, and the rerun is refused naming the file;
// with the original file back it resumes and reaches the digest of the
// uninterrupted run on another copy of the same data.
func TestResumeWithChangedTrainingDataIsRefused(t *testing.T) {
	ref := digest(mustRun(t, "run", "--config", config(), "--steps", "10", "--no-eval"))
	mnist := datatest.CopyMNIST(t)
	labels := filepath.Join(mnist, data.TrainLabelsFile)
	original, err := os.ReadFile(labels)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	args := []string{"run", "--config", config(), "--no-eval", "--quiet", "--state", state}
	if code, stderr := runWithMNIST(t, mnist, append(args, "--steps", "5")...); code != 0 {
		t.Fatalf("first run exited %d:\n%s", code, stderr)
	}
	datatest.ChangeFirstLabel(t, labels)
	code, stderr := runWithMNIST(t, mnist, append(args, "--steps", "10")...)
	if code != 1 || !strings.Contains(stderr, "trained on other data") || !strings.Contains(stderr, labels) {
		t.Fatalf("resume with a changed label exited %d, want 1 naming %s:\n%s", code, labels, stderr)
	}
	if err := os.WriteFile(labels, original, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := filepath.Join(t.TempDir(), "summary.json")
	if code, stderr := runWithMNIST(t, mnist, append(args, "--steps", "10", "--summary", sum)...); code != 0 {
		t.Fatalf("resume with the original data exited %d:\n%s", code, stderr)
	}
	if s := readFile(t, sum); !strings.Contains(s, ref) || !strings.Contains(s, `"resumed_from": 5`) {
		t.Fatalf("summary %s: want a resume from step 5 with digest %s", s, ref)
	}
}

// TestWorkerWithOtherTrainingDataIsRefused: while a --procs job runs, a
// worker joins with --data-dir pointing to a copy of MNIST where one label
// differs. It exits 1 naming the file at once (no retries); the job goes
// on with its own workers and ends with the fixed run's digest.
func TestWorkerWithOtherTrainingDataIsRefused(t *testing.T) {
	// Long enough to outlast the refused worker's start (it loads and
	// hashes its MNIST copy before it joins): 120 steps ended before the
	// join on a quiet 2-core VM (2026-12-02), and the worker, finding the
	// job gone, rejoined until its join timeout.
	const steps = "600"
	ref := digest(mustRun(t, "run", "--config", config(), "--steps", steps, "--no-eval"))
	bad := datatest.MNISTWithOneLabelChanged(t)
	state := t.TempDir()
	addr := freePort(t)
	job := exec.Command(easyscale, "run", "--config", config(), "--steps", steps, "--no-eval", "--quiet", "--procs", "--state", state,
		"--workers", "0:2", "--listen", addr, "--summary", filepath.Join(state, "summary.json"))
	var stderr strings.Builder
	job.Stderr = &stderr
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer job.Process.Kill()
	for deadline := time.Now().Add(60 * time.Second); lastStep(state) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not reach step 2:\n%s", stderr.String())
		}
	}
	start := time.Now()
	worker := exec.Command(easyscale, "worker", "--join", addr, "--token-file", filepath.Join(state, "token"), "--data-dir", bad,
		"--join-timeout", "30s")
	worker.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	out, err := worker.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("the worker with other data: %v, want exit 1:\n%s", err, out)
	}
	if want := filepath.Join(bad, data.TrainLabelsFile); !strings.Contains(string(out), want) || !strings.Contains(string(out), "refused") {
		t.Fatalf("the worker's error does not name %s:\n%s", want, out)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the refused worker took %v to stop: it retried", d)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("the job failed after the refusal: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "refused a joiner: its training data differ") || !strings.Contains(stderr.String(), "file="+data.TrainLabelsFile) {
		t.Fatalf("the coordinator did not log the refusal naming the file:\n%s", stderr.String())
	}
	if sum := readFile(t, filepath.Join(state, "summary.json")); !strings.Contains(sum, ref) {
		t.Fatalf("digest changed after the refusal: %s (fixed run %s)", sum, ref)
	}
}
