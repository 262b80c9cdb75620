package statedb

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/nlpodyssey/safetensors"
)

// rawView is one tensor of any dtype for safetensors.Serialize.
type rawView struct {
	dtype safetensors.DType
	shape []uint64
	data  []byte
}

func (v rawView) DType() safetensors.DType { return v.dtype }
func (v rawView) Shape() []uint64          { return v.shape }
func (v rawView) Data() []byte             { return v.data }
func (v rawView) DataLen() uint64          { return uint64(len(v.data)) }

// engineFile is a torch-engine-like checkpoint file: bf16 and int64 tensors.
func engineFile(t *testing.T, step int64, fill byte) []byte {
	t.Helper()
	views := map[string]rawView{
		"model.w":          {safetensors.BF16, []uint64{2, 2}, bytes.Repeat([]byte{fill}, 8)},
		"optimizer.0.step": {safetensors.I64, []uint64{}, []byte{byte(step), 0, 0, 0, 0, 0, 0, 0}},
	}
	var buf bytes.Buffer
	meta := map[string]string{MetaEngine: "torch", metaStep: strconv.FormatInt(step, 10)}
	if err := safetensors.SerializeToWriter(views, meta, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEngineFileCheckpointsRoundTripAndFallBack(t *testing.T) {
	db := openTest(t, Options{})
	ctx := func(step int64) []ESTContext {
		return []ESTContext{{EST: 1, Blob: []byte("lw1@" + strconv.FormatInt(step, 10))}, {EST: 0, Blob: []byte("lw0")}}
	}
	for _, step := range []int64{4, 8} {
		if err := db.SaveCheckpointFile(step, engineFile(t, step, byte(step)), ctx(step)); err != nil {
			t.Fatal(err)
		}
	}
	cp, skipped, err := db.LatestCheckpoint()
	if err != nil || len(skipped) != 0 {
		t.Fatalf("LatestCheckpoint: %v, skipped %v", err, skipped)
	}
	if cp.Step != 8 || !bytes.Equal(cp.Raw, engineFile(t, 8, 8)) || cp.Meta[MetaEngine] != "torch" || len(cp.Tensors) != 0 {
		t.Fatalf("checkpoint step %d meta %v raw %d bytes tensors %d: want step 8's file as written", cp.Step, cp.Meta, len(cp.Raw), len(cp.Tensors))
	}
	if len(cp.Contexts) != 2 || cp.Contexts[0].EST != 0 || string(cp.Contexts[1].Blob) != "lw1@8" {
		t.Fatalf("contexts %+v: want EST 0 and 1 in order, as saved", cp.Contexts)
	}
	// One flipped byte in the newest file: the previous one is used, the skip reported.
	b, err := os.ReadFile(cp.Path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(cp.Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cp, skipped, err = db.LatestCheckpoint()
	if err != nil || cp.Step != 4 || len(skipped) != 1 || !errors.Is(skipped[0], ErrChecksumMismatch) {
		t.Fatalf("after corrupting step 8: step %v, skipped %v, err %v; want step 4 and one checksum skip", cp, skipped, err)
	}
}

func TestEngineFileCheckpointRefusesFilesItCannotIdentify(t *testing.T) {
	db := openTest(t, Options{})
	native := new(bytes.Buffer)
	if err := encodeCheckpoint(native, 3, stepTensors(3, 2), nil); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		step int64
		data []byte
	}{
		"not safetensors":           {3, []byte("hello")},
		"no engine in the metadata": {3, native.Bytes()},
		"metadata of another step":  {4, engineFile(t, 3, 1)},
		"a truncated data section":  {3, engineFile(t, 3, 1)[:60]},
		"a negative step":           {-1, engineFile(t, 3, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			if err := db.SaveCheckpointFile(c.step, c.data, nil); !errors.Is(err, ErrInvalid) {
				t.Fatalf("SaveCheckpointFile: %v, want ErrInvalid", err)
			}
		})
	}
	if cp, _, err := db.LatestCheckpoint(); cp != nil || err != nil {
		t.Fatalf("after refusals LatestCheckpoint: %v, %v; want no checkpoint", cp, err)
	}
}
