package gpuctx

import (
	"strconv"
	"strings"
)

// DeviceRef is one entry of CUDA_VISIBLE_DEVICES: an ordinal among the
// visible GPUs, or a UUID (prefix).
type DeviceRef struct {
	Ordinal int    // >= 0 when UUID is empty
	UUID    string // "GPU-…" (possibly a prefix), or ""
}

// ParseVisibleDevices parses a CUDA_VISIBLE_DEVICES value the way CUDA
// does: entries are separated by commas, surrounding spaces are ignored, and
// the list ends (silently) at the first entry that is neither a decimal
// ordinal nor a GPU- UUID, or that repeats an earlier one. It never fails;
// Slurm's "NoDevFiles" yields an empty list.
func ParseVisibleDevices(s string) []DeviceRef {
	var refs []DeviceRef
	seen := map[DeviceRef]bool{}
	for _, f := range strings.Split(s, ",") {
		ref, ok := parseRef(strings.TrimSpace(f))
		if !ok || seen[ref] {
			break
		}
		seen[ref] = true
		refs = append(refs, ref)
	}
	return refs
}

func parseRef(f string) (DeviceRef, bool) {
	if strings.HasPrefix(f, "GPU-") && len(f) > len("GPU-") {
		return DeviceRef{Ordinal: -1, UUID: f}, true
	}
	if f == "" || len(f) > 4 || strings.TrimLeft(f, "0123456789") != "" {
		return DeviceRef{}, false
	}
	n, err := strconv.Atoi(f)
	return DeviceRef{Ordinal: n}, err == nil
}
