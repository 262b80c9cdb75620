package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// The lab tests run against the real Slurm lab (internal/slurmlab, started
// by TestMain after `make build`), whose plugstack.conf loads
// bin/easyscale_spank.so; the plugin finds bin/easyscale-gpuctx next to it.
// On the current lab (make test-current) they run in its root, where the
// plugin is bin/slurm-24.11's and its helper is built next to it.
// They run only with EASYSCALE_LAB=1 (make test); without Slurm or root they
// skip, except under CI, where they fail.

func TestMain(m *testing.M) {
	if err := slurmlab.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(slurmlab.Main(m))
}

var (
	labOnce sync.Once
	labWhy  string
)

func requireLab(t *testing.T) {
	t.Helper()
	lab := slurmlab.Require(t)
	labOnce.Do(func() {
		for _, kv := range lab.Env { // the lab's SLURM_CONF and PATH for command()
			if k, v, ok := strings.Cut(kv, "="); ok && (k == "SLURM_CONF" || k == "PATH") {
				os.Setenv(k, v)
			}
		}
		if out, _ := command(t, 10*time.Second, nil, "srun", "--help"); !strings.Contains(out, "--logical-workers") {
			labWhy = "the easyscale SPANK plugin is not in the lab's plugstack.conf (srun --help lacks --logical-workers)"
		}
	})
	if labWhy != "" {
		t.Fatalf("lab: %s", labWhy)
	}
}

// command runs name with args and the environment of the test minus every
// EASYSCALE_* variable, plus env; it returns stdout and stderr together.
func command(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	for _, kv := range os.Environ() {
		// No EASYSCALE_* of the test's own environment reaches the job, so any
		// a task sees was set by the plugin (or passed in env).
		if !strings.HasPrefix(kv, "EASYSCALE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

func assertNoNodeDrained(t *testing.T) {
	t.Helper()
	out, err := command(t, 20*time.Second, nil, "sinfo", "-h", "-N", "-o", "%N %T")
	if err != nil {
		t.Fatalf("sinfo: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "drain") || strings.Contains(line, "down") || strings.Contains(line, "fail") {
			t.Errorf("node not healthy after the test: %s", line)
		}
	}
}

func TestLabBadOptionsAreRefusedAtSubmissionAndNoNodeDrains(t *testing.T) {
	requireLab(t)
	tests := []struct {
		name string
		env  []string
		cmd  []string
		want string
	}{
		{"srun refuses a reversed elastic range", nil, []string{"srun", "--elastic=4-2", "true"},
			"easyscale: option: invalid --elastic=4-2: minimum 4 larger than maximum 2"},
		{"srun refuses zero logical workers", nil, []string{"srun", "--logical-workers=0", "true"},
			"invalid --logical-workers=0"},
		{"sbatch refuses a reversed elastic range", nil, []string{"sbatch", "--elastic=4-2", "--wrap", "true"},
			"invalid --elastic=4-2"},
		{"salloc refuses an unknown determinism level", nil, []string{"salloc", "--determinism=d3", "true"},
			"invalid --determinism=d3"},
		{"srun refuses a bad environment twin and names it", []string{"EASYSCALE_ELASTIC=0"}, []string{"srun", "true"},
			"(from EASYSCALE_ELASTIC)"},
		{"srun refuses more nodes than logical workers", nil,
			[]string{"srun", "--elastic=1-4", "--logical-workers=2", "true"}, "exceeds --logical-workers=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := command(t, 30*time.Second, tc.env, tc.cmd[0], tc.cmd[1:]...)
			if err == nil {
				t.Fatalf("%v succeeded:\n%s", tc.cmd, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("%v output lacks %q:\n%s", tc.cmd, tc.want, out)
			}
			if strings.Contains(out, "Submitted") || strings.Contains(out, "Granted job allocation") {
				t.Errorf("%v reached the controller:\n%s", tc.cmd, out)
			}
		})
	}
	assertNoNodeDrained(t)
}

// taskEnvs runs `env` in every task and returns one map per task, by task id.
func taskEnvs(t *testing.T, env []string, args ...string) map[string]map[string]string {
	t.Helper()
	out, err := command(t, 60*time.Second, env, "srun", append(args, "--label", "env")...)
	if err != nil {
		t.Fatalf("srun %v: %v\n%s", args, err, out)
	}
	tasks := map[string]map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		task, kv, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		task = strings.TrimSpace(task)
		if tasks[task] == nil {
			tasks[task] = map[string]string{}
		}
		tasks[task][k] = v
	}
	return tasks
}

func TestLabTaskEnvironmentCarriesTheGPUContext(t *testing.T) {
	requireLab(t)
	tasks := taskEnvs(t, nil, "-N2", "--gres=gpu:2", "--elastic=1-2", "--logical-workers=4", "--determinism=d2")
	if len(tasks) != 2 {
		t.Fatalf("got %d tasks, want 2", len(tasks))
	}
	for id, env := range tasks {
		for k, want := range map[string]string{
			"EASYSCALE_ELASTIC": "1-2", "EASYSCALE_ELASTIC_MIN": "1", "EASYSCALE_ELASTIC_MAX": "2",
			"EASYSCALE_LOGICAL_WORKERS": "4", "EASYSCALE_DETERMINISM": "d2", "EASYSCALE_TASK_ID": id,
			"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "NVIDIA_TF32_OVERRIDE": "0",
		} {
			if env[k] != want {
				t.Errorf("task %s: %s=%q, want %q", id, k, env[k], want)
			}
		}
		if n := strings.Count(env["CUDA_VISIBLE_DEVICES"], ",") + 1; env["CUDA_VISIBLE_DEVICES"] == "" || n != 2 {
			t.Errorf("task %s: CUDA_VISIBLE_DEVICES=%q, want the two GPUs Slurm gave", id, env["CUDA_VISIBLE_DEVICES"])
		}
		if _, ok := env["EASYSCALE_GPU_COUNT"]; !ok {
			t.Errorf("task %s: no EASYSCALE_GPU_COUNT: the helper easyscale-gpuctx did not run (is it next to the plugin?)", id)
		}
		if env["EASYSCALE_JOB_ID"] == "" || env["EASYSCALE_JOB_ID"] != env["SLURM_JOB_ID"] {
			t.Errorf("task %s: EASYSCALE_JOB_ID=%q, SLURM_JOB_ID=%q", id, env["EASYSCALE_JOB_ID"], env["SLURM_JOB_ID"])
		}
	}
	assertNoNodeDrained(t)
}

func TestLabGPUsPerTaskGivesEachTaskItsOwnDevice(t *testing.T) {
	requireLab(t)
	tasks := taskEnvs(t, nil, "-N1", "-n2", "--gpus-per-task=1", "--elastic=1")
	seen := map[string]bool{}
	for id, env := range tasks {
		cvd := env["CUDA_VISIBLE_DEVICES"]
		if cvd == "" || strings.Contains(cvd, ",") || seen[cvd] {
			t.Errorf("task %s: CUDA_VISIBLE_DEVICES=%q, want one GPU of its own", id, cvd)
		}
		seen[cvd] = true
		if _, ok := env["EASYSCALE_GPU_COUNT"]; !ok {
			t.Errorf("task %s: the helper's variables are missing", id)
		}
	}
	if len(tasks) != 2 {
		t.Errorf("got %d tasks, want 2", len(tasks))
	}
}

func TestLabPluginActsOnlyOnWhatTheUserPassed(t *testing.T) {
	requireLab(t)
	t.Run("a plain step gets no EasyScale context", func(t *testing.T) {
		for id, env := range taskEnvs(t, nil, "-N1") {
			for k := range env {
				if strings.HasPrefix(k, "EASYSCALE_") || strings.HasPrefix(k, "SLURM_SPANK_EASYSCALE_") ||
					strings.Contains(k, "_OPTION_easyscale_") {
					t.Errorf("task %s has %s though no EasyScale option was passed", id, k)
				}
			}
		}
	})
	t.Run("a twin exported at srun time is read in the task context", func(t *testing.T) {
		for id, env := range taskEnvs(t, []string{"EASYSCALE_LOGICAL_WORKERS=3"}, "-N1") {
			if env["EASYSCALE_LOGICAL_WORKERS"] != "3" || env["EASYSCALE_JOB_ID"] == "" {
				t.Errorf("task %s: EASYSCALE_LOGICAL_WORKERS=%q EASYSCALE_JOB_ID=%q", id,
					env["EASYSCALE_LOGICAL_WORKERS"], env["EASYSCALE_JOB_ID"])
			}
		}
	})
	t.Run("the flag wins over its twin", func(t *testing.T) {
		for id, env := range taskEnvs(t, []string{"EASYSCALE_ELASTIC=2"}, "-N1", "--elastic=1-3") {
			if env["EASYSCALE_ELASTIC"] != "1-3" {
				t.Errorf("task %s: EASYSCALE_ELASTIC=%q, want the flag's 1-3", id, env["EASYSCALE_ELASTIC"])
			}
		}
	})
}

func TestLabWrapperSubmitsAndRecordsTheRequest(t *testing.T) {
	requireLab(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "easyscale-sbatch")
	if slurmlab.InRoot() {
		// the current lab's root has no Go: the wrapper make test-current built on the host
		abs, err := filepath.Abs("../../bin/easyscale-sbatch")
		if err != nil {
			t.Fatal(err)
		}
		wrapper = abs
	} else if out, err := exec.Command("go", "build", "-o", wrapper, "../../sbatch-wrap/cmd/easyscale-sbatch").CombinedOutput(); err != nil {
		t.Fatalf("build easyscale-sbatch: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "es.sbatch")
	outFile := filepath.Join(dir, "out.txt")
	body := "#!/bin/bash\n#SBATCH --job-name=\"es wrap test\"\n#SBATCH --elastic=1-4\n#SBATCH --logical-workers=8\n" +
		"#SBATCH --output=" + outFile + "\nsleep 1\nsrun env | grep '^EASYSCALE_' | sort\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := command(t, 30*time.Second, nil, wrapper, "--parsable", script)
	if err != nil {
		t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	comment, _ := command(t, 10*time.Second, nil, "squeue", "-h", "-j", id, "-o", "%k|%D")
	if !strings.HasPrefix(comment, "es-req min=1 max=4 lw=8 d1|1") {
		t.Errorf("squeue comment|nodes = %q, want the request at 1 node", comment)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		state, _ := command(t, 10*time.Second, nil, "squeue", "-h", "-j", id, "-o", "%T")
		if strings.TrimSpace(state) == "" { // gone from the queue: ended
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after 60 s", id, strings.TrimSpace(state))
		}
	}
	got, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatalf("job output: %v", err)
	}
	for _, w := range []string{"EASYSCALE_ELASTIC=1-4", "EASYSCALE_LOGICAL_WORKERS=8", "EASYSCALE_JOB_ID=" + id} {
		if !strings.Contains(string(got), w+"\n") {
			t.Errorf("job output lacks %q:\n%s", w, got)
		}
	}
	assertNoNodeDrained(t)
}
