package data

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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

func TestLoadMNISTChecksItsFiles(t *testing.T) {
	cases := []struct {
		name        string
		skip        string
		labelsExtra int
		wantInErr   []string
	}{
		{"a complete small directory loads", "", 0, nil},
		{"a missing test label file is named with the fix", TestLabelsFile, 0, []string{TestLabelsFile, "make data"}},
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
