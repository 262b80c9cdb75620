package data_test

// Tests on the real data sets, found as the runtime finds them (package
// datasets, which imports this package: hence an external test package).

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
)

func TestLoadMNISTReadsTheGoMNISTModule(t *testing.T) {
	dir, err := datasets.LocateMNIST("")
	if err != nil {
		t.Skipf("MNIST not available here: %v", err)
	}
	start := time.Now()
	m, err := data.LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	// Class counts of the canonical files (60,000 train / 10,000 test).
	wantTrain := [10]int{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}
	wantTest := [10]int{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}
	for _, c := range []struct {
		name  string
		s     *data.Split
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
	again, err := data.LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again != m {
		t.Fatal("second LoadMNIST of the same directory did not return the cached data")
	}
	t.Logf("first load %v, cached load %v", first, time.Since(start))
}

func TestLoadTextReadsOpticks(t *testing.T) {
	path, err := datasets.LocateOpticks()
	if err != nil {
		t.Skipf("Go's Opticks text not available: %v", err)
	}
	c, err := data.LoadText(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if int64(len(c.IDs)) != st.Size() || len(c.Train)+len(c.Test) != len(c.IDs) || len(c.Test) != len(c.IDs)/10 {
		t.Fatalf("%d ids for %d bytes, split %d/%d", len(c.IDs), st.Size(), len(c.Train), len(c.Test))
	}
	if c.VocabSize() < 60 || c.VocabSize() > 128 {
		t.Fatalf("vocabulary of %d bytes for an English text", c.VocabSize())
	}
	if !strings.Contains(c.Decode(c.IDs[:2000]), "OPTICKS") {
		t.Fatal("decoded start of the text does not mention Opticks")
	}
}
