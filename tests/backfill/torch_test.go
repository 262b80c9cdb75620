package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestTorchMNISTGrowsIntoIdleGPUsAndKeepsTheFixedRunsDigest: a user
// (nobody, with a home of its own) submits examples/slurm/torch-mnist.sbatch
// with easyscale-sbatch at its minimum (one node, one t4 GPU, one Python
// process) from a directory of its own; easyscale-backfilld, as root,
// managing n3 and n4 with its default worker command, grows it with extra
// jobs in that user's name (sbatch --uid: they run with the daemon's
// environment, HOME=/root) whose `easyscale worker --join` start their own
// Python processes, with the job's interpreter (EASYSCALE_PYTHON of the
// job, not of the daemon). Once every worker of an extra job is admitted, that
// job gets SIGTERM, as the daemon sends it before a reservation: its
// workers leave at a step boundary and exit 0, and the job goes on (and
// is grown again). The trained model is bit-identical to the local run on
// a fixed allocation of 2 processes.
func TestTorchMNISTGrowsIntoIdleGPUsAndKeepsTheFixedRunsDigest(t *testing.T) {
	l := slurmlab.RequireTorch(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	const steps = 234
	// The reference trains beside the Slurm job (it only slows the job
	// down, which leaves the daemon more steps to grow it in).
	type result struct {
		digest string
		err    error
	}
	local := make(chan result, 1)
	go func() {
		d, err := l.LocalDigest("examples/torch-mnist/job.toml", steps, "--workers", "2")
		local <- result{d, err}
	}()
	s := settings{dir: t.TempDir(), nodes: []string{"n3", "n4"}, worker: config.DefaultWorkerCommand,
		env: []string{"ES_DAEMON_ONLY=secret"}}
	startDaemon(t, l, s, "backfilld")

	work := userWorkDir(t, l, unprivileged)
	summary := filepath.Join(work, "summary.json")
	// A deadline, not a timing check: the job and the local reference run
	// (8 torch processes) share the cores; under a loaded machine (load 20)
	// the pair took over 3 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", "-u", unprivileged, "--", "env", "HOME="+filepath.Join(work, "home"),
		filepath.Join(l.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=1-3",
		"-w", "n3", "--gres=gpu:t4:1", "examples/slurm/torch-mnist.sbatch")
	cmd.Dir = work
	cmd.Env = append(append([]string{}, l.Env...), fmt.Sprintf("EASYSCALE_STEPS=%d", steps), "EASYSCALE_SUMMARY="+summary,
		"EASYSCALE_PYTHON="+filepath.Join(work, "bin", "python3"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale-sbatch as %s: %v\n%s", unprivileged, err, out)
	}
	id := strings.TrimSpace(string(out))
	rdv := filepath.Join(work, ".easyscale", id)
	jobOut := filepath.Join(work, "es-torch-mnist-"+id+".out")
	t.Cleanup(func() {
		exec.Command("scancel", id).Run()
		if t.Failed() {
			b, _ := os.ReadFile(jobOut)
			t.Logf("job %s output:\n%s", id, tail(string(b), 60))
			outs, _ := filepath.Glob(filepath.Join(rdv, "extra-*.out"))
			for _, o := range outs {
				b, _ := os.ReadFile(o)
				t.Logf("%s:\n%s", filepath.Base(o), tail(string(b), 30))
			}
		}
	})
	cancelExtrasAtEnd(t, l, id)

	extras := map[string]bool{}
	var left string // the extra job sent SIGTERM
	var before int  // the coordinator's allocations logged before the SIGTERM
	workers, onJobEnv := 0, 0
	for {
		for _, x := range extrasOf(t, l, id) {
			extras[x.ID] = true
		}
		// the user's HOME, not the root daemon's
		onJobEnv += checkExtraWorkerEnvironments(t, rdv, id, []string{"HOME=" + filepath.Join(work, "home")},
			[]string{"ES_DAEMON_ONLY=secret", "HOME=/root"})
		if left == "" {
			if x, n := admittedExtra(jobOut, rdv); x != "" {
				// Counted before the signal: the leave it causes can be logged
				// before scancel returns (seen under load in CI, 3 December).
				before = len(allocations(jobOut))
				if out, err := l.CLI.Output(ctx, "scancel", "--signal=TERM", x); err != nil {
					t.Fatalf("scancel --signal=TERM %s: %v\n%s", x, err, out)
				}
				left = x
				t.Logf("SIGTERM to extra job %s, one of %d admitted workers", x, n)
			}
		}
		j, err := l.CLI.Job(ctx, id)
		if c, cerr := elastic.ParseComment(j.Comment); err == nil && cerr == nil && c.Progress != nil {
			workers = max(workers, c.Progress.Workers) // the runtime's status: es step=S/T workers=W/L ...
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
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("job %s wrote no summary: %v", id, err)
	}
	var sum struct {
		Engine        string `json:"engine"`
		Digest        string `json:"digest"`
		Steps         int64  `json:"steps"`
		Reallocations int    `json:"reallocations"`
		RedoneSteps   int    `json:"redone_steps"`
		Schedule      string `json:"schedule"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	var want result
	select {
	case want = <-local:
	case <-ctx.Done():
		t.Fatal("the local reference run did not finish in time")
	}
	if want.err != nil {
		t.Fatal(want.err)
	}
	t.Logf("job %s: %d steps, extra jobs %d, up to %d processes, schedule %s, %d reallocations, %d redone steps, digest %s",
		id, sum.Steps, len(extras), workers, sum.Schedule, sum.Reallocations, sum.RedoneSteps, sum.Digest)
	if len(extras) == 0 || workers < 2 || maxWorkers(sum.Schedule) < 2 {
		t.Errorf("the job never grew: %d extra jobs, at most %d workers in its status comment, schedule %q", len(extras), workers, sum.Schedule)
	}
	if len(extras) > 0 && onJobEnv == 0 {
		t.Errorf("no extra worker of job %s was seen running on the job's environment", id)
	}
	if sum.Engine != "torch" || sum.Steps != steps || sum.Digest != want.digest {
		t.Errorf("grown job (engine %q): %d steps, digest %s; the fixed run: %d steps, digest %s", sum.Engine, sum.Steps, sum.Digest, steps, want.digest)
	}
	if left == "" {
		t.Fatal("no extra job was running once the job had grown: nothing was sent SIGTERM")
	}
	x, err := l.WaitState(ctx, left, 30*time.Second, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(rdv, "extra-"+left+".out")); !strings.Contains(string(b), "left the job") {
		t.Errorf("the worker of extra job %s did not leave on SIGTERM:\n%s", left, tail(string(b), 20))
	}
	b, _ = os.ReadFile(filepath.Join(work, "bin", "python.log"))
	if !slices.Contains(strings.Fields(string(b)), left) {
		t.Errorf("the worker of extra job %s did not run the job's interpreter (EASYSCALE_PYTHON); it ran for jobs %q", left, strings.Fields(string(b)))
	}
	// every Python process, the parent's and the extra jobs', runs as the
	// user and in the user's group (root's sbatch --uid alone gives group root)
	if u, err := user.Lookup(unprivileged); err != nil {
		t.Error(err)
	} else {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) != 3 || f[1] != u.Uid || f[2] != u.Gid {
				t.Errorf("python.log line %q: want job id, uid %s and gid %s (%s's primary group)", line, u.Uid, u.Gid, unprivileged)
			}
		}
	}
	if x.State != "COMPLETED" {
		t.Errorf("extra job %s ended %s after SIGTERM, want COMPLETED (its workers leave at a step boundary and exit 0)", left, x.State)
	}
	// The leave is a change of membership in which the world size does
	// not grow (another worker may join at the same boundary); at a
	// boundary it redoes nothing, past the leave grace the step in flight.
	after := allocations(jobOut)
	leaveSeen := false
	for i := max(before, 1); i < len(after); i++ {
		leaveSeen = leaveSeen || after[i] <= after[i-1]
	}
	t.Logf("world sizes of the coordinator's allocations %v, SIGTERM after the first %d", after, before)
	if sum.RedoneSteps > 1 || !leaveSeen {
		t.Errorf("after SIGTERM of %s: world sizes %v (the SIGTERM after the first %d), %d redone steps; want a leave and at most 1 redone step",
			left, after, before, sum.RedoneSteps)
	}
}

// userWorkDir makes a directory owned by user holding what the torch
// MNIST job reads from its working directory (the job file, its module,
// the Slurm script; MNIST as links into the repository's data/mnist), the
// user's home, and the user's interpreter bin/python3, which logs the
// Slurm job of each process it starts to bin/python.log and runs
// /usr/bin/python3; it removes the directory when the test ends.
func userWorkDir(t *testing.T, l *slurmlab.Lab, user string) string {
	t.Helper()
	work, err := os.MkdirTemp("", "torch-backfill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	script := `set -e
mkdir -p home examples/torch-mnist examples/slurm data/mnist
cp "$1"/examples/torch-mnist/job.toml "$1"/examples/torch-mnist/model.py examples/torch-mnist/
cp "$1"/examples/slurm/torch-mnist.sbatch examples/slurm/
ln -s "$1"/data/mnist/* data/mnist/
mkdir bin
printf '#!/bin/sh\necho "${SLURM_JOB_ID:-none} $(id -u) $(id -g)" >> "$(dirname "$0")/python.log"\nexec /usr/bin/python3 "$@"\n' > bin/python3
chmod 755 bin/python3
`
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", user, work).CombinedOutput(); err != nil {
		t.Fatalf("chown %s %s: %v\n%s", user, work, err, out)
	}
	cmd := exec.Command("runuser", "-u", user, "--", "sh", "-c", script, "sh", l.Root)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("preparing %s's working directory %s: %v\n%s", user, work, err, out)
	}
	return work
}

// admittedExtra returns an extra job of which every worker that queued
// for admission (its output in rdv says so) has been admitted (the
// coordinator's output jobOut says so once per joiner), and the number of
// admitted workers; "" while some worker is still waiting or none came.
func admittedExtra(jobOut, rdv string) (string, int) {
	// Read the coordinator's count first: a worker is admitted only after
	// it queued, so admitted ≥ queued (read later) means all are in.
	b, _ := os.ReadFile(jobOut)
	admitted := strings.Count(string(b), "admitted: rank=")
	outs, _ := filepath.Glob(filepath.Join(rdv, "extra-*.out"))
	queued, first := 0, ""
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		if n := strings.Count(string(b), "queued for admission"); n > 0 {
			queued += n
			if first == "" {
				first = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(o), "extra-"), ".out")
			}
		}
	}
	if queued == 0 || admitted < queued {
		return "", 0
	}
	return first, admitted
}

// segments parses a summary schedule "STEP:WORKERS[@speeds],..." into its
// worker counts in order.
func segments(schedule string) []int {
	var out []int
	for _, seg := range strings.Split(schedule, ",") {
		var step, w int
		if _, err := fmt.Sscanf(seg, "%d:%d", &step, &w); err == nil {
			out = append(out, w)
		}
	}
	return out
}

func maxWorkers(schedule string) int {
	m := 0
	for _, w := range segments(schedule) {
		m = max(m, w)
	}
	return m
}

// allocations lists the world sizes of the coordinator's "allocation"
// log lines in its output jobOut, in order.
func allocations(jobOut string) []int {
	b, _ := os.ReadFile(jobOut)
	var out []int
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "allocation: step=") {
			continue
		}
		_, ws, ok := strings.Cut(line, " world_size=")
		if !ok {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(ws, "%d", &n); err == nil {
			out = append(out, n)
		}
	}
	return out
}
