package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

// The torch engine end to end: `easyscale run` of the PyTorch examples,
// every physical worker a real Python process (Debian's torch), gradients
// over gloo, state in a real SQLite file.

// requireTorch skips without a Python that has torch, except under CI
// (make test installs python3-torch), where it fails.
func requireTorch(t *testing.T) {
	t.Helper()
	if _, _, err := torchengine.Python(t.Context()); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
}

func torchMNIST() string  { return filepath.Join("..", "..", "examples", "torch-mnist", "job.toml") }
func torchCharLM() string { return filepath.Join("..", "..", "examples", "torch-charlm", "job.toml") }

// toyJob writes a job file for the toy module (TOYJOB_SLOW in the
// environment slows it down without changing the job).
func toyJob(t *testing.T) string {
	t.Helper()
	module, err := filepath.Abs(filepath.Join("..", "..", "runtime", "torchengine", "python", "tests", "toyjob.py"))
	if err != nil {
		t.Fatal(err)
	}
	text := "name = \"torch-toy\"\nengine = \"torch\"\nlogical_workers = 4\nmicro_batch = 3\nsteps = 10\nseed = 7\ncheckpoint_every = 4\n" +
		"[torch]\nmodule = " + strconv.Quote(module) + "\n"
	return writeFile(t, "job.toml", text)
}

func TestTorchDigestsDoNotDependOnTheAllocation(t *testing.T) {
	requireTorch(t)
	for _, c := range []struct {
		name, config, steps string
		schedules           []string
	}{
		{"MNIST LeNet", torchMNIST(), "10", []string{"1", "0:1,3:3,6:2", "0:2,5:4", "0:3", "0:3@3/2/1"}},
		{"character LM", torchCharLM(), "6", []string{"1", "0:1,2:3,4:2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The reference: one process per logical worker.
			ref := mustRun(t, "run", "--config", c.config, "--steps", c.steps, "--no-eval")
			if ref.summary["engine"] != "torch" || digest(ref) == "" {
				t.Fatalf("reference summary %v: want engine torch and a digest", ref.summary)
			}
			for _, w := range c.schedules {
				if got := digest(mustRun(t, "run", "--config", c.config, "--steps", c.steps, "--no-eval", "--workers", w)); got != digest(ref) {
					t.Errorf("--workers %s: digest %s, one process per logical worker %s", w, got, digest(ref))
				}
			}
			other := mustRun(t, "run", "--config", c.config, "--steps", c.steps, "--no-eval", "--workers", "2", "--seed", "99")
			if digest(other) == digest(ref) {
				t.Errorf("--seed 99 gave the same digest: the seed does not reach the model")
			}
		})
	}
}

func TestTorchMNISTReachesItsAccuracy(t *testing.T) {
	requireTorch(t)
	if testing.Short() {
		t.Skip("a full epoch")
	}
	r := mustRun(t, "run", "--config", torchMNIST(), "--workers", "0:2,100:3")
	if acc, _ := r.summary["test_accuracy"].(float64); acc < 0.97 {
		t.Fatalf("test accuracy after one epoch %v, want at least 0.97", r.summary["test_accuracy"])
	}
}

func TestTorchSIGKILLedProcessIsSurvived(t *testing.T) {
	requireTorch(t)
	// Without --no-eval: the toy module has no test set, and that is no failure (issue 18 item 4).
	fixed := mustRun(t, "run", "--config", toyJob(t), "--workers", "2")
	if _, ok := fixed.summary["test_accuracy"]; ok || !strings.Contains(fixed.stderr, "no final evaluation: the job has no test set") {
		t.Fatalf("a job without a test set: summary %v, want no test figures and the reason logged:\n%s", fixed.summary, fixed.stderr)
	}
	ref := digest(fixed)
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	step, rank := 1+r.IntN(8), r.IntN(3)
	t.Logf("seed %d: SIGKILL of process %d at step %d", seed, rank, step)
	got := mustRun(t, "run", "--config", toyJob(t), "--no-eval", "--workers", "3", "--kill-at", strconv.Itoa(step)+":"+strconv.Itoa(rank))
	if digest(got) != ref {
		t.Fatalf("after SIGKILL of process %d at step %d: digest %s, fixed run %s", rank, step, digest(got), ref)
	}
	if redone, _ := got.summary["redone_steps"].(float64); redone < 1 {
		t.Fatalf("summary %v: no step was redone, so the kill did not land", got.summary)
	}
}

func TestTorchCoordinatorSIGKILLThenRerunResumes(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval", "--workers", "2"))
	state := t.TempDir()
	// No self-check: its steps would count among TOYJOB_SLOW's forwards.
	args := []string{"run", "--config", job, "--no-eval", "--state", state, "--workers", "2", "--no-self-check"}
	cmd := exec.Command(easyscale, append(args, "--quiet")...)
	cmd.Env = append(os.Environ(), "TOYJOB_SLOW=10:1") // from step 5 on a step takes 2 s: the kill lands mid-run
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitStep(t, state, 5, 90*time.Second)
	cmd.Process.Kill()
	if err := cmd.Wait(); err == nil {
		t.Fatal("the run finished before the SIGKILL")
	}
	at := lastStep(state)
	got := mustRun(t, args...)
	if digest(got) != ref {
		t.Fatalf("after SIGKILL of the coordinator at step %d: digest %s, fixed run %s", at, digest(got), ref)
	}
	if rf, _ := got.summary["resumed_from"].(float64); rf < 4 {
		t.Fatalf("the rerun resumed from %v, want the step-4 checkpoint or later", got.summary["resumed_from"])
	}
}

func TestTorchSIGTERMCheckpointsAndExitsAtOnce(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval", "--workers", "2"))
	state := t.TempDir()
	// Each of the 2 processes runs 2 forwards a step: from step 3 on every
	// forward sleeps 10 s, so a step takes 20 s.
	s := start(t, []string{"TOYJOB_SLOW=6:10"}, "run", "--config", job, "--no-eval", "--quiet", "--state", state, "--workers", "2",
		"--no-self-check") // its steps would count among TOYJOB_SLOW's forwards
	s.waitLine(t, state, "toyjob: slow forward", 90*time.Second)
	t0 := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("no exit within 5 s of SIGTERM:\n%s", s.stderr)
	}
	took := time.Since(t0)
	if code := s.cmd.ProcessState.ExitCode(); code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143:\n%s", code, s.stderr)
	}
	t.Logf("SIGTERM to exit: %s", took)
	if took > 2*time.Second {
		t.Errorf("SIGTERM to exit took %s, want within 2 s", took)
	}
	if at := lastStep(state); at != 3 {
		t.Fatalf("the ledger ends at step %d, want 3 (the last completed step)", at)
	}
	got := mustRun(t, "run", "--config", job, "--no-eval", "--state", state, "--workers", "0:1,6:3")
	if digest(got) != ref {
		t.Fatalf("resumed after SIGTERM: digest %s, uninterrupted %s", digest(got), ref)
	}
	if rf, _ := got.summary["resumed_from"].(float64); rf != 3 {
		t.Fatalf("resumed from %v, want the SIGTERM checkpoint of step 3", got.summary["resumed_from"])
	}
}

func TestTorchBadModulesAreRefusedNamingTheCause(t *testing.T) {
	requireTorch(t)
	bad := func(body string) string {
		dir := t.TempDir()
		module := filepath.Join(dir, "m.py")
		if err := os.WriteFile(module, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		job := "engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 2\nsteps = 3\n[torch]\nmodule = \"m.py\"\n"
		if err := os.WriteFile(filepath.Join(dir, "job.toml"), []byte(job), 0o644); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, "job.toml")
	}
	toy := "import torch, easyscale\nfrom torch import nn\n" +
		"class D(torch.utils.data.Dataset):\n    def __len__(self): return 16\n    def __getitem__(self, i): return torch.ones(3) * i, i % 2\n" +
		"def setup(config):\n    torch.manual_seed(0)\n    m = nn.Linear(3, 2)\n    LOSS\n    return easyscale.Job(model=m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1), train_set=D(), loss=loss)\n"
	for _, c := range []struct{ name, config, want string }{
		{"a missing module", writeFile(t, "job.toml", "engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 2\nsteps = 3\n[torch]\nmodule = \"nope.py\"\n"), "torch.module"},
		{"a module that raises", bad("raise RuntimeError('boom at import')\n"), "boom at import"},
		{"a module without setup", bad("x = 1\n"), "defines no setup"},
		{"setup that raises", bad("def setup(config):\n    raise ValueError('no data here')\n"), "no data here"},
		{"a NaN loss", bad(strings.Replace(toy, "LOSS", "loss = lambda out, y: out.sum() * float('nan')", 1)), "loss is nan"},
		{"manual_seed in the loop", bad(strings.Replace(toy, "LOSS", "def loss(out, y):\n        torch.manual_seed(1)\n        return nn.functional.cross_entropy(out, y)", 1)), "manual_seed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			r := easy(t, "run", "--config", c.config, "--no-eval", "--workers", "2", "--state", state)
			if r.code == 0 || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, want a failure naming %q:\n%s", r.code, c.want, r.stderr)
			}
			if lastStep(state) > 0 {
				t.Fatalf("the ledger has steps after a refused module")
			}
		})
	}
	if n := pythonWorkers(t); n != 0 {
		t.Errorf("%d python worker processes left running", n)
	}
}

// pythonWorkers counts this machine's orphaned easyscale Python worker
// processes (their parent gone: PID 1's children) that run in this test's
// root: those of the current lab's suites, which make test-all runs beside
// make test's in the Debian 13 root (.ci/test-all.sh), are not this test's.
func pythonWorkers(t *testing.T) int {
	t.Helper()
	self, err := os.Readlink("/proc/self/root")
	if err != nil {
		t.Fatalf("reading this process's root: %v", err)
	}
	out, _ := exec.Command("pgrep", "-f", "-u", strconv.Itoa(os.Getuid()), "-P", "1", "easyscale.worker").Output()
	n := 0
	for _, pid := range strings.Fields(string(out)) {
		if root, err := os.Readlink("/proc/" + pid + "/root"); err == nil && root == self {
			n++
		}
	}
	return n
}

// TestTorchResumeWithOtherNumericsIsRefused: a job resumed by processes
// that compute other bits than those that wrote its checkpoint (here the
// CPU ISA dispatch of ATen or oneDNN; on a cluster another CPU or GPU
// model or torch release) is refused, naming what differs and
// the fix, and the checkpoint is left as it was: resumed with the numerics
// it was written with, the job ends with the fixed run's digest. Before
// the check it resumed silently and ended with other bits.
func TestTorchResumeWithOtherNumericsIsRefused(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval"))
	state := t.TempDir()
	args := []string{"run", "--config", job, "--no-eval", "--state", state}
	mustRun(t, append(args, "--steps", "4")...) // checkpoint_every = 4
	// ATen's dispatch, and oneDNN's under its older name (a tester's: it
	// changes a convolution's bits here, and neither cpu_capability nor
	// the canary showed it).
	for _, env := range []string{"ATEN_CPU_CAPABILITY=default", "DNNL_MAX_CPU_ISA=AVX2"} {
		cmd := exec.Command(easyscale, append(args, "--quiet")...)
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("resumed with %s: the run succeeded, want it refused\n%s", env, out)
		}
		name, value, _ := strings.Cut(env, "=")
		for _, want := range []string{"checkpoint of step 4", "env." + name, "this run " + value, "new --state directory"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: the refusal does not say %q:\n%s", env, want, out)
			}
		}
	}
	if got := mustRun(t, args...); digest(got) != ref {
		t.Fatalf("resumed with the checkpoint's numerics: digest %s, fixed run %s", digest(got), ref)
	} else if rf, _ := got.summary["resumed_from"].(float64); rf != 4 {
		t.Fatalf("resumed_from %v, want 4", got.summary["resumed_from"])
	}
}

// TestTorchStartsOverWhereItsCheckpointHasOtherNumerics: with
// --on-other-numerics=start-over a job resumed where ATen dispatches to
// other kernels (ATEN_CPU_CAPABILITY=default: a node with another CPU ISA)
// starts over from step 0 and ends with the fixed run's digest in that
// environment, every ledger step equal to it; the superseded state stays a
// state directory whose steps are the old environment's fixed run's.
func TestTorchStartsOverWhereItsCheckpointHasOtherNumerics(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	fixedOld, fixedNew, state := t.TempDir(), t.TempDir(), t.TempDir()
	refOld := digest(mustRun(t, "run", "--config", job, "--no-eval", "--state", fixedOld))
	args := []string{"run", "--config", job, "--no-eval", "--state", state}
	mustRun(t, append(args, "--steps", "4")...) // checkpoint_every = 4
	t.Setenv("ATEN_CPU_CAPABILITY", "default")
	refNew := digest(mustRun(t, "run", "--config", job, "--no-eval", "--state", fixedNew))
	if refNew == refOld {
		t.Fatalf("ATEN_CPU_CAPABILITY=default gives the same digest %s: the test cannot tell a start-over from a resume", refNew)
	}
	got := mustRun(t, append(args, "--on-other-numerics", "start-over")...)
	if digest(got) != refNew {
		t.Fatalf("started over: digest %s, fixed run in this environment %s (the old one's %s)", digest(got), refNew, refOld)
	}
	so, _ := got.summary["started_over"].(map[string]any)
	if so == nil || so["from_step"] != float64(4) || got.summary["resumed_from"] != float64(0) ||
		!strings.Contains(fmt.Sprint(so["reason"]), "ATEN_CPU_CAPABILITY") {
		t.Fatalf("summary: started_over %v, resumed_from %v; want from step 4 naming ATEN_CPU_CAPABILITY, resumed from 0",
			so, got.summary["resumed_from"])
	}
	superseded, _ := so["superseded"].(string)
	if filepath.Dir(superseded) != filepath.Join(state, "superseded") {
		t.Fatalf("superseded state in %q, want under %s", superseded, filepath.Join(state, "superseded"))
	}
	if r := easy(t, "verify", state, fixedNew); r.code != 0 {
		t.Fatalf("the new run's ledger against the fixed run here: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := easy(t, "verify", superseded, fixedOld); r.code != 0 {
		t.Fatalf("the superseded ledger against the old environment's fixed run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := easy(t, "verify", state, fixedOld); r.code != 1 {
		t.Fatalf("the new run's ledger against the old environment's fixed run: exit %d, want 1 (they differ)\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestTorchLedgerWithoutACheckpointIsCheckedForOtherNumerics: a job
// killed before its first checkpoint leaves ledger rows a rerun would
// recompute and compare. Rerun with other numerics (ATEN_CPU_CAPABILITY=
// default), it is refused naming them (a tester's: it failed on step 1 as
// a divergence, and --on-other-numerics=start-over never applied), and
// with start-over it starts over and ends with the fixed run's digest in
// that environment.
func TestTorchLedgerWithoutACheckpointIsCheckedForOtherNumerics(t *testing.T) {
	requireTorch(t)
	job := toyJob(t)
	state := t.TempDir()
	// No self-check: its forwards would count among TOYJOB_SLOW's.
	args := []string{"run", "--config", job, "--no-eval", "--state", state, "--no-self-check"}
	cmd := exec.Command(easyscale, append(args, "--quiet")...)
	cmd.Env = append(os.Environ(), "TOYJOB_SLOW=4:1") // one process, 4 forwards a step: from step 2 on a step takes 4 s
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitStep(t, state, 1, 90*time.Second)
	cmd.Process.Kill()
	if err := cmd.Wait(); err == nil {
		t.Fatal("the run finished before the SIGKILL")
	}
	at := lastStep(state)
	if at < 1 || at >= 4 {
		t.Fatalf("killed with the ledger at step %d; want it before the first checkpoint (step 4)", at)
	}
	// A copy without the numerics record (an older state directory): the
	// rerun with other numerics fails on the first recomputed step, and
	// leaves no record of its own (a tester's: it wrote one, and the rerun
	// where the ledger was computed was refused).
	bare := t.TempDir()
	if err := os.CopyFS(bare, os.DirFS(state)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(bare, "numerics.json")); err != nil {
		t.Fatal(err)
	}
	bareArgs := []string{"run", "--config", job, "--no-eval", "--state", bare, "--no-self-check"}
	refOld := digest(mustRun(t, "run", "--config", job, "--no-eval"))
	t.Setenv("ATEN_CPU_CAPABILITY", "default")
	if r := easy(t, bareArgs...); r.code == 0 || !strings.Contains(r.stderr, "differs from the recorded run") {
		t.Fatalf("rerun of a state without a numerics record, with other numerics: exit %d, want the divergence\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(bare, "numerics.json")); err == nil {
		t.Fatal("the failed rerun recorded its numerics beside a ledger it did not compute")
	}
	refused := easy(t, args...)
	if refused.code == 0 || !strings.Contains(refused.stderr, fmt.Sprintf("the ledger's steps up to %d were computed", at)) ||
		!strings.Contains(refused.stderr, "env.ATEN_CPU_CAPABILITY") || !strings.Contains(refused.stderr, "--on-other-numerics=start-over") {
		t.Fatalf("rerun with other numerics: exit %d, want a refusal naming the ledger, ATEN_CPU_CAPABILITY and the fix:\n%s", refused.code, refused.stderr)
	}
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval"))
	got := mustRun(t, append(args, "--on-other-numerics", "start-over")...)
	if digest(got) != ref {
		t.Fatalf("started over: digest %s, fixed run in this environment %s", digest(got), ref)
	}
	if so, _ := got.summary["started_over"].(map[string]any); so == nil || so["from_step"] != float64(at) {
		t.Fatalf("summary's started_over %v, want from step %d", got.summary["started_over"], at)
	}
	os.Unsetenv("ATEN_CPU_CAPABILITY") // where the copy's ledger was computed: it resumes
	if r := mustRun(t, bareArgs...); digest(r) != refOld {
		t.Fatalf("the copy rerun where its ledger was computed: digest %s, fixed run %s", digest(r), refOld)
	}
}
