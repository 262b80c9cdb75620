package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// toyLoopJob writes a job file for the loop API's toy script
// (runtime/torchengine/python/tests/toyloop.py) with extra arguments.
func toyLoopJob(t *testing.T, name string, args ...string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "runtime", "torchengine", "python", "tests", "toyloop.py"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := []string{`"--epochs"`, `"2"`}
	for _, a := range args {
		quoted = append(quoted, strconv.Quote(a))
	}
	return writeFile(t, name, "name = \"toy-loop\"\nengine = \"torch\"\nlogical_workers = 4\nmicro_batch = 3\nsteps = 8\nseed = 7\n"+
		"checkpoint_every = 3\n[torch]\nscript = "+strconv.Quote(script)+"\nargs = ["+strings.Join(quoted, ", ")+"]\n")
}

func TestTorchSelfCheckRefusesPlacementDependentJobsAndPassesConsistentOnes(t *testing.T) {
	requireTorch(t)
	good, owned := toyLoopJob(t, "good.toml"), toyLoopJob(t, "owned.toml", "--case", "owned-generator")
	if r := easy(t, "check", good); r.code != 0 || !strings.Contains(r.stdout, "PASSED") {
		t.Fatalf("easyscale check of a consistent script: exit %d, want 0 and PASSED:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := easy(t, "check", toyJob(t)); r.code != 0 {
		t.Fatalf("easyscale check of a setup() -> Job module: exit %d, want 0:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := easy(t, "check", owned)
	if r.code != 1 || !strings.Contains(r.stderr, "model.gen is a torch.Generator of its own") {
		t.Fatalf("easyscale check of a model owning its dropout generator: exit %d, want 1 naming model.gen:\n%s", r.code, r.stderr)
	}
	state := t.TempDir()
	r = easy(t, "run", "--config", owned, "--workers", "2", "--state", state)
	if r.code == 0 || !strings.Contains(r.stderr, "self-check failed") || !strings.Contains(r.stderr, "model.gen") {
		t.Fatalf("run of a model owning its dropout generator: exit %d, want a refusal naming model.gen:\n%s", r.code, r.stderr)
	}
	if lastStep(state) > 0 {
		t.Fatal("the refused job recorded steps")
	}
	checked := mustRun(t, "run", "--config", good, "--workers", "0:1,3:3")
	if checked.summary["self_check"] != "passed" || checked.summary["self_check_s"] == nil {
		t.Fatalf("summary %v: want self_check passed and its seconds", checked.summary)
	}
	skipped := mustRun(t, "run", "--config", owned, "--workers", "2", "--no-self-check")
	if skipped.summary["self_check"] != "skipped (--no-self-check)" {
		t.Fatalf("summary %v: want self_check skipped (--no-self-check)", skipped.summary)
	}
	unchecked := mustRun(t, "run", "--config", good, "--workers", "2", "--no-self-check")
	if digest(unchecked) != digest(checked) {
		t.Errorf("the self-check changed the run: digest %s, unchecked %s", digest(checked), digest(unchecked))
	}
}

func TestTorchVerifyNamesTheDivergentTensors(t *testing.T) {
	requireTorch(t)
	job := toyLoopJob(t, "job.toml")
	a, b := t.TempDir(), t.TempDir()
	mustRun(t, "run", "--config", job, "--workers", "2", "--state", a, "--no-self-check")
	r := start(t, []string{"TOYLOOP_INIT_SEED=8"}, "run", "--config", job, "--workers", "2", "--state", b, "--no-self-check", "--quiet")
	if err := <-r.done; err != nil {
		t.Fatalf("the second run: %v\n%s", err, r.stderr)
	}
	v := easy(t, "verify", a, b)
	if v.code != 1 || !strings.Contains(v.stdout, "DIVERGED at step 1") || !strings.Contains(v.stdout, "tensors: conv.weight, conv.bias") {
		t.Fatalf("verify of runs from other initial weights: exit %d, stdout %q: want the first step and its tensors named", v.code, v.stdout)
	}
}
