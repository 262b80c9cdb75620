package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBadInputIsRefusedClearlyAndLosesNothing runs every kind of bad input
// against a state directory holding a finished run: each is refused with a
// message naming what to fix, and the ledger is unchanged afterwards.
func TestBadInputIsRefusedClearlyAndLosesNothing(t *testing.T) {
	state := t.TempDir()
	mustRun(t, "run", "--config", config(), "--steps", "4", "--no-eval", "--state", state)
	before := lastStep(state)
	good, err := os.ReadFile(config())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"malformed TOML", []string{"--config", writeFile(t, "bad.toml", "task = [")}, 2, "parsing TOML"},
		{"an unknown key", []string{"--config", writeFile(t, "u.toml", string(good)+"\nbatch_size = 3\n")}, 2, "lr_schedule.batch_size"},
		{"a missing job file", []string{"--config", "testdata/nope.toml"}, 2, "nope.toml"},
		{"zero physical workers", []string{"--config", config(), "--workers", "0:2,3:0"}, 2, "at least 1"},
		{"more physical than logical workers", []string{"--config", config(), "--workers", "9"}, 2, "exceed the job's 8 logical workers"},
		{"missing MNIST files", []string{"--config", writeFile(t, "d.toml", strings.Replace(string(good), "[data]", "[data]\ndir = \"/nonexistent/mnist\"", 1))}, 1, "/nonexistent/mnist"},
		{"a state directory of another job", []string{"--config", writeFile(t, "s.toml", strings.Replace(string(good), "seed = 7", "seed = 8", 1))}, 1, "fields that differ: seed"},
		{"a summary path in a missing directory", []string{"--config", config(), "--summary", "/nonexistent/dir/s.json"}, 2, "--summary /nonexistent/dir/s.json"},
		{"a non-numeric --steps", []string{"--config", config(), "--steps", "many"}, 2, "--steps"},
		// a new user's (helper 107): checked once the horizon is known, after
		// "starting", and still bad usage
		{"a warmup beyond the training horizon", []string{"--config", writeFile(t, "w.toml", strings.Replace(string(good), "warmup_steps = 5", "warmup_steps = 500", 1))}, 2, "lr_schedule.warmup_steps: 500 exceeds the training horizon of 200 steps"},
		{"a micro-batch larger than a logical worker's shard", []string{"--config", writeFile(t, "m.toml", strings.Replace(string(good), "micro_batch = 8\n", "micro_batch = 60000\n", 1))}, 2, "micro_batch: 60000 is larger than a logical worker's shard"},
		{"an epochs count that overflows", []string{"--config", writeFile(t, "e.toml", strings.Replace(string(good), "steps = 200", "epochs = 9223372036854775807", 1))}, 2, "epochs:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--steps", "6", "--no-eval", "--state", state}, c.args...)
			r := easy(t, args...)
			if r.code != c.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, c.wantCode, r.stderr)
			}
			if !contains(r.stderr, c.want) {
				t.Fatalf("stderr does not mention %q:\n%s", c.want, r.stderr)
			}
			if got := lastStep(state); got != before {
				t.Fatalf("the ledger moved from step %d to %d", before, got)
			}
		})
	}
}

// TestVerifyTellsDifferentJobsApart compares two seeds' ledgers: they are
// different jobs, and verify says so and names the field.
func TestVerifyTellsDifferentJobsApart(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	mustRun(t, "run", "--config", config(), "--steps", "3", "--no-eval", "--state", a)
	mustRun(t, "run", "--config", config(), "--steps", "3", "--no-eval", "--state", b, "--seed", "99")
	r := easy(t, "verify", a, b)
	if r.code != 1 || !contains(r.stdout, "DIFFERENT JOBS") || !contains(r.stdout, "fields that differ: seed") {
		t.Fatalf("verify exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	same := easy(t, "verify", a, a)
	if same.code != 0 || !contains(same.stdout, "3 common steps agree") {
		t.Fatalf("verify of a directory with itself: exit %d\n%s%s", same.code, same.stdout, same.stderr)
	}
}
