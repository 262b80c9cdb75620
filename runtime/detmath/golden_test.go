package detmath

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from this machine's results")

const goldenFile = "testdata/golden.txt"

// goldenHashes computes, for each function, the SHA-256 of its result bits
// (little-endian) over a fixed input set: every 4093rd float32 bit pattern
// (all exponents, denormals, ±Inf, NaNs) plus 2**18 evenly spaced values in
// the range that matters, and for the float64 functions dense grids plus
// SplitMix64 bit patterns.
func goldenHashes() map[string]string {
	out := map[string]string{}
	for _, fn := range funcs32 {
		h := sha256.New()
		var buf [4]byte
		emit := func(x float32) {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(fn.f(x)))
			h.Write(buf[:])
		}
		for b := uint64(0); b < 1<<32; b += 4093 {
			emit(math.Float32frombits(uint32(b)))
		}
		for i := 0; i < 1<<18; i++ {
			emit(-30 + float32(60*float32(i))/(1<<18))
		}
		out[fn.name] = hex.EncodeToString(h.Sum(nil))
	}
	var buf [8]byte
	h := sha256.New()
	emit := func(v float64) {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v))
		h.Write(buf[:])
	}
	for i := 0; i < 1<<18; i++ {
		emit(Cos64(-20 + float64(40*float64(i))/(1<<18)))
	}
	rng := uint64(1)
	for i := 0; i < 2000; i++ {
		emit(Cos64(math.Float64frombits(splitmix(&rng))))
	}
	out["Cos64"] = hex.EncodeToString(h.Sum(nil))
	h.Reset()
	for _, beta := range []float64{0.9, 0.95, 0.98, 0.99, 0.999, 0.9999} {
		for step := 1; step <= 20000; step++ {
			emit(Pow64(beta, float64(step)))
		}
	}
	for i := 0; i < 1<<17; i++ {
		x := math.Float64frombits(splitmix(&rng) >> 1)
		y := float64(1400*unit(&rng)) - 700 // explicit rounding: no FMA in the inputs either
		emit(Pow64(x, y))
		emit(Pow64(float64(4*unit(&rng)), y))
	}
	out["Pow64"] = hex.EncodeToString(h.Sum(nil))
	return out
}

// TestGoldenBits pins the exact result bits of every function. The same
// file must pass on amd64 (GOAMD64=v1 and v3) and on arm64
// (tests/crossarch/run.sh); refresh with go test -run Golden -update only
// after a deliberate change of algorithm.
func TestGoldenBits(t *testing.T) {
	got := goldenHashes()
	if *update {
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%s %s\n", n, got[n])
		}
		if err := os.MkdirAll(filepath.Dir(goldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readGolden(t)
	for name, g := range got {
		if want[name] != g {
			t.Errorf("%s: result bits hash %s, golden %s (arithmetic differs on this architecture or the algorithm changed)", name, g, want[name])
		}
	}
	if len(want) != len(got) {
		t.Errorf("golden file has %d entries, computed %d", len(want), len(got))
	}
}

func readGolden(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatalf("reading golden hashes (create with -update): %v", err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, hash, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("%s: malformed line %q", goldenFile, sc.Text())
		}
		want[name] = hash
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}
