package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sqlite runs SQL on a state directory's database with the sqlite3 shell:
// a change made behind easyscale's back, as a user, a script or a failing
// disk would make it. It returns the shell's output.
func sqlite(t *testing.T, state, sql string) string {
	t.Helper()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the sqlite3 shell is missing (.ci/install-deps.sh installs it)")
		}
		t.Skip("the sqlite3 shell is missing (apt-get install sqlite3)")
	}
	out, err := exec.Command("sqlite3", filepath.Join(state, "state.db"), sql).CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %q: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestChangedESTCursorFallsBackToThePreviousCheckpoint changes one digit of
// a stored EST cursor ("pos":N -> N+1, one bit of the ASCII digit) in the
// newest checkpoint: SQLite's integrity check still passes, the rerun skips
// that checkpoint with a warning, resumes from the previous one and reaches
// the uninterrupted digest. The ledger row of step 8, changed too, is
// recomputed and rewritten, so afterwards status and verify find the state
// whole again.
func TestChangedESTCursorFallsBackToThePreviousCheckpoint(t *testing.T) {
	refState := t.TempDir()
	ref := mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval", "--state", refState)
	state := t.TempDir()
	mustRun(t, "run", "--config", config(), "--steps", "8", "--no-eval", "--state", state)
	var cur struct{ Pos int }
	blob := sqlite(t, state, `SELECT CAST(blob AS TEXT) FROM est_contexts WHERE step = 8 AND est = 3`)
	if err := json.Unmarshal([]byte(blob), &cur); err != nil || cur.Pos == 0 || cur.Pos%2 != 0 {
		t.Fatalf("EST 3's cursor at step 8 is %q (%v); want an even, non-zero pos to flip one bit of", blob, err)
	}
	from, to := fmt.Sprintf(`"pos":%d`, cur.Pos), fmt.Sprintf(`"pos":%d`, cur.Pos+1)
	sqlite(t, state, fmt.Sprintf(`UPDATE est_contexts SET blob = CAST(replace(CAST(blob AS TEXT), '%s', '%s') AS BLOB) WHERE step = 8 AND est = 3`, from, to))
	if got := sqlite(t, state, `SELECT CAST(blob AS TEXT) FROM est_contexts WHERE step = 8 AND est = 3`); !contains(got, to) {
		t.Fatalf("the UPDATE left the cursor at %q", got)
	}
	sqlite(t, state, `UPDATE ledger SET loss = loss * 2 WHERE step = 8`)
	if ok := sqlite(t, state, `PRAGMA integrity_check`); ok != "ok" {
		t.Fatalf("integrity_check = %q: the change should be invisible to SQLite", ok)
	}
	r := mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval", "--state", state)
	if got := r.summary["resumed_from"].(float64); got != 7 {
		t.Fatalf("resumed from step %v, want 7 (the checkpoint before the changed one)\nstderr:\n%s", got, r.stderr)
	}
	if !contains(r.stderr, "checkpoint of step 8") || !contains(r.stderr, "do not match their checksum") {
		t.Fatalf("the changed checkpoint was not reported; stderr:\n%s", r.stderr)
	}
	if digest(r) != digest(ref) {
		t.Fatalf("digest %s after falling back, uninterrupted %s", digest(r), digest(ref))
	}
	if !contains(r.stderr, "step=8") || !contains(r.stderr, "rewrites the row") {
		t.Fatalf("the changed ledger row of step 8 was not reported as rewritten; stderr:\n%s", r.stderr)
	}
	if s := easy(t, "status", "--state", state); s.code != 0 || contains(s.stdout, "CORRUPT") {
		t.Fatalf("status after the rewrite: exit %d\n%s%s", s.code, s.stdout, s.stderr)
	}
	if v := easy(t, "verify", refState, state); v.code != 0 {
		t.Fatalf("verify after the rewrite: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}

// TestChangedLedgerRowsAreNamedByStep changes ledger rows of a finished
// run: a digest's hex digit (step 3) and one bit of the tensor digests'
// JSON (step 5). verify and status name both steps instead of reporting a
// divergence or a decode error; a resumed run warns about them and still
// reaches the uninterrupted digest.
func TestChangedLedgerRowsAreNamedByStep(t *testing.T) {
	refState := t.TempDir()
	ref := mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval", "--state", refState)
	state := t.TempDir()
	mustRun(t, "run", "--config", config(), "--steps", "8", "--no-eval", "--state", state)
	sqlite(t, state, `UPDATE ledger SET digest = substr(digest, 1, 10) || (CASE substr(digest, 11, 1) WHEN '0' THEN '1' ELSE '0' END) || substr(digest, 12) WHERE step = 3;
		UPDATE ledger SET tensor_digests = '{' || substr(tensor_digests, 2) WHERE step = 5`)
	if ok := sqlite(t, state, `PRAGMA integrity_check`); ok != "ok" {
		t.Fatalf("integrity_check = %q: the change should be invisible to SQLite", ok)
	}
	names := func(what string, out string) {
		t.Helper()
		if !contains(out, "steps 3, 5") || !contains(out, "do not match their checksums") {
			t.Fatalf("%s does not name the changed rows 3 and 5:\n%s", what, out)
		}
	}
	v := easy(t, "verify", refState, state)
	if v.code != 2 {
		t.Fatalf("verify of a changed ledger: exit %d, want 2\n%s%s", v.code, v.stdout, v.stderr)
	}
	names("verify", v.stderr)
	s := easy(t, "status", "--state", state, "--tail", "8")
	if s.code != 1 {
		t.Fatalf("status of a changed ledger: exit %d, want 1\n%s%s", s.code, s.stdout, s.stderr)
	}
	names("status", s.stdout)
	marked := map[string]bool{}
	for _, line := range strings.Split(s.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "CORRUPT") {
			marked[f[0]] = true
		}
	}
	if len(marked) != 2 || !marked["3"] || !marked["5"] {
		t.Fatalf("status marks steps %v as CORRUPT, want 3 and 5:\n%s", marked, s.stdout)
	}
	r := mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval", "--state", state)
	for _, step := range []string{"step=3", "step=5"} {
		if !contains(r.stderr, "ledger row does not match its checksum") || !contains(r.stderr, step) {
			t.Fatalf("the resumed run did not warn about the ledger row %s; stderr:\n%s", step, r.stderr)
		}
	}
	if digest(r) != digest(ref) {
		t.Fatalf("digest %s after resuming, uninterrupted %s", digest(r), digest(ref))
	}
}

// TestDeletedLockFileDoesNotAdmitASecondWriter deletes the state
// directory's lock file while a run is writing: a second run on the same
// directory is still refused, with an error naming the first run's PID.
func TestDeletedLockFileDoesNotAdmitASecondWriter(t *testing.T) {
	state := t.TempDir()
	first := exec.Command(easyscale, "run", "--config", config(), "--steps", "200", "--no-eval", "--quiet", "--state", state)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		first.Process.Kill()
		first.Wait()
	}()
	waitStep(t, state, 2, 60*time.Second)
	if err := os.Remove(filepath.Join(state, "lock")); err != nil {
		t.Fatal(err)
	}
	second := easy(t, "run", "--config", config(), "--steps", "200", "--no-eval", "--state", state)
	if second.code == 0 {
		t.Fatal("a second writer ran on the state directory after its lock file was deleted")
	}
	holder := fmt.Sprintf("process %d", first.Process.Pid)
	if !contains(second.stderr, holder) || !contains(second.stderr, "open for writing") {
		t.Fatalf("the refusal does not name the first writer (%s); exit %d, stderr:\n%s", holder, second.code, second.stderr)
	}
	if lastStep(state) >= 200 {
		t.Fatal("the first run finished before the second one started; the test showed nothing")
	}
}

// TestDeletedLedgerRowsAreNamed deletes ledger rows of a finished run (steps
// 7-9): verify (exit 2) and status (exit 1) name the missing steps instead
// of comparing what is left as if nothing were missing.
func TestDeletedLedgerRowsAreNamed(t *testing.T) {
	refState := t.TempDir()
	mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval", "--state", refState)
	state := t.TempDir()
	mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval", "--state", state, "--workers", "3")
	sqlite(t, state, `DELETE FROM ledger WHERE step BETWEEN 7 AND 9`)
	if v := easy(t, "verify", refState, state); v.code != 2 || !contains(v.stderr, "lacks steps 7-9") {
		t.Fatalf("verify with deleted rows: exit %d, want 2 naming steps 7-9\n%s%s", v.code, v.stdout, v.stderr)
	}
	if s := easy(t, "status", "--state", state); s.code != 1 || !contains(s.stdout, "lacks steps 7-9") {
		t.Fatalf("status with deleted rows: exit %d, want 1 naming steps 7-9\n%s%s", s.code, s.stdout, s.stderr)
	}
}
