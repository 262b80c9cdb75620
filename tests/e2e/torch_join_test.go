package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/data/datatest"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

// Torch workers on other machines: `easyscale run --listen` of a torch job
// and `easyscale worker --join` processes, each starting its own Python
// process, on loopback.

// joinHeartbeat is the heartbeat timeout of these runs: long enough for a
// loaded test machine; a SIGKILLed worker is noticed at once anyway (its
// connection closes).
const joinHeartbeat = "20s"

// startTorchListen starts `run --listen` of job and waits for its token file.
func startTorchListen(t *testing.T, job, state, addr string, env []string, extra ...string) *started {
	t.Helper()
	// No self-check: its steps would count among TOYJOB_SLOW's forwards (the references run it).
	args := append([]string{"run", "--config", job, "--no-eval", "--quiet", "--listen", addr, "--state", state,
		"--heartbeat-timeout", joinHeartbeat, "--summary", filepath.Join(state, "summary.json"), "--no-self-check"}, extra...)
	s := start(t, env, args...)
	deadline := time.After(120 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(state, "token")); err == nil {
			return s
		}
		select {
		case err := <-s.done:
			t.Fatalf("the coordinator ended (%v) before writing its token:\n%s", err, s.stderr)
		case <-deadline:
			t.Fatalf("no token file within 120 s:\n%s", s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func startTorchWorker(t *testing.T, addr, state string, env []string, extra ...string) *started {
	t.Helper()
	return start(t, env, append([]string{"worker", "--join", addr, "--token-file", filepath.Join(state, "token"),
		"--heartbeat-timeout", joinHeartbeat}, extra...)...)
}

var queuedPID = regexp.MustCompile(`queued for admission: .*pid=(\d+)`)

// pythonPID is the pid of a joined worker's Python process, from its log.
func (s *started) pythonPID(t *testing.T) int {
	t.Helper()
	m := queuedPID.FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no Python pid in the worker's log:\n%s", s.stderr)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// committedOn reports whether the ledger under state has a step that ran on
// workers physical workers.
func committedOn(state string, workers int) bool { return stepsOn(state, workers) > 0 }

// alive reports whether pid runs (a zombie has exited).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func waitGone(t *testing.T, pid int, within time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(within); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs %v later", what, pid, within)
		}
	}
}

func TestTorchWorkersJoinAndAKilledOneIsSurvived(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval"))
	state, addr := t.TempDir(), freePort(t)
	// The coordinator's own process is slow from step 2 on (1 s a forward:
	// 32 s for the 8 steps left alone, against the joiners' Python start-up
	// of up to 18 s under the suite's heaviest load; at 0.5 s the run once
	// ended before they were admitted), so the joiners arrive mid-run; they
	// compute at full speed.
	coord := startTorchListen(t, job, state, addr, []string{"TOYJOB_SLOW=8:1"})
	w1 := startTorchWorker(t, addr, state, nil)
	w2 := startTorchWorker(t, addr, state, nil)
	coord.waitLine(t, state, "admitted: rank=2", 120*time.Second)
	coord.waitLine(t, state, "world_size=3", 30*time.Second)
	// Kill once a step has committed on the three: this test is about a
	// worker lost mid-run (one lost while the process group forms is
	// TestTorchAJoinerLostWhileTheGroupFormsIsNoticedAtOnce's).
	for deadline := time.Now().Add(120 * time.Second); !committedOn(state, 3); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no step committed on 3 workers within 2 min:\n%s", coord.stderr)
		}
	}
	py := w1.pythonPID(t)
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, py, 10*time.Second, "the killed worker's Python process")
	// The loss is noticed in the step (its chain fails: the survivors redo
	// it, reason="lost workers") or, when the kill lands between steps, at
	// the boundary (the listener removes the silent worker). Then SIGTERM
	// of the other: its Python process asks to leave, the coordinator
	// releases it at the step boundary, it exits 0.
	coord.waitMatch(t, state, regexp.MustCompile(`reason="lost workers"|removing a lost worker`), 120*time.Second)
	py2 := w2.pythonPID(t)
	if err := w2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, took := w2.exitCode(t, 30*time.Second); code != 0 || !strings.Contains(w2.stderr.String(), "released by the coordinator") {
		t.Fatalf("the SIGTERMed worker exited %d after %v, want 0 once released:\n%s", code, took, w2.stderr)
	} else {
		t.Logf("SIGTERM of a joined worker to its exit: %v", took)
	}
	waitGone(t, py2, 10*time.Second, "the released worker's Python process")
	if code, _ := coord.exitCode(t, 180*time.Second); code != 0 {
		t.Fatalf("the run exited %d:\n%s", code, coord.stderr)
	}
	sum := readFile(t, filepath.Join(state, "summary.json"))
	if !strings.Contains(sum, ref) {
		t.Fatalf("summary %s: want the digest %s of one process per logical worker\ncoordinator:\n%s", sum, ref, coord.stderr)
	}
	if got, want := summarySchedule(t, sum), ledgerSchedule(t, state); got != want {
		t.Errorf("summary schedule %q, the ledger's world sizes %q", got, want)
	}
	log := coord.stderr.String()
	if !strings.Contains(log, "lost") {
		t.Fatalf("the coordinator never noticed the lost worker:\n%s", log)
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "lost") || strings.Contains(l, "admitted") {
			t.Log(l)
		}
	}
}

func TestTorchWorkerWithOtherNumericsIsRefusedNamingTheSetting(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	state, addr := t.TempDir(), freePort(t)
	coord := startTorchListen(t, job, state, addr, []string{"TOYJOB_SLOW=0:1"})
	w := startTorchWorker(t, addr, state, []string{"ATEN_CPU_CAPABILITY=default"})
	code, _ := w.exitCode(t, 120*time.Second)
	if code == 0 || !strings.Contains(w.stderr.String(), "ATEN_CPU_CAPABILITY") || !strings.Contains(w.stderr.String(), "refused") {
		t.Fatalf("exit %d, want a refusal naming ATEN_CPU_CAPABILITY:\n%s", code, w.stderr)
	}
	t.Log(lastLine(w.stderr.String()))
	coord.waitLine(t, state, "refused a joiner", 10*time.Second)
	if strings.Contains(coord.stderr.String(), "admitted") {
		t.Fatalf("the coordinator admitted the worker:\n%s", coord.stderr)
	}
}

// TestTorchWorkerOnAnotherTorchVersionIsRefusedNamingBoth joins a worker
// whose Python process reports torch 2.6.0 (the toy job's
// TOYJOB_TORCH_VERSION, as a node with Debian 13's python3-torch would):
// the coordinator refuses it naming its torch version and the group's, and
// the worker exits non-zero.
func TestTorchWorkerOnAnotherTorchVersionIsRefusedNamingBoth(t *testing.T) {
	requireTorch(t)
	_, group, err := torchengine.Python(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if group == "2.6.0" {
		t.Skip("the installed torch is 2.6.0, the version this test makes the joiner report")
	}
	job := toyJob(t)
	state, addr := t.TempDir(), freePort(t)
	coord := startTorchListen(t, job, state, addr, []string{"TOYJOB_SLOW=0:1"})
	w := startTorchWorker(t, addr, state, []string{"TOYJOB_TORCH_VERSION=2.6.0"})
	code, _ := w.exitCode(t, 120*time.Second)
	want := "refused this worker: torch 2.6.0 on the joining worker, the group runs torch " + group + ":"
	if code == 0 || !strings.Contains(w.stderr.String(), want) {
		t.Fatalf("exit %d, want a non-zero exit and %q:\n%s", code, want, w.stderr)
	}
	t.Log(lastLine(w.stderr.String()))
	coord.waitLine(t, state, "refused a joiner", 10*time.Second)
	coord.waitLine(t, state, "torch 2.6.0 on the joining worker, the group runs torch "+group, 10*time.Second)
	if strings.Contains(coord.stderr.String(), "admitted") {
		t.Fatalf("the coordinator admitted the worker:\n%s", coord.stderr)
	}
}

func TestTorchCoordinatorSIGKILLEndsItsWorkers(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	state, addr := t.TempDir(), freePort(t)
	coord := startTorchListen(t, job, state, addr, []string{"TOYJOB_SLOW=0:1"})
	w := startTorchWorker(t, addr, state, nil, "--join-timeout", "2s")
	coord.waitLine(t, state, "admitted: rank=1", 120*time.Second)
	py := w.pythonPID(t)
	if err := coord.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, py, 10*time.Second, "the joined worker's Python process")
	if code, took := w.exitCode(t, 30*time.Second); code == 0 {
		t.Fatalf("the worker exited 0 after %v without its coordinator, want a failure:\n%s", took, w.stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestTorchWorkerWithOtherTrainingDataIsRefusedNamingTheFile(t *testing.T) {
	requireTorch(t)
	bad := datatest.MNISTWithOneLabelChanged(t)
	state, addr := t.TempDir(), freePort(t)
	coord := startTorchListen(t, torchMNIST(), state, addr, nil, "--steps", "400")
	w := startTorchWorker(t, addr, state, []string{"XDG_CACHE_HOME=" + t.TempDir()}, "--data-dir", bad)
	code, _ := w.exitCode(t, 120*time.Second)
	if want := filepath.Join(bad, data.TrainLabelsFile); code != 1 || !strings.Contains(w.stderr.String(), want) || !strings.Contains(w.stderr.String(), "refused") {
		t.Fatalf("exit %d, want 1 and a refusal naming %s:\n%s", code, want, w.stderr)
	}
	t.Log(lastLine(w.stderr.String()))
	coord.waitLine(t, state, "file="+data.TrainLabelsFile, 10*time.Second)
	if strings.Contains(coord.stderr.String(), "admitted") {
		t.Fatalf("the coordinator admitted the worker:\n%s", coord.stderr)
	}
}

// TestTorchTwoNodesAndACutLink: the coordinator (and its own Python
// process) on node n1, a joined worker on node n2 of twoNodes; their gloo
// runs over the veth pair. Mid-run the link is cut: the coordinator gives
// the n2 worker up within the heartbeat timeout, its own process's
// collective fails within the same bound, the step is redone on n1 alone,
// and the run ends with the one-process-per-logical-worker digest.
func TestTorchTwoNodesAndACutLink(t *testing.T) {
	n1, n2, link := twoNodes(t)
	requireTorch(t)
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval"))
	state := t.TempDir()
	coord := startIn(t, n1, []string{"TOYJOB_SLOW=8:0.5"}, "run", "--config", job, "--no-eval", "--quiet", "--no-self-check",
		"--listen", "169.254.100.1:7712", "--state", state, "--heartbeat-timeout", "5s", "--summary", filepath.Join(state, "summary.json"))
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(state, "token")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator never wrote its token:\n%s", coord.stderr)
		}
	}
	w := startIn(t, n2, nil, "worker", "--join", "169.254.100.1:7712", "--token-file", filepath.Join(state, "token"),
		"--heartbeat-timeout", joinHeartbeat, "--join-timeout", "5s")
	coord.waitLine(t, state, "world_size=2", 120*time.Second)
	coord.waitLine(t, state, "gloo=169.254.100.2", time.Second)
	// A step across both nodes, then the cut.
	step := lastStep(state)
	for deadline := time.Now().Add(60 * time.Second); lastStep(state) < step+2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no step across both nodes:\n%s\nworker:\n%s", coord.stderr, w.stderr)
		}
	}
	if out, err := exec.Command("ip", "-n", n1, "link", "set", link, "down").CombinedOutput(); err != nil {
		t.Fatalf("cutting the link: %v\n%s", err, out)
	}
	t0 := time.Now()
	coord.waitLine(t, state, "workers lost; redoing the step", 60*time.Second)
	t.Logf("link cut to the redo: %v", time.Since(t0))
	if code, _ := coord.exitCode(t, 180*time.Second); code != 0 {
		t.Fatalf("the run exited %d after the cut:\n%s\nworker:\n%s", code, coord.stderr, w.stderr)
	}
	if s := readFile(t, filepath.Join(state, "summary.json")); !strings.Contains(s, ref) {
		t.Fatalf("digest after the cut differs from the one-process-per-logical-worker run %s:\n%s", ref, s)
	}
}

// startIn starts easyscale with args in network namespace ns.
func startIn(t *testing.T, ns string, env []string, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command("ip", append([]string{"netns", "exec", ns, easyscale}, args...)...), stderr: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() { s.cmd.Process.Kill() })
	return s
}
