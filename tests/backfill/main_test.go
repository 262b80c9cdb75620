// Package backfill tests easyscale-backfilld against the real Slurm lab
// (tests/lab): growing an elastic job into idle GPUs, ending extra jobs
// before a reserved start, SIGKILL and restart, and an unreachable
// slurmctld.
//
// The daemon runs as a real process: the test binary re-executes itself
// with EASYSCALE_BACKFILLD_CHILD=1 and becomes `easyscale-backfilld ARGS`.
// Until the runtime's elastic MNIST job exists, the elastic job is a
// stand-in batch script that writes the rendezvous files the daemon looks
// for (token, job-id, coordinator) and sleeps; extra jobs run a stand-in
// worker (extra.worker_command) that logs "joined" with the coordinator it
// read and leaves with exit 0 on SIGTERM, as `easyscale worker` does.
//
// Each daemon manages only its test's nodes (config key nodes): the
// shrink-to-admit (a rigid job starts once an elastic MNIST job is shrunk),
// the d1-job (a job needing every v100 GPU starts beside d2 jobs grown onto
// them as under rigid; all four nodes), grow, restart, foreign-job (a
// user's job borrowing the extra comment is never cancelled) and torch
// MNIST tests run first, on n3 and n4; then the
// reservation test (n1, n2), the elastic MNIST test (n3, n4) and the
// unreachable-slurmctld test run in parallel, so the package takes about
// three and a half minutes, plus about two for the d1-job test (108–219 s
// measured on the loaded 2-core VM; under load 17–20 the whole package ran
// past go test's default 10-minute timeout, which CI raises to 40).
package backfill

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/daemon"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

const childEnv = "EASYSCALE_BACKFILLD_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := daemon.Main(ctx, os.Args[1:], os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(slurmlab.Main(m))
}

// elasticJob is the stand-in elastic job: it publishes its rendezvous
// directory WorkDir/.easyscale/JOBID like the runtime and sleeps.
const elasticJob = `#!/bin/sh
d=.easyscale/$SLURM_JOB_ID
mkdir -p "$d" && chmod 700 .easyscale "$d"
umask 077
echo secret > "$d/token"
echo "$SLURM_JOB_ID" > "$d/job-id"
echo "$(hostname):4$SLURM_JOB_ID" > "$d/coordinator.tmp" && mv "$d/coordinator.tmp" "$d/coordinator"
exec sleep 300
`

// workerScript stands in for `easyscale worker --join ... --token-file ...`:
// $1 is the coordinator file. It logs to workers.log next to it. It waits
// in a loop of short foreground sleeps, not on one background sleep: with
// "sleep 600 & wait", Slurm's SIGTERM could kill the sleep and end the wait
// and the script before the shell ran its own trap, and "left" went
// unlogged (the flake of
// TestRigidJobStartsNoLaterThanSlurmPlannedBecauseExtraJobsEndInTime, about
// 1 run in 4). A trapped signal now runs its trap once the sleep in
// progress ends, within a second.
const workerScript = `#!/bin/sh
log="$(dirname "$1")/workers.log"
trap 'echo "left $SLURM_JOB_ID" >> "$log"; exit 0' TERM
echo "joined $SLURM_JOB_ID $(cat "$1")" >> "$log"
while :; do sleep 1; done
`

// daemonProc is one running easyscale-backfilld.
type daemonProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// settings is a test's daemon configuration.
type settings struct {
	dir    string // holds backfill.toml, backfill.db, worker.sh, logs
	nodes  []string
	extra  string // more TOML (top-level keys)
	conf   string // SLURM_CONF for the daemon ("": the lab's)
	worker string // extra.worker_command ("": the stand-in worker.sh)
	// partition is extra.partition ("": low).
	partition string
	// env adds variables to the daemon's environment.
	env []string
}

func (s settings) write(t *testing.T) string {
	t.Helper()
	worker := filepath.Join(s.dir, "worker.sh")
	if err := os.WriteFile(worker, []byte(workerScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if s.worker == "" {
		s.worker = "srun sh " + worker + " {coordinator_file} {job_id}"
	}
	if s.partition == "" {
		s.partition = "low"
	}
	quoted := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	text := fmt.Sprintf(`poll_interval = "1s"
max_backoff = "4s"
grace_period = "5s"
safety_margin = "20s"
min_lend = "1m"
max_lend = "5m"
pending_timeout = "20s"
metrics_address = "off"
state_db = %q
nodes = [%s]
%s
[extra]
partition = %q
worker_command = %q
[log]
level = "debug"
json = true
`, filepath.Join(s.dir, "backfill.db"), strings.Join(quoted, ", "), s.extra, s.partition, s.worker)
	path := filepath.Join(s.dir, "backfill.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startDaemon starts easyscale-backfilld with s; the test's cleanup stops it.
func startDaemon(t *testing.T, l *slurmlab.Lab, s settings, name string) *daemonProc {
	t.Helper()
	cfg := s.write(t)
	logPath := filepath.Join(s.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "--config", cfg)
	cmd.Env = append(append(append([]string{}, l.Env...), s.env...), childEnv+"=1")
	if s.conf != "" {
		cmd.Env = append(cmd.Env, "SLURM_CONF="+s.conf)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &daemonProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); logFile.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("daemon %s log:\n%s", name, tail(string(b), 60))
		}
	})
	return p
}

// stop sends sig and waits for the process to exit.
func (p *daemonProc) stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// submitElastic submits the stand-in elastic job and waits until it runs
// and its coordinator file exists; it returns the job and its rendezvous dir.
func submitElastic(t *testing.T, l *slurmlab.Lab, comment string, args ...string) (slurmcli.Job, string) {
	t.Helper()
	id := l.Submit(t, elasticJob, append([]string{"--comment=" + comment, "--job-name=es-elastic"}, args...)...)
	ctx := context.Background()
	j, err := l.WaitState(ctx, id, 30*time.Second, "RUNNING")
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.CLI.Output(ctx, "scontrol", "show", "job", "-o", id)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := slurmcli.ParseScontrol(out, slurmcli.KindJob)
	if err != nil || len(recs) == 0 {
		t.Fatalf("scontrol show job %s: %v", id, err)
	}
	work, _ := recs[0].Get("WorkDir")
	rdv := filepath.Join(work, ".easyscale", id)
	// 30 s: slurmd may launch a running job's script seconds late while the
	// suite holds both cores (10.3 s seen in a clean-clone CI).
	waitFor(t, 30*time.Second, "coordinator file of job "+id, func() bool {
		_, err := os.Stat(filepath.Join(rdv, "coordinator"))
		return err == nil
	})
	return j, rdv
}

// extrasOf lists the extra jobs of parent that Slurm has not finished.
func extrasOf(t *testing.T, l *slurmlab.Lab, parent string) []slurmcli.Job {
	t.Helper()
	jobs, err := l.CLI.Squeue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []slurmcli.Job
	for _, j := range jobs {
		if j.Comment == daemon.ExtraComment(parent) {
			out = append(out, j)
		}
	}
	return out
}

// cancelExtrasAtEnd cancels whatever extra jobs of parent are left when the
// test ends (after the daemons stopped: cleanups run last-registered first).
func cancelExtrasAtEnd(t *testing.T, l *slurmlab.Lab, parent string) {
	t.Cleanup(func() {
		for _, j := range extrasOf(t, l, parent) {
			l.CLI.Output(context.Background(), "scancel", j.ID)
		}
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}
