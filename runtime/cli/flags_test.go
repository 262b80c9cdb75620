package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesFlagValuesThatWouldMeanSomethingElse: values that used to
// be taken silently as the default, or that could never take effect, are
// refused with exit 2 and a message naming the flag and the fix.
func TestRunRefusesFlagValuesThatWouldMeanSomethingElse(t *testing.T) {
	job := filepath.Join("..", "..", "tests", "e2e", "testdata", "mnist-small.toml")
	base := []string{"run", "--config", job, "--steps", "2", "--no-eval", "--quiet"}
	worker := []string{"worker", "--join", "127.0.0.1:1", "--token-file", filepath.Join(t.TempDir(), "token")}
	cases := []struct {
		name string
		args []string
		env  string // EASYSCALE_FAULT_SLOW_STEP
		want []string
	}{
		{"an empty --workers is not the default", append(base, "--workers", ""), "", []string{"--workers is empty", "leave the flag out"}},
		{"a blank --workers is not the default", append(base, "--workers", " "), "", []string{"--workers is empty"}},
		{"a negative --threads", append(base, "--threads", "-4"), "", []string{"--threads -4", "positive number of cores"}},
		{"a zero --threads", append(base, "--threads", "0"), "", []string{"--threads 0", "leave the flag out"}},
		{"a negative --steps", append(base[:len(base):len(base)], "--steps", "-3"), "", []string{"--steps -3", "must not be negative"}},
		{"a --kill-at rank the schedule does not have", append(base, "--procs", "--workers", "2", "--kill-at", "1:99"), "",
			[]string{"--kill-at 1:99", "rank 99 does not exist at step 1", "2 workers", "pick a rank below 2"}},
		{"a --term-at rank gone after a shrink", append(base[:3:3], "--steps", "5", "--no-eval", "--procs", "--workers", "0:4,2:2", "--term-at", "3:2"), "",
			[]string{"--term-at 3:2", "rank 2 does not exist at step 3", "pick a rank below 2"}},
		{"a --kill-at step past --steps", append(base, "--procs", "--workers", "2", "--kill-at", "500:0"), "",
			[]string{"--kill-at 500:0", "step 500 never runs", "pick a step below 2"}},
		{"a --kill-at rank of the default schedule", append(base, "--procs", "--kill-at", "0:8"), "",
			[]string{"--kill-at 0:8", "8 workers", "pick a rank below 8"}},
		{"a --term-at without worker processes", append(base, "--term-at", "0:0"), "", []string{"--kill-at and --term-at need worker processes", "--procs"}},
		{"an empty --kill-at injects nothing", append(base, "--procs", "--kill-at", ""), "", []string{"--kill-at is empty", "leave the flag out"}},
		{"an empty --term-at injects nothing", append(base, "--procs", "--term-at="), "", []string{"--term-at is empty", "leave the flag out"}},
		{"a malformed --term-at", append(base, "--procs", "--term-at", "1"), "", []string{"--term-at \"1\"", "STEP:RANK"}},
		{"an unknown --on-other-numerics", append(base, "--on-other-numerics", "restart"), "",
			[]string{`--on-other-numerics "restart"`, "want refuse", "or start-over"}},
		{"a malformed slow-step fault", base, "soon", []string{"EASYSCALE_FAULT_SLOW_STEP", "STEP:DURATION"}},
		{"a negative --threads of a worker", append(worker, "--threads", "-4"), "", []string{"--threads -4", "positive number of cores"}},
		{"a negative --leave-grace", append(worker, "--leave-grace", "-1s"), "", []string{"--leave-grace -1s", "between 0s and 1h"}},
		{"a malformed --cpus", append(worker, "--cpus", "0-x"), "", []string{"--cpus", `"0-x"`, "want a CPU number"}},
		{"a --cpus range backwards", append(worker, "--cpus", "3-1"), "", []string{"--cpus", "ends below its start"}},
		{"a --cpus this machine lacks", append(worker, "--cpus", "1000"), "", []string{"--cpus", "binding to CPUs 1000", "among the CPUs this job may use"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("EASYSCALE_FAULT_SLOW_STEP", c.env)
			code, _, stderr := run(c.args...)
			if code != 2 {
				t.Fatalf("%v: exit %d, want 2; stderr:\n%s", c.args, code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Fatalf("%v: stderr %q does not say %q", c.args, stderr, w)
				}
			}
		})
	}
}

// TestRunNamesTheEnvironmentTwinOfABadOnOtherNumerics: a bad value from
// EASYSCALE_ON_OTHER_NUMERICS is named as coming from there.
func TestRunNamesTheEnvironmentTwinOfABadOnOtherNumerics(t *testing.T) {
	t.Setenv("EASYSCALE_ON_OTHER_NUMERICS", "start_over")
	job := filepath.Join("..", "..", "tests", "e2e", "testdata", "mnist-small.toml")
	code, _, stderr := run("run", "--config", job, "--steps", "1", "--no-eval", "--quiet")
	if code != 2 || !strings.Contains(stderr, `EASYSCALE_ON_OTHER_NUMERICS "start_over"`) || !strings.Contains(stderr, "start-over") {
		t.Fatalf("exit %d, stderr %q: want 2 naming EASYSCALE_ON_OTHER_NUMERICS and the values it takes", code, stderr)
	}
}
