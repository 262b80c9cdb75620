package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/manpage"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// state writes a state directory of one job whose ledger has the given
// per-step digests of tensor "w": "-" records the step unhashed, "_"
// leaves its row out (as if deleted).
func state(t *testing.T, digests ...string) string {
	t.Helper()
	dir := t.TempDir()
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.InitJob(statedb.Job{ID: "sha256:" + strings.Repeat("1", 64), Name: "j", Spec: `{"seed":1}`, LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	for i, d := range digests {
		e := statedb.LedgerEntry{Step: int64(i + 1), Digest: "sha256:" + strings.Repeat(d, 64), Workers: 1, Time: time.Now(),
			TensorDigests: []statedb.TensorDigest{{Name: "w", Digest: strings.Repeat(d, 16)}, {Name: "b", Digest: "00"}}}
		switch d {
		case "_":
			continue
		case "-":
			e.Digest, e.TensorDigests, e.Unhashed = "", nil, true
		}
		err := db.AppendLedger(e)
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestVerify(t *testing.T) {
	cases := []struct {
		name     string
		a, b     []string
		wantCode int
		want     string
	}{
		{"agreeing ledgers", []string{"a", "b", "c"}, []string{"a", "b", "c"}, 0, "OK: 3 common steps agree"},
		{"a prefix agrees", []string{"a", "b", "c"}, []string{"a", "b"}, 0, "OK: 2 common steps agree"},
		{"a divergence names the step and tensor", []string{"a", "b", "c"}, []string{"a", "d", "e"}, 1, "DIVERGED at step 2"},
		{"no common step", []string{}, []string{"a"}, 2, "share no step"},
		{"steps unhashed in one run are not compared", []string{"a", "-", "c", "-", "e"}, []string{"a", "b", "c", "d", "e"}, 0,
			"OK: 3 common steps agree (last 5; 2 common steps unhashed in one run or both, not compared)"},
		{"runs hashed every 2 and every 3 steps compare the multiples of 6 and the last step", []string{"-", "b", "-", "d", "-", "f", "-", "9"},
			[]string{"-", "-", "c", "-", "-", "f", "-", "9"}, 0, "OK: 2 common steps agree (last 8; 6 common steps unhashed"},
		{"a divergence at a step hashed in both is found", []string{"a", "-", "7"}, []string{"a", "b", "c"}, 1, "DIVERGED at step 3"},
		{"no step hashed in both", []string{"-", "b"}, []string{"a", "-"}, 2, "share 2 steps but none hashed in both"},
		{"a deleted row among unhashed ones is named", []string{"a", "-", "_", "-", "e"}, []string{"a", "b", "c", "d", "e"}, 2, "lacks steps 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run("verify", state(t, c.a...), state(t, c.b...))
			if code != c.wantCode || !strings.Contains(out+errOut, c.want) {
				t.Fatalf("exit %d, output %q%q; want %d and %q", code, out, errOut, c.wantCode, c.want)
			}
			if c.wantCode == 1 && !strings.Contains(out, "tensors: w") {
				t.Fatalf("the divergent tensor is not named: %q", out)
			}
		})
	}
}

func TestVerifyNamesNoTensorsItCannotCompare(t *testing.T) {
	a, b := state(t, "a", "b"), t.TempDir()
	db, err := statedb.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.InitJob(statedb.Job{ID: "sha256:" + strings.Repeat("1", 64), Name: "j", Spec: `{"seed":1}`, LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	for i, d := range []string{"a", "c"} { // a run that recorded no per-tensor digests (torch before issue 18)
		if err := db.AppendLedger(statedb.LedgerEntry{Step: int64(i + 1), Digest: "sha256:" + strings.Repeat(d, 64), Workers: 1, Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	code, out, _ := run("verify", a, b)
	if code != 1 || !strings.Contains(out, "DIVERGED at step 2") || !strings.Contains(out, "tensors: not recorded in both runs") {
		t.Fatalf("exit %d, output %q: want the divergence and why no tensor is named, not an empty tensors: line", code, out)
	}
}

func TestKillAtHelpDoesNotAskATorchJobForProcs(t *testing.T) {
	_, _, help := run("help", "run")
	h, err := manpage.Parse(help) // joins a description's wrapped lines
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, b := range h.Blocks {
		if b.Kind == manpage.Entry && (strings.HasPrefix(b.Term, "--kill-at") || strings.HasPrefix(b.Term, "--term-at")) {
			seen++
			if strings.HasSuffix(b.Text, "(needs --procs)") || !strings.Contains(b.Text, "a torch job's workers are processes already") {
				t.Errorf("%s: %s: the help must not say a torch job needs --procs", b.Term, b.Text)
			}
		}
	}
	if seen != 2 {
		t.Errorf("the help of run lists %d of --kill-at and --term-at, want both:\n%s", seen, help)
	}
}

// TestVerifyNamesOtherNumericsWhereTheRunsDiverge: two runs whose
// numerics records differ (a torch job moved to another CPU ISA and its
// run kept by the start-over) diverge as expected, and verify says why
// (a tester's: it said only DIVERGED at step 1); runs with the same
// record, or none, get no note.
func TestVerifyNamesOtherNumericsWhereTheRunsDiverge(t *testing.T) {
	record := func(isa string) string {
		return `{"torch":"2.6.0","python":"3.13","fingerprint":{"cpu_capability":"` + isa + `","torch":"2.6.0"},"canary":"sha256:` + isa + `"}`
	}
	for _, tc := range []struct {
		name     string
		ra, rb   string
		wantNote bool
	}{
		{"other numerics", record("AVX2"), record("DEFAULT"), true},
		{"the same numerics", record("AVX2"), record("AVX2"), false},
		{"no record", "", record("AVX2"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := state(t, "a", "b"), state(t, "c", "d")
			for dir, rec := range map[string]string{a: tc.ra, b: tc.rb} {
				if rec == "" {
					continue
				}
				db, err := statedb.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.SetNumerics(rec); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			code, out, _ := run("verify", a, b)
			note := strings.Contains(out, "note: the two runs were computed with other numerics (cpu_capability: A AVX2, B DEFAULT; canary digest: A sha256:AVX2, B sha256:DEFAULT)")
			if code != 1 || !strings.Contains(out, "DIVERGED at step 1") || note != tc.wantNote {
				t.Fatalf("exit %d, output %q; want the divergence and the note %v", code, out, tc.wantNote)
			}
		})
	}
}
