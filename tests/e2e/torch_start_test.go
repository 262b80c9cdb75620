package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

// gatedPython writes an interpreter for EASYSCALE_PYTHON that runs py,
// except that a worker process (py -m easyscale.worker) first leaves a
// file started.PID in dir and waits until dir/open exists: until then no
// worker has imported torch, let alone loaded the job.
func gatedPython(t *testing.T, dir, py string) string {
	t.Helper()
	script := "#!/bin/sh\ncase \"$*\" in\n*easyscale.worker*)\n" +
		"  : > " + strconv.Quote(dir) + "/started.$$\n" +
		"  while [ ! -e " + strconv.Quote(dir) + "/open ]; do sleep 0.02; done;;\nesac\n" +
		"exec " + strconv.Quote(py) + " \"$@\"\n"
	path := filepath.Join(dir, "python3")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// startedWorkers counts the worker processes gatedPython let start.
func startedWorkers(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "started.*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestTorchRunStartsItsPythonProcessesTogether: `easyscale run --workers 4`
// starts the first allocation's 4 Python processes before it waits for any
// of them to load the job (issue 18 item 5): they all exist while none has
// been let through to import torch. A run that started the first process
// and waited for its load before starting the others would leave one here.
// Let through, the run trains to the digest of an ungated run.
func TestTorchRunStartsItsPythonProcessesTogether(t *testing.T) {
	requireTorch(t)
	py, _, err := torchengine.Python(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	job := toyJob(t)
	ref := digest(mustRun(t, "run", "--config", job, "--no-eval", "--workers", "4", "--steps", "3"))
	dir := t.TempDir()
	sum := filepath.Join(dir, "summary.json")
	// The gate counts interpreters started for workers: the fork server (on by
	// default) forks them from one interpreter instead, through the same launch
	// code (runtime/torchengine's TestResizeStartsEveryMissingProcessBeforeWaitingForAny
	// covers that path).
	s := start(t, []string{torchengine.PythonEnv + "=" + gatedPython(t, dir, py), torchengine.ForkServerEnv + "=0"},
		"run", "--config", job, "--no-eval", "--workers", "4", "--steps", "3", "--quiet", "--summary", sum)
	deadline := time.After(60 * time.Second)
	for startedWorkers(t, dir) < 4 {
		select {
		case err := <-s.done:
			t.Fatalf("the run ended (%v) with %d of 4 workers started:\n%s", err, startedWorkers(t, dir), s.stderr)
		case <-deadline:
			t.Fatalf("%d of 4 Python processes started within 60 s while none may load: they start one after another",
				startedWorkers(t, dir))
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("the gated run: %v\n%s", err, s.stderr)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the gated run did not end within 3 min:\n%s", s.stderr)
	}
	if n := startedWorkers(t, dir); n != 4 {
		t.Errorf("%d Python worker processes started for --workers 4, want 4 (one each)", n)
	}
	var got struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(readFile(t, sum)), &got); err != nil || got.Digest != ref {
		t.Fatalf("the gated run's summary (%v): digest %q, an ungated run's %s", err, got.Digest, ref)
	}
}
