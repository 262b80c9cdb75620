package data

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeMNIST writes a synthetic MNIST directory: nTrain and nTest 28x28
// images whose pixels are the sample index, labels index%10. Files named in
// skip are not written; labelsExtra adds labels to the test label file.
func writeMNIST(t *testing.T, dir string, nTrain, nTest int, skip string, labelsExtra int) {
	t.Helper()
	write := func(name string, raw []byte) {
		if name == skip {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, name), gzipBytes(t, raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	images := func(n int) []byte {
		px := make([]byte, n*28*28)
		for i := range px {
			px[i] = byte(i / (28 * 28))
		}
		return idxBytes([]uint32{uint32(n), 28, 28}, px)
	}
	labels := func(n int) []byte {
		l := make([]byte, n)
		for i := range l {
			l[i] = byte(i % 10)
		}
		return idxBytes([]uint32{uint32(n)}, l)
	}
	write(TrainImagesFile, images(nTrain))
	write(TrainLabelsFile, labels(nTrain))
	write(TestImagesFile, images(nTest))
	write(TestLabelsFile, labels(nTest+labelsExtra))
}

func TestLoadMNISTReadsTheGoMNISTModule(t *testing.T) {
	dir, err := LocateMNIST("")
	if err != nil {
		t.Skipf("MNIST not available here: %v", err)
	}
	start := time.Now()
	m, err := LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	// Class counts of the canonical files (60,000 train / 10,000 test).
	wantTrain := [10]int{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}
	wantTest := [10]int{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}
	for _, c := range []struct {
		name  string
		s     *Split
		n     int
		label byte
		hist  [10]int
	}{
		{"train", &m.Train, 60000, 5, wantTrain},
		{"test", &m.Test, 10000, 7, wantTest},
	} {
		if c.s.N != c.n || c.s.Rows != 28 || c.s.Cols != 28 || len(c.s.Images) != c.n*784 || len(c.s.Labels) != c.n {
			t.Fatalf("%s split: N=%d %dx%d, %d pixels, %d labels", c.name, c.s.N, c.s.Rows, c.s.Cols, len(c.s.Images), len(c.s.Labels))
		}
		if c.s.Labels[0] != c.label {
			t.Errorf("%s label 0 = %d, want %d", c.name, c.s.Labels[0], c.label)
		}
		var hist [10]int
		for _, l := range c.s.Labels {
			hist[l]++
		}
		if hist != c.hist {
			t.Errorf("%s class counts %v, want %v", c.name, hist, c.hist)
		}
	}
	start = time.Now()
	again, err := LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again != m {
		t.Fatal("second LoadMNIST of the same directory did not return the cached data")
	}
	t.Logf("first load %v, cached load %v", first, time.Since(start))
}

func TestLoadMNISTChecksItsFiles(t *testing.T) {
	cases := []struct {
		name        string
		skip        string
		labelsExtra int
		wantInErr   []string
	}{
		{"a complete small directory loads", "", 0, nil},
		{"a missing test label file is named with the fix", TestLabelsFile, 0, []string{TestLabelsFile, MNISTDirEnv, "make data"}},
		{"a missing train image file is named", TrainImagesFile, 0, []string{TrainImagesFile}},
		{"more labels than images is reported", "", 2, []string{"12 labels", TestImagesFile}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeMNIST(t, dir, 20, 10, tc.skip, tc.labelsExtra)
			m, err := LoadMNIST(dir)
			if tc.wantInErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if m.Train.N != 20 || m.Test.N != 10 || m.Train.Image(3)[100] != 3 || m.Test.Labels[7] != 7 {
					t.Fatalf("decoded %d/%d samples, image 3 pixel %d, label 7 = %d", m.Train.N, m.Test.N, m.Train.Image(3)[100], m.Test.Labels[7])
				}
				return
			}
			if err == nil {
				t.Fatal("LoadMNIST succeeded")
			}
			for _, w := range tc.wantInErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadMNISTDoesNotCacheFailures(t *testing.T) {
	dir := t.TempDir()
	writeMNIST(t, dir, 4, 4, TrainLabelsFile, 0)
	if _, err := LoadMNIST(dir); err == nil {
		t.Fatal("load without train labels succeeded")
	}
	writeMNIST(t, dir, 4, 4, "", 0)
	if _, err := LoadMNIST(dir); err != nil {
		t.Fatalf("load after adding the file: %v", err)
	}
}

func TestNormalizeMatchesTheFormula(t *testing.T) {
	src := []uint8{0, 1, 127, 128, 254, 255}
	dst := make([]float32, len(src))
	Normalize(dst, src)
	for i, p := range src {
		want := (float64(p)/255 - 0.1307) / 0.3081
		if math.Abs(float64(dst[i])-want) > 1e-6 {
			t.Errorf("Normalize(%d) = %v, want %v", p, dst[i], want)
		}
	}
	if dst[0] >= 0 || dst[5] < 2.82 || dst[5] > 2.822 {
		t.Errorf("background %v should be negative and ink %v about 2.8215", dst[0], dst[5])
	}
}

func TestLocateMNISTOrder(t *testing.T) {
	full := t.TempDir()
	writeMNIST(t, full, 1, 1, "", 0)
	partial := t.TempDir()
	writeMNIST(t, partial, 1, 1, TestImagesFile, 0)
	cwdWithData := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cwdWithData, "data", "mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeMNIST(t, filepath.Join(cwdWithData, "data", "mnist"), 1, 1, "", 0)
	emptyCwd := t.TempDir()
	emptyCache := t.TempDir()

	cases := []struct {
		name      string
		explicit  string
		env       string
		cwd       string
		empty     bool
		want      string
		wantInErr []string
	}{
		{name: "an explicit directory wins over the environment", explicit: full, env: partial, cwd: emptyCwd, want: full},
		{name: "an explicit directory lacking a file is an error naming it", explicit: partial, cwd: emptyCwd, wantInErr: []string{TestImagesFile, "data.dir"}},
		{name: "the environment variable is used without an explicit directory", env: full, cwd: cwdWithData, want: full},
		{name: "an environment directory lacking a file is an error naming the variable", env: partial, cwd: cwdWithData, wantInErr: []string{MNISTDirEnv, TestImagesFile}},
		{name: "data/mnist under the working directory comes next", cwd: cwdWithData, want: filepath.Join("data", "mnist")},
		{name: "nothing anywhere is one line naming the command to run", cwd: emptyCwd, empty: true,
			wantInErr: []string{"data.dir", MNISTDirEnv, "run `make data`", "go mod download " + GoMNISTModule, emptyCache}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(MNISTDirEnv, tc.env)
			t.Chdir(tc.cwd)
			if tc.empty {
				t.Setenv("GOMODCACHE", emptyCache)
			}
			got, err := LocateMNIST(tc.explicit)
			if tc.wantInErr != nil {
				if err == nil {
					t.Fatalf("LocateMNIST = %q, want an error", got)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q spans several lines", err)
				}
				for _, w := range tc.wantInErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("LocateMNIST = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLocateMNISTFindsTheModuleCacheFromTheEnvironment(t *testing.T) {
	// fakeModule writes the four files where a module cache rooted at
	// cache holds GoMNIST and returns the data directory.
	fakeModule := func(t *testing.T, cache string) string {
		d := filepath.Join(cache, filepath.FromSlash(goMNISTCachePath), "data")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeMNIST(t, d, 1, 1, "", 0)
		return d
	}
	cases := []struct {
		name                     string
		gomodcache, gopath, home string // "cache" is replaced by the fake cache's root
		cacheUnder               string // where the fake cache lives, relative to the temp root
	}{
		{name: "GOMODCACHE names the cache", gomodcache: "cache", cacheUnder: "mc"},
		{name: "without GOMODCACHE the first GOPATH entry's pkg/mod", gopath: "cache", cacheUnder: "gp/pkg/mod"},
		{name: "without either ~/go/pkg/mod", home: "cache", cacheUnder: "home/go/pkg/mod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			want := fakeModule(t, filepath.Join(root, filepath.FromSlash(tc.cacheUnder)))
			pick := func(v, dir string) string {
				if v == "" {
					return ""
				}
				return filepath.Join(root, dir)
			}
			t.Setenv("GOMODCACHE", pick(tc.gomodcache, "mc"))
			gopath := pick(tc.gopath, "gp")
			if gopath != "" {
				gopath += string(filepath.ListSeparator) + filepath.Join(root, "second")
			}
			t.Setenv("GOPATH", gopath)
			t.Setenv("HOME", pick(tc.home, "home"))
			t.Setenv(MNISTDirEnv, "")
			t.Chdir(t.TempDir())
			got, err := LocateMNIST("")
			if err != nil || got != want {
				t.Fatalf("LocateMNIST = %q, %v; want %q", got, err, want)
			}
		})
	}
}

// fakeGo puts a `go` command first on PATH that records each call in a
// file, and returns that file's path.
func fakeGo(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	return calls
}

// TestLocatingDataNeverRunsTheGoCommand: compute nodes have no Go
// toolchain, so finding MNIST or the Opticks text must not run `go`.
func TestLocatingDataNeverRunsTheGoCommand(t *testing.T) {
	calls := fakeGo(t)
	t.Setenv(MNISTDirEnv, "")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Chdir(t.TempDir())
	if _, err := LocateMNIST(""); err == nil {
		t.Fatal("LocateMNIST found data in an empty module cache")
	}
	LocateOpticks()
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("locating data ran the go command: %q", b)
	}
}

func TestConcurrentLoadsOfOneDirectoryShareOneDecode(t *testing.T) {
	dir := t.TempDir()
	writeMNIST(t, dir, 8, 4, "", 0)
	var got [6]*MNIST
	var errs [6]error
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = LoadMNIST(dir) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("load %d returned a different copy", i)
		}
	}
}
