package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// TestAD1JobNeedingEveryV100StartsNoLaterThanUnderRigidWhileD2JobsRun is
// issue 17 item 6's first half on the lab. Two d2 elastic MNIST jobs
// (examples/slurm/mnist.sbatch, --elastic=1-2 --determinism=d2, 8 logical
// workers) hold all four t4 GPUs of n3 and of n4 each. A job pinned to v100
// that needs every v100 GPU (-N 2 --gres=gpu:v100:4, rigid: what the
// issue's d1 job pinned to its type asks of Slurm) is submitted twice:
//
//  1. rigid: no daemon runs, the d2 jobs stay at their base size, the v100
//     GPUs are idle, and Slurm starts it at once; its submit-to-start delay
//     is the reference;
//  2. elastic: easyscale-backfilld (managing n1..n4, default policy) has
//     grown the d2 jobs onto the v100 nodes with extra jobs in the
//     preemptible partition low; the same job is submitted again.
//
// It must start no later than the rigid reference plus Slurm's preemption
// time: its partition (normal, PriorityTier 10) preempts low's jobs
// (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE; extra jobs are
// --no-requeue, so they end PREEMPTED) at its first scheduling pass; the
// preempted extra jobs' tasks get SIGTERM and, if still there, SIGKILL
// KillWait later, and the GPUs are free once their steps are gone; then
// the next pass (the job-completion event, or backfill every bf_interval,
// 1 s in the lab) starts the job. So the allowance is KillWait (read from
// `scontrol show config`, 10 s in the lab) plus 10 s for those passes and
// the daemon's own poll interval (1 s): a clean-clone CI run on 24.11 with
// two labs' daemons and unit tests beside it took 16 s (the extra jobs
// PREEMPTED at the submission, the job started 16 s later), 1 s past the
// 5 s allowed before. A lend the planner should not have made would delay
// the job by the extra jobs' time limits (minutes), not seconds. From the job's submission to its
// end the daemon must lend no v100 GPU (its store's extra jobs: before
// planner.FreeGPUs it lent n2's GPUs again the moment the job started
// there), no pending job may start after a start Slurm planned for it, and
// both d2 jobs still train to the fixed run's digest. Measured on the
// loaded 2-core VM (load 12–18): rigid delay 0–1 s, elastic 1–2 s (the
// four extra jobs PREEMPTED within a second of the submission); the test
// takes 108–155 s alone, 219 s in a package run.
func TestAD1JobNeedingEveryV100StartsNoLaterThanUnderRigidWhileD2JobsRun(t *testing.T) {
	// This test found a daemon race (2026-12-02, on 24.11, then on 22.05
	// in about 1 run of 4): a lend onto the v100s in the second between the
	// pinned job's submission and Slurm's backfill planning it, when squeue
	// shows no planned start or nodes yet. The planner now holds the GPUs a
	// waiting job Slurm has not planned may start on (unplanned_hold,
	// planner.UnplannedJob), and the check at the end (no extra job
	// submitted onto n1 or n2 while the pinned job waited or ran) gates CI.
	l := slurmlab.Require(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	// About 2 minutes alone on the loaded 2-core VM, 3.6 in the package
	// run (load 17): room for slower machines.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	killWait := slurmKillWait(t, l)
	allowance := killWait + 10*time.Second

	// Two epochs of examples/mnist/job.toml (468 steps): the d2 jobs are
	// about half way when the pinned job comes the second time (steps 190
	// and 290 of 702 in a run on the loaded 2-core VM).
	const steps = 468
	job := mnistJobFile(t, l, 2)
	type result struct {
		digest string
		err    error
	}
	local := make(chan result, 1)
	go func() { d, err := l.LocalDigest(job, steps); local <- result{d, err} }()

	var d2 []*d2Job
	for _, node := range []string{"n3", "n4"} {
		d2 = append(d2, submitD2MNIST(t, l, ctx, node, job, steps))
	}
	for _, j := range d2 {
		waitFor(t, 90*time.Second, "d2 job "+j.id+" training on "+j.node, func() bool {
			p, ok := j.progress(ctx, l)
			return ok && p.Step > 0
		})
		s, err := l.CLI.Job(ctx, j.id)
		if c, cerr := elastic.ParseComment(s.Comment); err != nil || cerr != nil || c.Request.Determinism != elastic.D2 {
			t.Fatalf("job %s comment %q (%v, %v): want a d2 request", j.id, s.Comment, err, cerr)
		}
	}

	// 1. Rigid: the v100 GPUs are idle.
	rigid := pinnedV100Job(t, l)
	rigidSubmit, rigidStart := slurmTimes(t, l, ctx, rigid, 30*time.Second)
	rigidDelay := rigidStart.Sub(rigidSubmit)
	if _, err := l.WaitState(ctx, rigid, 30*time.Second, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	t.Logf("rigid: pinned job %s submitted %s, started %s (delay %v)", rigid,
		rigidSubmit.Format(time.TimeOnly), rigidStart.Format(time.TimeOnly), rigidDelay)

	// 2. Elastic: the daemon grows the d2 jobs onto the v100 nodes.
	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2", "n3", "n4"}, worker: config.DefaultWorkerCommand}
	d := startDaemon(t, l, s, "backfilld")
	var onV100 []slurmcli.Job // running extra jobs on n1 or n2
	// Extra jobs of the d2 jobs hold v100 GPUs: Slurm must preempt them for
	// the pinned job, which is what is measured. Their workers' joining is
	// not waited for: on a quiet machine the d2 jobs (468 steps, about 40 s)
	// ended 20 s after their extra jobs started, before the joined workers
	// showed in their progress, and the planner may lend every v100 GPU to
	// one of them; joining is tested by the growth tests.
	waitFor(t, 90*time.Second, "extra jobs of the d2 jobs running on the v100 nodes", func() bool {
		onV100 = nil
		for _, j := range d2 {
			for _, x := range extrasOf(t, l, j.id) {
				if x.State == "RUNNING" && (x.NodeList == "n1" || x.NodeList == "n2") {
					onV100 = append(onV100, x)
				}
			}
		}
		return len(onV100) > 0
	})
	lentBefore := lentGPUs(t, onV100)
	for _, j := range d2 {
		if p, ok := j.progress(ctx, l); ok && p.Step >= p.TotalSteps-20 {
			t.Fatalf("d2 job %s is at step %d of %d already: too little left to measure the pinned job beside it", j.id, p.Step, p.TotalSteps)
		}
	}

	submitted := time.Now()
	pinned := pinnedV100Job(t, l)
	returned := time.Now()            // sbatch returned: squeue lists the job from here on
	planned := map[string]time.Time{} // earliest planned start seen of every pending job
	var p slurmcli.Job
	waitFor(t, time.Minute, "pinned job "+pinned+" starting", func() bool {
		jobs, err := l.CLI.Squeue(ctx)
		if err != nil {
			return false
		}
		for _, j := range jobs {
			if j.State == "PENDING" {
				if st, ok, _ := j.Start(time.Local); ok && !st.IsZero() && (planned[j.ID].IsZero() || st.Before(planned[j.ID])) {
					planned[j.ID] = st
				}
			}
		}
		p, err = l.CLI.Job(ctx, pinned)
		return err == nil && p.State != "PENDING"
	})
	// The job has left PENDING; this only reads Slurm's recorded times (the
	// delay below is measured on them, not on this deadline). 1 s was too
	// little for squeue's answer while the daemon cycles ("still unknown
	// after 1s" twice on 2026-12-02, once on each Slurm version).
	pinnedSubmit, pinnedStart := slurmTimes(t, l, ctx, pinned, 30*time.Second)
	delay := pinnedStart.Sub(pinnedSubmit)
	t.Logf("elastic: %d v100 GPUs lent to the d2 jobs in %d extra jobs (%s); pinned job %s submitted %s, started %s on %s (delay %v; rigid %v, allowance %v = KillWait %v + 10 s), seen starting %v after sbatch returned",
		lentBefore, len(onV100), describeExtras(onV100), pinned, pinnedSubmit.Format(time.TimeOnly), pinnedStart.Format(time.TimeOnly),
		p.NodeList, delay, rigidDelay, allowance, killWait, time.Since(submitted).Round(100*time.Millisecond))
	if p.NodeList != "n[1-2]" {
		t.Errorf("pinned job ran on %q, want n[1-2]", p.NodeList)
	}
	if delay > rigidDelay+allowance {
		t.Errorf("pinned job started %v after its submission; under rigid %v: more than the %v Slurm's preemption of extra jobs needs", delay, rigidDelay, allowance)
	}
	for _, x := range onV100 {
		xs, err := l.WaitState(ctx, x.ID, 30*time.Second, "COMPLETED", "PREEMPTED", "CANCELLED", "FAILED")
		if err != nil {
			t.Errorf("extra job %s on %s after the pinned job started: %v", x.ID, x.NodeList, err)
			continue
		}
		t.Logf("extra job %s on %s (%s) ended %s at %s", x.ID, x.NodeList, x.TRESPerNode, xs.State, xs.EndTime)
	}

	// Both d2 jobs finish with the fixed run's digest.
	var want result
	select {
	case want = <-local:
	case <-ctx.Done():
		t.Fatal("the local reference run did not finish in time")
	}
	if want.err != nil {
		t.Fatal(want.err)
	}
	for _, j := range d2 {
		j.checkDigest(t, l, ctx, steps, want.digest)
	}

	// No reservation moved: every pending job seen with a planned start
	// started no later than it (Slurm prints whole seconds). The pinned
	// job's own planned start, while the extra jobs it preempted are still
	// completing, is the moment of that backfill pass: it starts once they
	// are gone, which the preemption allowance bounds.
	for id, at := range planned {
		j, err := l.CLI.Job(ctx, id)
		if err != nil {
			continue
		}
		late := time.Second
		if id == pinned {
			late = allowance
		}
		if st, ok, _ := j.Start(time.Local); ok && j.State != "PENDING" && st.After(at.Add(late)) {
			t.Errorf("job %s started %s, more than %v after its planned start %s", id, st.Format(time.TimeOnly), late, at.Format(time.TimeOnly))
		}
	}
	t.Logf("planned starts seen while the pinned job waited: %v", planned)

	// From the pinned job's submission to its end every v100 GPU was its
	// or preempted for it: the daemon lent none (Slurm prints the end in
	// whole seconds, so a lend in its last second is not counted).
	pe, err := l.WaitState(ctx, pinned, 30*time.Second, "COMPLETED")
	if err != nil {
		t.Fatal(err)
	}
	pinnedEnd, err := time.ParseInLocation(slurmcli.TimeLayout, pe.EndTime, time.Local)
	if err != nil {
		t.Fatalf("end time of job %s: %v", pinned, err)
	}
	d.stop(syscall.SIGTERM)
	db, err := backfillstore.Open(filepath.Join(s.dir, "backfill.db"))
	if err != nil {
		t.Fatal(err)
	}
	xs, err := db.Extras(context.Background())
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A cycle that read squeue before the pinned job existed cannot know of
	// it and may still submit onto the v100s after it (seen on 24.11 in
	// CI's run of 2026-12-02: an extra job submitted 3 ms after the pinned
	// job; and on 22.05 on 2026-12-05 under load: one cycle's two extra
	// jobs 0.5 s and 1.1 s after it; Slurm preempted them): only a lend
	// decided by a cycle that began to read Slurm after the pinned job's
	// sbatch returned is the defect.
	readAt := lendReadings(t, d.log)
	t.Logf("the daemon's log gives when the cycle that decided it read Slurm for %d of the %d extra jobs", len(readAt), len(xs))
	for _, x := range xs {
		if (x.Node == "n1" || x.Node == "n2") && !x.Submitted.Before(submitted) && x.Submitted.Before(pinnedEnd) {
			at, ok := readAt[x.ID]
			if !ok {
				t.Errorf("extra job %s of %s onto %s: the daemon's log has no submission of it with the time its cycle read Slurm", x.ID, x.Parent, x.Node)
				continue
			}
			if at.Before(returned) {
				t.Logf("extra job %s of %s submitted onto %s at %s by a cycle that read Slurm from %s, before pinned job %s's sbatch returned (%s)",
					x.ID, x.Parent, x.Node, x.Submitted.Format("15:04:05.000"), at.Format("15:04:05.000"), pinned, returned.Format("15:04:05.000"))
				continue
			}
			t.Errorf("extra job %s of %s submitted onto %s at %s by a cycle that read Slurm from %s, while pinned job %s (sbatch returned %s, ended %s) held or waited for every v100 GPU",
				x.ID, x.Parent, x.Node, x.Submitted.Format("15:04:05.000"), at.Format("15:04:05.000"), pinned, returned.Format("15:04:05.000"), pinnedEnd.Format(time.TimeOnly))
		}
	}
}

// lendReadings reads the daemon's JSON log at path and returns, for each
// extra job it submitted ("grew: extra job submitted", extra_id), when the
// cycle that decided it began to read Slurm (the line's read_at).
func lendReadings(t *testing.T, path string) map[string]time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readAt := map[string]time.Time{}
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Message string `json:"@message"`
			ExtraID string `json:"extra_id"`
			ReadAt  string `json:"read_at"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Message != "grew: extra job submitted" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.ReadAt)
		if err != nil {
			t.Fatalf("daemon log %s: extra job %s submitted with read_at %q: %v", path, e.ExtraID, e.ReadAt, err)
		}
		readAt[e.ExtraID] = at
	}
	return readAt
}

// d2Job is one d2 elastic MNIST job of the test.
type d2Job struct {
	id, node, summary, out string
}

// submitD2MNIST submits examples/slurm/mnist.sbatch with easyscale-sbatch
// as a d2 elastic job (1–2 nodes, 8 logical workers) on all four GPUs of
// node, training the job file for steps steps. It asks for GPUs of no type
// (--gres=gpu:4; -w puts it on node's): a d2 job that names a type is
// grown onto that type only.
func submitD2MNIST(t *testing.T, l *slurmlab.Lab, ctx context.Context, node, job string, steps int) *d2Job {
	t.Helper()
	summary := filepath.Join(t.TempDir(), "summary.json")
	cmd := l.Command(ctx, filepath.Join(l.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=1-2",
		"--logical-workers=8", "--determinism=d2", "-w", node, "--gres=gpu:4", "examples/slurm/mnist.sbatch")
	cmd.Dir = l.Root
	cmd.Env = append(cmd.Env, fmt.Sprintf("EASYSCALE_STEPS=%d", steps), "EASYSCALE_SUMMARY="+summary, "EASYSCALE_CONFIG="+job)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
	}
	j := &d2Job{id: strings.TrimSpace(string(out)), node: node, summary: summary}
	j.out = filepath.Join(l.Root, "es-mnist-"+j.id+".out")
	t.Cleanup(func() {
		exec.Command("scancel", j.id).Run()
		if t.Failed() {
			b, _ := os.ReadFile(j.out)
			t.Logf("d2 job %s output:\n%s", j.id, tail(string(b), 30))
		}
		os.RemoveAll(filepath.Join(l.Root, ".easyscale", j.id))
		os.Remove(j.out)
	})
	cancelExtrasAtEnd(t, l, j.id)
	return j
}

// progress is the runtime's progress report in the job's comment.
func (j *d2Job) progress(ctx context.Context, l *slurmlab.Lab) (elastic.Progress, bool) {
	s, err := l.CLI.Job(ctx, j.id)
	if err != nil || s.State != "RUNNING" {
		return elastic.Progress{}, false
	}
	c, err := elastic.ParseComment(s.Comment)
	if err != nil || c.Progress == nil {
		return elastic.Progress{}, false
	}
	return *c.Progress, true
}

// checkDigest waits until the job ends and compares its summary with the
// fixed run's.
func (j *d2Job) checkDigest(t *testing.T, l *slurmlab.Lab, ctx context.Context, steps int, want string) {
	t.Helper()
	dump := func() string { b, _ := os.ReadFile(j.out); return tail(string(b), 40) }
	s, err := l.WaitState(ctx, j.id, time.Until(deadlineOf(ctx)), "COMPLETED")
	if err != nil {
		t.Errorf("d2 job %s: %v\n%s", j.id, err, dump())
		return
	}
	b, err := os.ReadFile(j.summary)
	if err != nil {
		t.Errorf("d2 job %s (%s) wrote no summary: %v\n%s", j.id, s.State, err, dump())
		return
	}
	var sum struct {
		Digest   string `json:"digest"`
		Steps    int    `json:"steps"`
		Schedule string `json:"schedule"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Errorf("d2 job %s summary: %v", j.id, err)
		return
	}
	t.Logf("d2 job %s: %d steps, schedule %s, digest %s", j.id, sum.Steps, sum.Schedule, sum.Digest)
	if sum.Steps != steps || sum.Digest != want {
		t.Errorf("d2 job %s: %d steps, digest %s; the fixed run: %d steps, digest %s", j.id, sum.Steps, sum.Digest, steps, want)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// pinnedV100Job submits a rigid job that needs every v100 GPU of the lab:
// two nodes with gpu:v100:4 each, one minute, running 2 s.
func pinnedV100Job(t *testing.T, l *slurmlab.Lab) string {
	t.Helper()
	return l.Submit(t, "#!/bin/sh\nsleep 2\n", "-p", "normal", "-N", "2", "--gres=gpu:v100:4", "-t", "1", "-J", "pinned-v100")
}

// slurmTimes waits up to within until job id has started and returns its
// submit and start times as slurmctld recorded them (squeue %V and %S,
// whole seconds on one clock).
func slurmTimes(t *testing.T, l *slurmlab.Lab, ctx context.Context, id string, within time.Duration) (submit, start time.Time) {
	t.Helper()
	if _, err := l.WaitState(ctx, id, within, "RUNNING", "COMPLETING", "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	out, err := l.CLI.Output(ctx, "squeue", "-h", "-j", id, "--states=all", "-o", "%V|%S")
	if err != nil {
		t.Fatalf("squeue of job %s: %v", id, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "|")
	if len(f) != 2 {
		t.Fatalf("squeue -o %%V|%%S of job %s: %q", id, out)
	}
	if submit, err = time.ParseInLocation(slurmcli.TimeLayout, f[0], time.Local); err != nil {
		t.Fatalf("submit time of job %s: %v", id, err)
	}
	if start, err = time.ParseInLocation(slurmcli.TimeLayout, f[1], time.Local); err != nil {
		t.Fatalf("start time of job %s: %v", id, err)
	}
	return submit, start
}

// slurmKillWait reads KillWait from `scontrol show config` ("KillWait = 10 sec").
func slurmKillWait(t *testing.T, l *slurmlab.Lab) time.Duration {
	t.Helper()
	out, err := l.CLI.Output(context.Background(), "scontrol", "show", "config")
	if err != nil {
		t.Fatalf("scontrol show config: %v", err)
	}
	m := regexp.MustCompile(`(?m)^KillWait\s*=\s*(\d+) sec`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no KillWait in scontrol show config:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return time.Duration(n) * time.Second
}

// lentGPUs sums the GPUs of extra jobs.
func lentGPUs(t *testing.T, xs []slurmcli.Job) int {
	t.Helper()
	n := 0
	for _, x := range xs {
		g, err := x.GPUs()
		if err != nil {
			t.Fatalf("extra job %s GPUs %q: %v", x.ID, x.TRESPerNode, err)
		}
		n += g
	}
	return n
}

func describeExtras(xs []slurmcli.Job) string {
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%s of %s on %s %s", x.ID, strings.TrimPrefix(x.Comment, "es-extra parent="), x.NodeList, x.TRESPerNode))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
