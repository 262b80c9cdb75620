package statedb

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/safetensors"
)

// Tensor is one named float32 tensor of a checkpoint, row-major.
// len(Data) must equal the product of Shape (1 for an empty Shape, a scalar).
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// Keys of the safetensors "__metadata__" map that statedb writes itself;
// callers' meta keys must not start with ReservedMetaPrefix.
const (
	ReservedMetaPrefix = "easyscale."
	metaStep           = ReservedMetaPrefix + "step"  // decimal step number
	metaOrder          = ReservedMetaPrefix + "order" // JSON array of tensor names in caller order
	// MetaEngine names the engine that encoded a checkpoint file itself
	// (SaveCheckpointFile); files without it are the native engine's float32
	// checkpoints written by SaveCheckpoint.
	MetaEngine = ReservedMetaPrefix + "engine"
)

func validateTensors(tensors []Tensor) error {
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		if t.Name == "" {
			return invalidf("tensor %d has an empty name", i)
		}
		if seen[t.Name] {
			return invalidf("tensor name %q appears twice", t.Name)
		}
		seen[t.Name] = true
		n, err := elements(t.Shape, len(t.Data))
		if err != nil {
			return invalidf("tensor %q: %v", t.Name, err)
		}
		if n != len(t.Data) {
			return invalidf("tensor %q has shape %v (%d elements) but %d values", t.Name, t.Shape, n, len(t.Data))
		}
	}
	return nil
}

// elements multiplies the dimensions of shape, failing on negative
// dimensions and on products beyond limit (so it cannot overflow).
func elements(shape []int, limit int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && n > limit/d {
			return limit + 1, nil
		}
		n *= d
	}
	return n, nil
}

func validateMeta(meta map[string]string) error {
	for k := range meta {
		if strings.HasPrefix(k, ReservedMetaPrefix) {
			return invalidf("metadata key %q uses the reserved prefix %q", k, ReservedMetaPrefix)
		}
	}
	return nil
}

// f32View adapts a Tensor to safetensors.View; Data encodes little-endian
// on demand so that only one tensor's bytes exist at a time while writing.
type f32View struct{ t Tensor }

var _ safetensors.View = f32View{}

func (v f32View) DType() safetensors.DType { return safetensors.F32 }
func (v f32View) DataLen() uint64          { return uint64(4 * len(v.t.Data)) }

func (v f32View) Shape() []uint64 {
	s := make([]uint64, len(v.t.Shape))
	for i, d := range v.t.Shape {
		s[i] = uint64(d)
	}
	return s
}

func (v f32View) Data() []byte {
	b := make([]byte, 4*len(v.t.Data))
	for i, f := range v.t.Data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// encodeCheckpoint writes a safetensors file (dtype F32) holding tensors,
// with meta plus the step and the caller's tensor order in "__metadata__".
// Inputs must have passed validateTensors and validateMeta.
func encodeCheckpoint(w io.Writer, step int64, tensors []Tensor, meta map[string]string) error {
	views := make(map[string]f32View, len(tensors))
	order := make([]string, len(tensors))
	for i, t := range tensors {
		views[t.Name] = f32View{t}
		order[i] = t.Name
	}
	orderJSON, err := json.Marshal(order)
	if err != nil {
		return fmt.Errorf("encoding tensor order: %w", err)
	}
	all := make(map[string]string, len(meta)+2)
	for k, v := range meta {
		all[k] = v
	}
	all[metaStep] = strconv.FormatInt(step, 10)
	all[metaOrder] = string(orderJSON)
	if err := safetensors.SerializeToWriter(views, all, w); err != nil {
		return fmt.Errorf("writing safetensors: %w", err)
	}
	return nil
}

// decodeCheckpoint parses a file written by encodeCheckpoint. It never
// panics and allocates at most a small multiple of len(b): the header length
// is checked against len(b) before the JSON is parsed, and every tensor's
// extent against the data section.
func decodeCheckpoint(b []byte) (step int64, tensors []Tensor, meta map[string]string, err error) {
	n, md, err := safetensors.ReadMetadata(b)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading safetensors header: %w", err)
	}
	data := b[8+n:]
	meta = make(map[string]string)
	for k, v := range md.Metadata() {
		meta[k] = v
	}
	step, err = strconv.ParseInt(meta[metaStep], 10, 64)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading %q from safetensors metadata: %w", metaStep, err)
	}
	infos := md.Tensors()
	names, err := tensorOrder(meta[metaOrder], infos)
	if err != nil {
		return 0, nil, nil, err
	}
	delete(meta, metaStep)
	delete(meta, metaOrder)
	tensors = make([]Tensor, len(names))
	for i, name := range names {
		if tensors[i], err = decodeTensor(name, infos[name], data); err != nil {
			return 0, nil, nil, err
		}
	}
	return step, tensors, meta, nil
}

// checkFileHeader checks that b is a safetensors file (any dtype) whose
// metadata names its engine and holds step; it returns the metadata. It
// reads the header only.
func checkFileHeader(b []byte, step int64) (map[string]string, error) {
	n, md, err := safetensors.ReadMetadata(b)
	if err != nil {
		return nil, fmt.Errorf("reading safetensors header: %w", err)
	}
	for name, info := range md.Tensors() {
		if s, e := info.DataOffsets[0], info.DataOffsets[1]; s > e || e > uint64(len(b))-8-uint64(n) {
			return nil, fmt.Errorf("tensor %q has data offsets [%d, %d] outside the data", name, s, e)
		}
	}
	meta := md.Metadata()
	if meta[MetaEngine] == "" {
		return nil, fmt.Errorf("safetensors metadata lacks %q", MetaEngine)
	}
	if got := meta[metaStep]; got != strconv.FormatInt(step, 10) {
		return nil, fmt.Errorf("safetensors metadata %q is %q, want %d", metaStep, got, step)
	}
	return meta, nil
}

// tensorOrder returns the names in the order recorded under metaOrder,
// which must name exactly the tensors of the header.
func tensorOrder(orderJSON string, infos map[string]*safetensors.TensorInfo) ([]string, error) {
	var names []string
	if err := json.Unmarshal([]byte(orderJSON), &names); err != nil {
		return nil, fmt.Errorf("reading %q from safetensors metadata: %w", metaOrder, err)
	}
	if len(names) != len(infos) {
		return nil, fmt.Errorf("%q lists %d tensors, header has %d", metaOrder, len(names), len(infos))
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if _, ok := infos[n]; !ok || seen[n] {
			return nil, fmt.Errorf("%q lists tensor %q twice or not in the header", metaOrder, n)
		}
		seen[n] = true
	}
	return names, nil
}

func decodeTensor(name string, info *safetensors.TensorInfo, data []byte) (Tensor, error) {
	if info.DType != safetensors.F32 {
		return Tensor{}, fmt.Errorf("tensor %q has dtype %s, want F32", name, info.DType)
	}
	start, end := info.DataOffsets[0], info.DataOffsets[1]
	if start > end || end > uint64(len(data)) || (end-start)%4 != 0 {
		return Tensor{}, fmt.Errorf("tensor %q has data offsets [%d, %d] outside %d data bytes", name, start, end, len(data))
	}
	raw := data[start:end]
	shape := make([]int, len(info.Shape))
	for i, d := range info.Shape {
		// Dimensions beyond 2^31-1 cannot describe a tensor we wrote, and
		// bounding them keeps int conversion and elements() overflow-free.
		if d > math.MaxInt32 {
			return Tensor{}, fmt.Errorf("tensor %q has dimension %d out of range", name, d)
		}
		shape[i] = int(d)
	}
	vals := make([]float32, len(raw)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if n, err := elements(shape, len(vals)); err != nil || n != len(vals) {
		return Tensor{}, fmt.Errorf("tensor %q has shape %v but %d values", name, shape, len(vals))
	}
	return Tensor{Name: name, Shape: shape, Data: vals}, nil
}

// sortedContexts returns a copy of contexts ordered by EST, failing on
// negative or repeated EST numbers.
func sortedContexts(contexts []ESTContext) ([]ESTContext, error) {
	out := append([]ESTContext(nil), contexts...)
	sort.Slice(out, func(i, j int) bool { return out[i].EST < out[j].EST })
	for i, c := range out {
		if c.EST < 0 {
			return nil, invalidf("EST context with negative EST %d", c.EST)
		}
		if i > 0 && out[i-1].EST == c.EST {
			return nil, invalidf("two contexts for EST %d", c.EST)
		}
	}
	return out, nil
}
