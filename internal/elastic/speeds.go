package elastic

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxSpeed bounds a per-type speed (relative to the reference GPU type,
// 1.0), as the backfill configuration's [speeds] table does.
const MaxSpeed = 100

// maxSpeedTypes bounds how many GPU types one speeds= field may list.
const maxSpeedTypes = 32

// ErrBadSpeeds is wrapped by every error of [ParseSpeeds].
var ErrBadSpeeds = errors.New("bad per-type speeds")

// ParseSpeeds parses a job's own throughput per GPU type, relative to the
// reference type, in the form the job comment's speeds= field and the trace
// column speeds use:
//
//	v100:1,t4:0.4,a100:2.1
//
// Each entry is TYPE:SPEED; a type is a GRES type name (letters, digits,
// '_', '-', '.', at most 64 bytes) listed once; a speed is a decimal number
// in (0, MaxSpeed]; at most 32 entries. The empty string gives nil (the job
// does not say: the site's speed table applies). Errors wrap ErrBadSpeeds
// and name the entry.
func ParseSpeeds(s string) (map[string]float64, error) {
	if s == "" {
		return nil, nil
	}
	entries := strings.Split(s, ",")
	if len(entries) > maxSpeedTypes {
		return nil, fmt.Errorf("%w: %d types, at most %d", ErrBadSpeeds, len(entries), maxSpeedTypes)
	}
	out := make(map[string]float64, len(entries))
	for _, e := range entries {
		typ, val, ok := strings.Cut(e, ":")
		if !ok || !gresType(typ) {
			return nil, fmt.Errorf("%w: entry %q: want TYPE:SPEED with a GRES type name, e.g. v100:1", ErrBadSpeeds, e)
		}
		if _, dup := out[typ]; dup {
			return nil, fmt.Errorf("%w: type %q listed twice", ErrBadSpeeds, typ)
		}
		if strings.TrimLeft(val, "0123456789.") != "" || len(val) > 16 {
			return nil, fmt.Errorf("%w: entry %q: speed %q is not a plain decimal number", ErrBadSpeeds, e, val)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || !(v > 0 && v <= MaxSpeed) || math.IsNaN(v) {
			return nil, fmt.Errorf("%w: entry %q: speed must be > 0 and ≤ %d (the reference type is 1)", ErrBadSpeeds, e, MaxSpeed)
		}
		out[typ] = v
	}
	return out, nil
}

// FormatSpeeds writes speeds in the canonical form ParseSpeeds reads: types
// sorted, shortest decimal that parses back to the same float64. nil or
// empty gives "".
func FormatSpeeds(speeds map[string]float64) string {
	var b strings.Builder
	for i, t := range slices.Sorted(maps.Keys(speeds)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(speeds[t], 'f', -1, 64))
	}
	return b.String()
}

// gresType reports whether t is a plausible GRES type name.
func gresType(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
