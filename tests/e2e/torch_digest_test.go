package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
)

// bigToyJob writes a job file for the toy module with a frozen parameter of
// 4,000,000 float32 (16 MB, about 10 ms of sha256 here) in a step of a few
// milliseconds: hashing every step would cost more than the step itself.
// every is [torch] digest_every_steps (0: measured).
func bigToyJob(t *testing.T, every int) string {
	t.Helper()
	module, err := filepath.Abs(filepath.Join("..", "..", "runtime", "torchengine", "python", "tests", "toyjob.py"))
	if err != nil {
		t.Fatal(err)
	}
	text := "name = \"torch-toy-big\"\nengine = \"torch\"\nlogical_workers = 4\nmicro_batch = 3\nsteps = 16\nseed = 7\ncheckpoint_every = 8\n" +
		"[torch]\nmodule = " + strconv.Quote(module) + fmt.Sprintf("\ndigest_every_steps = %d\n", every) +
		"[torch.params]\nfrozen_floats = 4000000\n"
	return writeFile(t, fmt.Sprintf("job-%d.toml", every), text)
}

// TestTorchExpensiveHashingIsTakenEveryKSteps: where hashing costs more
// than 1 % of a step the torch engine measures it and hashes every K > 1
// steps (the final and checkpoint steps always); the final digest and
// every hashed step's digest equal the run hashed every step; verify of
// runs with different intervals compares the steps hashed in both; a
// deleted unhashed row is still named.
func TestTorchExpensiveHashingIsTakenEveryKSteps(t *testing.T) {
	requireTorch(t)
	measuredState, everyState, fourState := t.TempDir(), t.TempDir(), t.TempDir()
	measured := mustRun(t, "run", "--config", bigToyJob(t, 0), "--workers", "2", "--no-eval", "--state", measuredState)
	every := mustRun(t, "run", "--config", bigToyJob(t, 1), "--workers", "0:1,5:3", "--no-eval", "--state", everyState)
	four := mustRun(t, "run", "--config", bigToyJob(t, 4), "--workers", "3", "--no-eval", "--state", fourState)

	k, _ := measured.summary["digest_every_steps"].(float64)
	cost, _ := measured.summary["digest_cost_pct"].(float64)
	if k < 2 || cost <= 1 {
		t.Fatalf("16 MB hashed in a step of milliseconds: digest_every_steps %v, digest_cost_pct %v; want K > 1 and a cost above 1 %%\n%v", k, cost, measured.summary)
	}
	if got := every.summary["digest_every_steps"]; got != 1.0 {
		t.Fatalf("digest_every_steps = 1 in the job file: summary says %v", got)
	}
	for name, r := range map[string]result{"measured": measured, "every 4": four} {
		if digest(r) != digest(every) {
			t.Errorf("%s: final digest %s, hashed every step %s", name, digest(r), digest(every))
		}
	}
	ref := map[int64]string{}
	for _, e := range ledger(t, everyState) {
		if e.Unhashed {
			t.Fatalf("step %d unhashed with digest_every_steps = 1", e.Step)
		}
		ref[e.Step] = e.Digest
	}
	hashed := 0
	for _, e := range ledger(t, fourState) {
		if want := e.Step%4 == 0; e.Unhashed == want {
			t.Errorf("digest_every_steps = 4: step %d unhashed %v, want %v", e.Step, e.Unhashed, !want)
		}
		if !e.Unhashed {
			hashed++
			if e.Digest != ref[e.Step] {
				t.Errorf("step %d: digest %s, hashed every step %s", e.Step, e.Digest, ref[e.Step])
			}
		}
	}
	unhashedMeasured := int64(-1)
	for _, e := range ledger(t, measuredState) {
		if e.Unhashed && unhashedMeasured < 0 {
			unhashedMeasured = e.Step
		}
		if !e.Unhashed && e.Digest != ref[e.Step] {
			t.Errorf("measured interval: step %d digest %s, hashed every step %s", e.Step, e.Digest, ref[e.Step])
		}
	}
	if unhashedMeasured < 0 {
		t.Fatalf("K = %v but every step of the measured run is hashed", k)
	}

	if v := easy(t, "verify", everyState, fourState); v.code != 0 || !contains(v.stdout, fmt.Sprintf("OK: %d common steps agree (last 16; %d common steps unhashed", hashed, 16-hashed)) {
		t.Fatalf("verify of K = 1 and K = 4: exit %d\n%s%s\nwant OK comparing the %d steps hashed in both", v.code, v.stdout, v.stderr, hashed)
	}
	if s := easy(t, "status", "--state", measuredState); s.code != 0 || !contains(s.stdout, fmt.Sprintf("ledger digest: every %d steps", int(k))) ||
		!contains(s.stdout, "unhashed") {
		t.Fatalf("status of the measured run: exit %d\n%s%s\nwant the interval and unhashed rows", s.code, s.stdout, s.stderr)
	}
	sqlite(t, measuredState, fmt.Sprintf(`DELETE FROM ledger WHERE step = %d`, unhashedMeasured))
	if v := easy(t, "verify", everyState, measuredState); v.code != 2 || !contains(v.stderr, fmt.Sprintf("lacks steps %d", unhashedMeasured)) {
		t.Fatalf("verify after deleting unhashed step %d: exit %d, want 2 naming it\n%s%s", unhashedMeasured, v.code, v.stdout, v.stderr)
	}
}
