package backfill

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// unprivileged is the user the hostile jobs are submitted as (root's
// `sbatch --uid`): a user who may set its own jobs' names and comments, and
// nothing else.
const unprivileged = "nobody"

// submitAs submits script as user with sbatch --uid (the script lives in a
// directory that user can read; output goes to /dev/null, the job runs in
// /tmp) and cancels the job when the test ends. It returns the job id.
func submitAs(t *testing.T, l *slurmlab.Lab, user, script string, args ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "job.sh")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := l.CLI.Sbatch(ctx, path, append([]string{"--uid=" + user, "--chdir=/tmp", "-o", "/dev/null"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.CLI.Output(context.Background(), "scancel", id) })
	return id
}

// rawState returns what `squeue -h -j ID -t all -o %T` prints for the job:
// read without the package's parser, so the check does not depend on what
// is under test.
func rawState(t *testing.T, l *slurmlab.Lab, id string) string {
	t.Helper()
	out, err := l.CLI.Output(context.Background(), "squeue", "-h", "-j", id, "-t", "all", "-o", "%T")
	if err != nil {
		t.Fatalf("state of job %s: %v", id, err)
	}
	return strings.TrimSpace(string(out))
}

// waitRawState waits until rawState is one of states.
func waitRawState(t *testing.T, l *slurmlab.Lab, id string, timeout time.Duration, states ...string) {
	t.Helper()
	waitFor(t, timeout, "job "+id+" in "+strings.Join(states, "/"), func() bool {
		s := rawState(t, l, id)
		for _, w := range states {
			if s == w {
				return true
			}
		}
		return false
	})
}

// runOnce runs `easyscale-backfilld --once` (as root, like the test binary)
// with s and returns its log.
func runOnce(t *testing.T, l *slurmlab.Lab, s settings) string {
	t.Helper()
	cfg := s.write(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "--config", cfg, "--once")
	cmd.Env = append(append([]string{}, l.Env...), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("easyscale-backfilld --once (%v):\n%s", err, tail(string(out), 40))
	return string(out)
}

// forgedRecord returns a job name that, printed by the squeue --Format the
// daemon used to read (16 fields each ending in 0x1F, a newline per
// record), closes its own record after the name and injects a whole fake
// record: job victim, named es-extra-<parent>, in partition low, running on
// node with one t4 GPU, commented "es-extra parent=<parent>". The real
// fields after the name then become a third record ("0" + "x").
func forgedRecord(victim, parent, node string) string {
	const us = "\x1f"
	ownTail := []string{"RUNNING", "normal", "1", "1", "N/A", "N/A", node, "None", "N/A", "N/A", "5:00", "(null)", node, "(null)"}
	fake := []string{victim, "es-extra-" + parent, "RUNNING", "low", "1", "1", "gres:gpu:t4:1", "N/A", node, "None",
		"N/A", "N/A", "5:00", "(null)", node, "es-extra parent=" + parent}
	return "x" + us + strings.Join(ownTail, us) + us + "\n" + strings.Join(fake, us) + us + "\n" + "0" + us + "x"
}

func TestAForgedSqueueRecordInAJobNameCannotCancelAnotherUsersJob(t *testing.T) {
	l := slurmlab.Require(t)
	// The victim: root's job on n1, outside the daemon's nodes.
	victim := l.Submit(t, "#!/bin/sh\nsleep 120\n", "-p", "normal", "-w", "n1", "-J", "victim", "-t", "3")
	waitRawState(t, l, victim, 30*time.Second, "RUNNING")
	// The attacker: nobody's job whose name forges an extra job record for
	// the victim's id, of a parent that does not exist, on the daemon's n3.
	name := forgedRecord(victim, "999999", "n3")
	if n := strings.Count(name, "\x1f"); n < 16 || !strings.Contains(name, "\n") {
		t.Fatalf("forged name has %d 0x1F and no newline", n)
	}
	attacker := submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 120\n", "-p", "normal", "-w", "n4", "-J", name, "-t", "3")
	// And nobody's own job in the exact extra job form, in extra.partition
	// on the daemon's node, for a parent that does not exist: no daemon
	// submitted it, so none may cancel it.
	lookalike := submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 120\n", "-p", "low", "-w", "n3", "-J", "es-extra-999999",
		"--comment=es-extra parent=999999", "-t", "3")
	waitRawState(t, l, attacker, 30*time.Second, "RUNNING")
	waitRawState(t, l, lookalike, 30*time.Second, "RUNNING")
	s := settings{dir: t.TempDir(), nodes: []string{"n3"}}
	log := runOnce(t, l, s)
	if st := rawState(t, l, victim); st != "RUNNING" {
		t.Fatalf("victim job %s is %q after a root easyscale-backfilld --once, want RUNNING: a forged record in job %s's name "+
			"made the daemon act on another user's job", victim, st, attacker)
	}
	if st := rawState(t, l, lookalike); st != "RUNNING" {
		t.Errorf("job %s in the extra job form that the daemon did not submit is %q, want RUNNING", lookalike, st)
	}
	if strings.Contains(log, `"cycle failed`) || strings.Contains(log, `"cancelling extra job"`) {
		t.Errorf("the daemon failed its cycle or cancelled a job beside a hostile name; want neither")
	}
}

func TestAJobNameHolding0x1FDoesNotStopAnElasticJobFromGrowing(t *testing.T) {
	l := slurmlab.Require(t)
	// nobody's job with one 0x1F and a newline in its name, held (pending,
	// visible to squeue the whole test, using nothing).
	hostile := submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 120\n", "--hold", "-J", "bad\x1fname\nsecond line", "-t", "3")
	waitRawState(t, l, hostile, 30*time.Second, "PENDING")
	s := settings{dir: t.TempDir(), nodes: []string{"n3"}}
	d := startDaemon(t, l, s, "backfilld")
	e, _ := submitElastic(t, l, "es-req min=1 max=3 lw=4 d1", "-w", "n3", "--gres=gpu:t4:1", "-t", "5")
	cancelExtrasAtEnd(t, l, e.ID)
	waitFor(t, 3*pollInterval+2*time.Second, "an extra job of "+e.ID+" beside a job named with 0x1F", func() bool {
		out, err := l.CLI.Output(context.Background(), "squeue", "-h", "-t", "all", "-o", "%i %j")
		return err == nil && strings.Contains(string(out), "es-extra-"+e.ID)
	})
	d.stop(syscall.SIGTERM)
	for _, line := range logLines(t, d.log) {
		if line["@message"] == "cycle failed; state kept, retrying" {
			t.Errorf("a cycle failed beside job %s (named with 0x1F): %v", hostile, line["error"])
		}
	}
}

// TestTheDaemonsOwnSqueueVariablesHideNoJob: squeue reads filters and the
// time format from its caller's environment. With SQUEUE_USERS=nobody,
// SQUEUE_PARTITION=low and SLURM_TIME_FORMAT=relative set for the daemon
// (a profile, sudo -E), root's running job read by id was "no such job"
// and its start time "10:01:02", which the daemon reads as no time (no
// reservation seen). On the real squeue it must be found, with its true
// user and a start time in slurmcli.TimeLayout.
func TestTheDaemonsOwnSqueueVariablesHideNoJob(t *testing.T) {
	l := slurmlab.Require(t)
	id := l.Submit(t, "#!/bin/sh\nsleep 120\n", "-p", "normal", "-w", "n1", "-J", "seen", "-t", "3")
	waitRawState(t, l, id, 30*time.Second, "RUNNING")
	r := slurmcli.Runner{Env: append(append([]string{}, l.Env...),
		"SQUEUE_USERS=nobody", "SQUEUE_PARTITION=low", "SQUEUE_NAMES=other", "SQUEUE_FORMAT=%i", "SLURM_TIME_FORMAT=relative")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := r.Job(ctx, id)
	if err != nil {
		t.Fatalf("reading running job %s by id with the caller's SQUEUE_* variables set: %v", id, err)
	}
	if j.User != "root" || j.State != "RUNNING" {
		t.Errorf("job %s: user %q state %q, want root RUNNING", id, j.User, j.State)
	}
	if _, ok, err := j.Start(time.Local); !ok || err != nil {
		t.Errorf("job %s: start time %q is not in %s (ok %v, %v)", id, j.StartTime, slurmcli.TimeLayout, ok, err)
	}
	nodes, err := r.Sinfo(ctx)
	if err != nil || len(nodes) != 4 {
		t.Errorf("sinfo with the caller's variables: %d nodes, %v; want the lab's 4", len(nodes), err)
	}
}
