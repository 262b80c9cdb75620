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
		noGo      bool
		want      string
		wantInErr []string
	}{
		{name: "an explicit directory wins over the environment", explicit: full, env: partial, cwd: emptyCwd, want: full},
		{name: "an explicit directory lacking a file is an error naming it", explicit: partial, cwd: emptyCwd, wantInErr: []string{TestImagesFile, "data.dir"}},
		{name: "the environment variable is used without an explicit directory", env: full, cwd: cwdWithData, want: full},
		{name: "an environment directory lacking a file is an error naming the variable", env: partial, cwd: cwdWithData, wantInErr: []string{MNISTDirEnv, TestImagesFile}},
		{name: "data/mnist under the working directory comes next", cwd: cwdWithData, want: filepath.Join("data", "mnist")},
		{name: "nothing anywhere is an error listing the fixes", cwd: emptyCwd, noGo: true, wantInErr: []string{"data.dir", MNISTDirEnv, "make data", emptyCache}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(MNISTDirEnv, tc.env)
			t.Chdir(tc.cwd)
			if tc.noGo {
				t.Setenv("PATH", "")
				t.Setenv("GOMODCACHE", emptyCache)
			}
			got, err := LocateMNIST(tc.explicit)
			if tc.wantInErr != nil {
				if err == nil {
					t.Fatalf("LocateMNIST = %q, want an error", got)
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

func TestLocateMNISTFindsTheModuleCacheWithoutTheGoCommand(t *testing.T) {
	mod, err := goCommand("list", "-m", "-f", "{{.Dir}}", GoMNISTModule)
	if err != nil || mod == "" {
		t.Skipf("GoMNIST module not in the cache: %v", err)
	}
	// mod = <cache>/github.com/petar/!go!m!n!i!s!t@<version>
	cache := strings.TrimSuffix(mod, string(filepath.Separator)+filepath.FromSlash(goMNISTCachePath))
	if cache == mod {
		t.Fatalf("module directory %s does not end in %s", mod, goMNISTCachePath)
	}
	t.Setenv(MNISTDirEnv, "")
	t.Chdir(t.TempDir())
	t.Setenv("PATH", "")
	t.Setenv("GOMODCACHE", cache)
	got, err := LocateMNIST("")
	if err != nil || got != filepath.Join(mod, "data") {
		t.Fatalf("LocateMNIST = %q, %v; want %q", got, err, filepath.Join(mod, "data"))
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
