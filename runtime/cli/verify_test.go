package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// state writes a state directory of one job whose ledger has the given
// per-step digests of tensor "w".
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
		full := "sha256:" + strings.Repeat(d, 64)
		err := db.AppendLedger(statedb.LedgerEntry{Step: int64(i + 1), Digest: full, Workers: 1, Time: time.Now(),
			TensorDigests: []statedb.TensorDigest{{Name: "w", Digest: strings.Repeat(d, 16)}, {Name: "b", Digest: "00"}}})
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
