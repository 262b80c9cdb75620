// Package gpuspeed is the project's one table of GPU speed priors: the
// speed of each GPU model relative to a V100, which the runtime's
// logical-worker placement reads from easyscale-gpuctx (keyed by the NVML
// model name) and the backfill planner uses per GRES type (GRESTypes). It
// imports nothing GPU-specific, so the daemon can use it without go-nvml.
package gpuspeed

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Table maps a model key to its speed relative to a V100 (1.0). A key
// matches a GPU whose NVML name contains it, ignoring case; the longest
// matching key wins ("H100 PCIe" before "H100").
type Table map[string]float64

// Default is the built-in table: peak dense FP32 throughput (vendor
// data sheets, TFLOPS, SXM parts unless named) divided by the V100's 15.7.
// It is a coarse prior for EST placement; override it with measured values
// (--speeds or EASYSCALE_GPU_SPEEDS).
var Default = Table{
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
func (t Table) Lookup(model string) (float64, bool) {
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
func (t Table) With(o Table) Table {
	out := Table{}
	for k, v := range t {
		out[k] = v
	}
	for k, v := range o {
		out[k] = v
	}
	return out
}

// String renders the table as ParseSpeeds reads it, keys sorted.
func (t Table) String() string {
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

// Error reports a bad entry of a speed list.
type Error struct {
	Entry string
	Err   error
}

// Error names the entry.
func (e *Error) Error() string { return fmt.Sprintf("speed entry %q: %v", e.Entry, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Parse parses "MODEL=SPEED[,MODEL=SPEED…]" (e.g. "A100=1.3,T4=0.5");
// spaces around keys and values are trimmed, the model key must be
// non-empty and the speed a finite number in (0, 1000]. An empty string
// gives an empty table. Errors are *Error.
func Parse(s string) (Table, error) {
	t := Table{}
	if strings.TrimSpace(s) == "" {
		return t, nil
	}
	for _, e := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(e, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsAny(k, "=") {
			return nil, &Error{Entry: e, Err: fmt.Errorf("want MODEL=SPEED, MODEL the GPU's model name as NVML and nvidia-smi -L print it " +
				"(e.g. \"Tesla T4=0.52\"; easyscale-sbatch and easyscale-simulate take GRES types, TYPE:SPEED)")}
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1000) {
			return nil, &Error{Entry: e, Err: fmt.Errorf("speed %q is not a number in (0, 1000]", v)}
		}
		t[k] = f
	}
	return t, nil
}

// GRESTypes returns Default keyed by GRES type name: each model key in
// lower case ("V100" -> "v100"), leaving out keys with a space, which no
// GRES type name can spell ("H100 PCIe"). The backfill daemon's [speeds]
// defaults are these.
func GRESTypes() map[string]float64 {
	out := map[string]float64{}
	for model, speed := range Default {
		if !strings.Contains(model, " ") {
			out[strings.ToLower(model)] = speed
		}
	}
	return out
}
