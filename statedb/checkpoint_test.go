package statedb

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestCheckpointRoundTripIsBitExact(t *testing.T) {
	db := openTest(t, Options{})
	tensors := []Tensor{
		// Deliberately not in name order: the caller's order must survive.
		{Name: "z.last", Shape: []int{2, 3}, Data: []float32{
			float32(math.Copysign(0, -1)), float32(math.Inf(-1)), math.Float32frombits(0x7fc00001),
			math.Float32frombits(1), math.MaxFloat32, 0.1}},
		{Name: "a.first", Shape: []int{1}, Data: []float32{-3.25}},
		{Name: "scalar", Shape: []int{}, Data: []float32{42}},
		{Name: "empty", Shape: []int{0, 5}, Data: []float32{}},
	}
	contexts := []ESTContext{{EST: 1, Blob: []byte("one")}, {EST: 0, Blob: []byte{0, 255, 0}}, {EST: 2}}
	meta := map[string]string{"seed": "7", "engine": "native"}
	if err := db.SaveCheckpoint(12, tensors, contexts, meta); err != nil {
		t.Fatalf("SaveCheckpoint: %v", err)
	}
	cp, skipped, err := db.LatestCheckpoint()
	if err != nil || len(skipped) != 0 || cp == nil {
		t.Fatalf("LatestCheckpoint = %v, %v, %v", cp, skipped, err)
	}
	if cp.Step != 12 || cp.Path != filepath.Join(db.Dir(), CheckpointDir, "step-12.safetensors") || len(cp.SHA256) != 64 {
		t.Fatalf("checkpoint header = step %d path %s sha %q", cp.Step, cp.Path, cp.SHA256)
	}
	if !slices.Equal(tensorNames(cp.Tensors), tensorNames(tensors)) {
		t.Fatalf("tensor order = %v, want %v", tensorNames(cp.Tensors), tensorNames(tensors))
	}
	for i, want := range tensors {
		got := cp.Tensors[i]
		if !slices.Equal(got.Shape, want.Shape) || !bitsEqual(got.Data, want.Data) {
			t.Errorf("tensor %s = %v %v, want %v %v", want.Name, got.Shape, got.Data, want.Shape, want.Data)
		}
	}
	wantCtx := []ESTContext{{0, []byte{0, 255, 0}}, {1, []byte("one")}, {2, []byte{}}}
	if !reflect.DeepEqual(cp.Contexts, wantCtx) {
		t.Errorf("contexts = %v, want %v", cp.Contexts, wantCtx)
	}
	if !maps.Equal(cp.Meta, meta) {
		t.Errorf("meta = %v, want %v", cp.Meta, meta)
	}
}

func TestCheckpointFileIsStandardSafetensors(t *testing.T) {
	db := openTest(t, Options{})
	if err := db.SaveCheckpoint(1, []Tensor{{Name: "w", Shape: []int{2}, Data: []float32{1, -2}}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(db.Dir(), CheckpointDir, "step-1.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	n := int(b[0]) | int(b[1])<<8 // header is small
	header := string(b[8 : 8+n])
	for _, want := range []string{`"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`, `"__metadata__"`, `"easyscale.step":"1"`} {
		if !strings.Contains(header, want) {
			t.Errorf("header %s lacks %s", header, want)
		}
	}
	if data := b[8+n:]; !slices.Equal(data, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}) {
		t.Errorf("data = % x, want little-endian 1.0 and -2.0", data)
	}
}

// corrupt flips one byte in the middle of the file.
func corrupt(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedCheckpointsAreSkippedForThePreviousOne(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, path string)
		wantErr error
	}{
		{"a flipped byte is a checksum mismatch", corrupt, ErrChecksumMismatch},
		{"a truncated file is a checksum mismatch", func(t *testing.T, p string) {
			if err := os.Truncate(p, 10); err != nil {
				t.Fatal(err)
			}
		}, ErrChecksumMismatch},
		{"a removed file is reported as missing", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, fs.ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := openTest(t, Options{})
			for _, s := range []int64{10, 20} {
				if err := db.SaveCheckpoint(s, stepTensors(s, 64), []ESTContext{{EST: 0, Blob: []byte{byte(s)}}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			newest := filepath.Join(db.Dir(), CheckpointDir, checkpointName(20))
			orig, err := os.ReadFile(newest)
			if err != nil {
				t.Fatal(err)
			}
			wantSum := fmt.Sprintf("%x", sha256.Sum256(orig))
			c.damage(t, newest)
			cp, skipped, err := db.LatestCheckpoint()
			if err != nil || cp == nil {
				t.Fatalf("LatestCheckpoint = %v, %v, %v", cp, skipped, err)
			}
			if cp.Step != 10 || !slices.Equal(cp.Contexts[0].Blob, []byte{10}) {
				t.Fatalf("fell back to step %d contexts %v, want step 10", cp.Step, cp.Contexts)
			}
			checkStepTensors(t, cp)
			var ce *CheckpointError
			if len(skipped) != 1 || !errors.As(skipped[0], &ce) || !errors.Is(skipped[0], c.wantErr) {
				t.Fatalf("skipped = %v, want one CheckpointError wrapping %v", skipped, c.wantErr)
			}
			if ce.Step != 20 || ce.Path != newest || ce.WantSHA256 != wantSum || ce.GotSHA256 == wantSum {
				t.Fatalf("CheckpointError = %+v", ce)
			}
			if !strings.Contains(ce.Error(), newest) || !strings.Contains(ce.Error(), wantSum) {
				t.Fatalf("message %q does not name the file and the expected checksum", ce)
			}
		})
	}
}

func TestNoUsableCheckpoint(t *testing.T) {
	t.Run("an empty directory has none and skips none", func(t *testing.T) {
		cp, skipped, err := openTest(t, Options{}).LatestCheckpoint()
		if cp != nil || skipped != nil || err != nil {
			t.Fatalf("got %v, %v, %v", cp, skipped, err)
		}
	})
	t.Run("all damaged gives nil and every one skipped", func(t *testing.T) {
		db := openTest(t, Options{})
		for _, s := range []int64{1, 2} {
			db.SaveCheckpoint(s, stepTensors(s, 8), nil, nil)
			corrupt(t, filepath.Join(db.Dir(), CheckpointDir, checkpointName(s)))
		}
		cp, skipped, err := db.LatestCheckpoint()
		if cp != nil || len(skipped) != 2 || err != nil {
			t.Fatalf("got %v, %v, %v", cp, skipped, err)
		}
	})
}

func TestOnlyTheNewestCheckpointsAreKept(t *testing.T) {
	db := openTest(t, Options{KeepCheckpoints: 2})
	for s := int64(1); s <= 5; s++ {
		if err := db.SaveCheckpoint(s, stepTensors(s, 8), []ESTContext{{EST: 0, Blob: []byte{1}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(db.Dir(), CheckpointDir, "*"))
	want := []string{checkpointName(4), checkpointName(5)}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	var rows, ctxRows int
	db.sql.QueryRow(`SELECT COUNT(*) FROM checkpoints`).Scan(&rows)
	db.sql.QueryRow(`SELECT COUNT(*) FROM est_contexts`).Scan(&ctxRows)
	if rows != 2 || ctxRows != 2 {
		t.Fatalf("%d checkpoint rows and %d context rows, want 2 and 2", rows, ctxRows)
	}
}

func TestSavingAStepAgainReplacesIt(t *testing.T) {
	db := openTest(t, Options{})
	db.SaveCheckpoint(3, stepTensors(3, 8), []ESTContext{{EST: 0, Blob: []byte("old")}, {EST: 1}}, nil)
	if err := db.SaveCheckpoint(3, stepTensors(3, 8), []ESTContext{{EST: 0, Blob: []byte("new")}}, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	cp, skipped, err := db.LatestCheckpoint()
	if err != nil || len(skipped) != 0 || cp.Step != 3 || len(cp.Contexts) != 1 ||
		string(cp.Contexts[0].Blob) != "new" || cp.Meta["k"] != "v" {
		t.Fatalf("got %+v, %v, %v", cp, skipped, err)
	}
}

// failingFile accepts limit bytes, then fails every write with ENOSPC, as a
// full disk does.
type failingFile struct {
	f     *os.File
	limit int
}

func (w *failingFile) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n, _ := w.f.Write(p[:w.limit])
		w.limit = 0
		return n, &fs.PathError{Op: "write", Path: w.f.Name(), Err: syscall.ENOSPC}
	}
	w.limit -= len(p)
	return w.f.Write(p)
}
func (w *failingFile) Sync() error  { return w.f.Sync() }
func (w *failingFile) Close() error { return w.f.Close() }

// syncFailingFile writes fine but fails fsync, as some filesystems report
// delayed write errors.
type syncFailingFile struct{ *os.File }

func (w syncFailingFile) Sync() error {
	return &fs.PathError{Op: "fsync", Path: w.Name(), Err: syscall.EIO}
}

func TestWriteErrorsLeaveThePreviousCheckpoint(t *testing.T) {
	cases := []struct {
		name   string
		create func(string) (checkpointFile, error)
		want   error
	}{
		{"a disk full mid-file", func(p string) (checkpointFile, error) {
			f, err := os.Create(p)
			return &failingFile{f: f, limit: 100}, err
		}, syscall.ENOSPC},
		{"a disk full before the first byte", func(p string) (checkpointFile, error) {
			f, err := os.Create(p)
			return &failingFile{f: f}, err
		}, syscall.ENOSPC},
		{"a failing fsync", func(p string) (checkpointFile, error) {
			f, err := os.Create(p)
			return syncFailingFile{f}, err
		}, syscall.EIO},
		{"a file that cannot be created", func(p string) (checkpointFile, error) {
			return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EROFS}
		}, syscall.EROFS},
	}
	for _, c := range cases {
		t.Run(c.name+" is returned and changes nothing", func(t *testing.T) {
			db := openTest(t, Options{})
			if err := db.SaveCheckpoint(1, stepTensors(1, 4096), []ESTContext{{EST: 0, Blob: []byte("ctx1")}}, nil); err != nil {
				t.Fatal(err)
			}
			db.create = c.create
			err := db.SaveCheckpoint(2, stepTensors(2, 4096), []ESTContext{{EST: 0, Blob: []byte("ctx2")}}, nil)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "step 2") {
				t.Fatalf("err = %v, want one wrapping %v and naming step 2", err, c.want)
			}
			files, _ := filepath.Glob(filepath.Join(db.Dir(), CheckpointDir, "*"))
			if len(files) != 1 || filepath.Base(files[0]) != checkpointName(1) {
				t.Fatalf("files after failure = %v, want only step 1's", files)
			}
			cp, skipped, err := db.LatestCheckpoint()
			if err != nil || len(skipped) != 0 || cp == nil || cp.Step != 1 || string(cp.Contexts[0].Blob) != "ctx1" {
				t.Fatalf("LatestCheckpoint = %+v, %v, %v; want step 1 intact", cp, skipped, err)
			}
			checkStepTensors(t, cp)
		})
	}
}

func TestOpenRemovesLeftoversOfInterruptedSaves(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.SaveCheckpoint(5, stepTensors(5, 8), nil, nil)
	db.Close()
	cdir := filepath.Join(dir, CheckpointDir)
	leftovers := []string{"step-6.safetensors.tmp", "step-7.safetensors", "step-3.safetensors"}
	unrelated := []string{"notes.txt", "step-x.safetensors", "model.safetensors"}
	for _, f := range append(slices.Clone(leftovers), unrelated...) {
		os.WriteFile(filepath.Join(cdir, f), []byte("junk"), 0o600)
	}
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range leftovers {
		if _, err := os.Stat(filepath.Join(cdir, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("leftover %s still there (%v)", f, err)
		}
	}
	for _, f := range append(unrelated, checkpointName(5)) {
		if _, err := os.Stat(filepath.Join(cdir, f)); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
}

func TestSaveCheckpointRejectsInvalidInput(t *testing.T) {
	w := []float32{1, 2, 3, 4}
	cases := []struct {
		name     string
		step     int64
		tensors  []Tensor
		contexts []ESTContext
		meta     map[string]string
	}{
		{"a negative step", -1, nil, nil, nil},
		{"a shape that does not match the data", 1, []Tensor{{Name: "w", Shape: []int{3}, Data: w}}, nil, nil},
		{"a negative dimension", 1, []Tensor{{Name: "w", Shape: []int{-2, -2}, Data: w}}, nil, nil},
		{"a shape whose product overflows", 1, []Tensor{{Name: "w", Shape: []int{1 << 40, 1 << 40, 1 << 40}, Data: w}}, nil, nil},
		{"an empty tensor name", 1, []Tensor{{Shape: []int{4}, Data: w}}, nil, nil},
		{"a duplicated tensor name", 1, []Tensor{{Name: "w", Shape: []int{4}, Data: w}, {Name: "w", Shape: []int{4}, Data: w}}, nil, nil},
		{"a reserved metadata key", 1, nil, nil, map[string]string{"easyscale.step": "9"}},
		{"two contexts for one EST", 1, nil, []ESTContext{{EST: 1}, {EST: 1}}, nil},
		{"a negative EST", 1, nil, []ESTContext{{EST: -1}}, nil},
	}
	db := openTest(t, Options{})
	for _, c := range cases {
		t.Run(c.name+" is rejected", func(t *testing.T) {
			if err := db.SaveCheckpoint(c.step, c.tensors, c.contexts, c.meta); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if cp, _, _ := db.LatestCheckpoint(); cp != nil {
		t.Fatalf("an invalid checkpoint was stored: %v", cp.Step)
	}
	files, _ := os.ReadDir(filepath.Join(db.Dir(), CheckpointDir))
	if len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

func TestCheckpointOfLargeTensorsRoundTrips(t *testing.T) {
	db := openTest(t, Options{})
	var ts []Tensor
	for i := range 3 {
		ts = append(ts, Tensor{Name: fmt.Sprintf("layer%d", i), Shape: []int{256, 256}, Data: make([]float32, 256*256)})
		for j := range ts[i].Data {
			ts[i].Data[j] = float32(j) * float32(i+1) / 7
		}
	}
	if err := db.SaveCheckpoint(100, ts, nil, nil); err != nil {
		t.Fatal(err)
	}
	cp, _, err := db.LatestCheckpoint()
	if err != nil || cp == nil {
		t.Fatal(err)
	}
	for i := range ts {
		if !bitsEqual(cp.Tensors[i].Data, ts[i].Data) {
			t.Fatalf("tensor %d differs", i)
		}
	}
}
