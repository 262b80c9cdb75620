package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// LoadMNIST reads the four canonical gzip files from dir (found by
// datasets.LocateMNIST)
// with the package's IDX reader and checks them: image magic 0x803 with
// 28×28 images, label magic 0x801, equal counts, labels below 10. The
// decoded data (about 55 MB) is cached per absolute directory for the life
// of the process, so later calls are free (files changed after the first
// load are not re-read); a failed load is not cached. A
// missing file is an error naming it and matching fs.ErrNotExist.
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
		return nil, fmt.Errorf("loading MNIST: missing file %s: %w (run `make data`, or see runtime/datasets for where the runtime looks)", filepath.Join(dir, missing), fs.ErrNotExist)
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
