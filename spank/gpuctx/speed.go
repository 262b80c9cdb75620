package gpuctx

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// SpeedTable maps a model key to its speed relative to a V100 (1.0). A key
// matches a GPU whose NVML name contains it, ignoring case; the longest
// matching key wins ("H100 PCIe" before "H100").
type SpeedTable map[string]float64

// DefaultSpeeds is the built-in table: peak dense FP32 throughput (vendor
// data sheets, TFLOPS, SXM parts unless named) divided by the V100's 15.7.
// It is a coarse prior for EST placement; override it with measured values
// (--speeds or EASYSCALE_GPU_SPEEDS).
var DefaultSpeeds = SpeedTable{
	"P100":      0.68, // 10.6 TFLOPS
	"V100":      1.00, // 15.7
	"T4":        0.52, // 8.1
	"A30":       0.66, // 10.3
	"A100":      1.24, // 19.5
	"H100 PCIe": 3.25, // 51
	"H100":      4.27, // 67
	"H200":      4.27, // 67
}

// UnknownSpeed is reported for a model no key matches.
const UnknownSpeed = 1.0

// Lookup returns the speed of the model and whether a key matched.
func (t SpeedTable) Lookup(model string) (float64, bool) {
	best, speed := "", UnknownSpeed
	upper := strings.ToUpper(model)
	for k, v := range t {
		if strings.Contains(upper, strings.ToUpper(k)) && len(k) > len(best) {
			best, speed = k, v
		}
	}
	return speed, best != ""
}

// With returns a copy of t with the entries of o added or replaced.
func (t SpeedTable) With(o SpeedTable) SpeedTable {
	out := SpeedTable{}
	for k, v := range t {
		out[k] = v
	}
	for k, v := range o {
		out[k] = v
	}
	return out
}

// String renders the table as ParseSpeeds reads it, keys sorted.
func (t SpeedTable) String() string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatFloat(t[k], 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// SpeedError reports a bad entry of a speed list.
type SpeedError struct {
	Entry string
	Err   error
}

// Error names the entry.
func (e *SpeedError) Error() string { return fmt.Sprintf("speed entry %q: %v", e.Entry, e.Err) }

// Unwrap returns the cause.
func (e *SpeedError) Unwrap() error { return e.Err }

// ParseSpeeds parses "MODEL=SPEED[,MODEL=SPEED…]" (e.g. "A100=1.3,T4=0.5");
// spaces around keys and values are trimmed, the model key must be
// non-empty and the speed a finite number in (0, 1000]. An empty string
// gives an empty table. Errors are *SpeedError.
func ParseSpeeds(s string) (SpeedTable, error) {
	t := SpeedTable{}
	if strings.TrimSpace(s) == "" {
		return t, nil
	}
	for _, e := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(e, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsAny(k, "=") {
			return nil, &SpeedError{Entry: e, Err: fmt.Errorf("want MODEL=SPEED")}
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1000) {
			return nil, &SpeedError{Entry: e, Err: fmt.Errorf("speed %q is not a number in (0, 1000]", v)}
		}
		t[k] = f
	}
	return t, nil
}
