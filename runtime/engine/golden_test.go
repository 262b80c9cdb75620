package engine

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/ops.golden from the current results")

// usesDetmath lists the cases whose results depend on detmath's exp, log or
// tanh; their bits change whenever detmath's implementation does, so they
// are logged but not pinned in the golden file.
var usesDetmath = map[string]bool{
	"gelu with the tanh approximation":                                                          true,
	"causal self-attention with two heads":                                                      true,
	"reshape passes gradients through":                                                          true,
	"softmax cross-entropy":                                                                     true,
	"small conv net: conv, batch norm, relu, pool, linear, cross-entropy":                       true,
	"small transformer block: embedding, positions, layer norm, attention, gelu, cross-entropy": true,
}

// caseDigest returns the sha256 of a case's output, state and gradients
// (little-endian float32 bits) at 3 threads on misaligned inputs.
func caseDigest(c opCase) string {
	out, state, grads := runCase(c, 3, true)
	h := sha256.New()
	for _, s := range [][]float32{out, state, grads} {
		binary.Write(h, binary.LittleEndian, s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestOpsMatchGoldenBits pins the exact bits of every op that does not call
// detmath. The same golden file must pass on amd64 (GOAMD64 v1 and v3, which
// may fuse multiply-adds) and on arm64 (which fuses unless told not to): a
// difference means a product that feeds a sum lost its explicit rounding.
// Refresh with go test -run TestOpsMatchGoldenBits -update after an
// intended change of results.
func TestOpsMatchGoldenBits(t *testing.T) {
	path := filepath.Join("testdata", "ops.golden")
	got := map[string]string{}
	var lines []string
	for _, c := range opCases {
		d := caseDigest(c)
		t.Logf("%s %s", d, c.name)
		if !usesDetmath[c.name] {
			got[c.name] = d
			lines = append(lines, d+" "+c.name)
		}
	}
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("opening golden digests: %v (run with -update to create them)", err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		d, name, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("malformed golden line %q", sc.Text())
		}
		want[name] = d
	}
	for name, d := range got {
		switch w, ok := want[name]; {
		case !ok:
			t.Errorf("%s: no golden digest (run with -update)", name)
		case w != d:
			t.Errorf("%s: digest %s, golden %s", name, d, w)
		}
	}
	if len(want) != len(got) {
		t.Errorf("golden file has %d digests, tests produce %d", len(want), len(got))
	}
}
