package slurmcli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// GRES is one generic-resource entry, e.g. the "gpu:v100:2(IDX:0-1)" of sinfo's
// GresUsed. Name is the GRES name ("gpu"), Type its type or "" when untyped, Count the
// number of units, Detail the parenthesised suffix without parentheses ("IDX:0-1",
// "S:0") or "".
type GRES struct {
	Name   string `json:"name"`
	Type   string `json:"type,omitempty"`
	Count  int    `json:"count"`
	Detail string `json:"detail,omitempty"`
}

// ErrBadCount reports a GRES count that is not a non-negative decimal integer
// of at most MaxCount.
var ErrBadCount = errors.New("count is not a non-negative integer up to 2^30")

// MaxCount is the largest GRES count read (2^30): no node or job has more of
// anything, and sums and products of counts (GPUs per node times nodes) then
// stay far inside an int. A user can set any count on a held job (scontrol
// update Gres=gpu:4611686018427387904,gpu:4611686018427387904 was accepted
// by 22.05, found by a tester); summed, such counts wrapped to a negative
// GPU count that failed the daemon's whole plan.
const MaxCount = 1 << 30

// ParseGRES parses a comma-separated GRES or TRES list in any of the spellings
// Slurm 22.05 and 24.11 print:
//
//	gres:gpu:v100:2          squeue tres-per-node, scontrol TresPerNode/TresPerJob (22.05)
//	gres/gpu:v100:2          the same in 24.11 (testdata/slurm-24.11)
//	gres:gpu:3               the same without a type
//	gpu:t4:4(S:0)            sinfo Gres
//	gpu:v100:3(IDX:0-2)      sinfo GresUsed
//	cpu=1,node=1,gres/gpu=3  scontrol TRES, CfgTRES, AllocTRES (non-GRES entries are skipped)
//
// An entry without a count ("gpu:v100") counts 1, as in Slurm's --gres syntax. The
// empty string, "(null)" and "N/A" give no entries. Errors are *ParseError with Source
// "gres" and the offending entry as Field.
func ParseGRES(list string) ([]GRES, error) {
	list = optional(strings.TrimSpace(list))
	if list == "" {
		return nil, nil
	}
	var out []GRES
	for _, item := range splitTopLevel(list) {
		g, ok, err := parseGRESItem(strings.TrimSpace(item))
		if err != nil {
			return nil, &ParseError{Source: "gres", Field: item, Err: err}
		}
		if ok {
			out = append(out, g)
		}
	}
	return out, nil
}

// splitTopLevel splits on commas outside parentheses ("gpu:a:2(IDX:0,2),mps:4").
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth <= 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// parseGRESItem parses one entry; ok is false for a TRES entry that is not a GRES.
func parseGRESItem(item string) (g GRES, ok bool, err error) {
	if item == "" {
		return GRES{}, false, errors.New("empty entry")
	}
	if key, val, isTRES := strings.Cut(item, "="); isTRES {
		name, found := strings.CutPrefix(key, "gres/")
		if !found {
			return GRES{}, false, nil // cpu=4, mem=16000M, node=1, billing=4
		}
		n, err := parseCount(val)
		if err != nil {
			return GRES{}, false, err
		}
		g.Name, g.Type, _ = strings.Cut(name, ":")
		g.Count = n
		return g, true, checkNames(g)
	}
	if open := strings.IndexByte(item, '('); open >= 0 {
		if !strings.HasSuffix(item, ")") {
			return GRES{}, false, errors.New("unbalanced parenthesis")
		}
		g.Detail = item[open+1 : len(item)-1]
		item = item[:open]
	}
	// "gres:gpu:2" in 22.05, "gres/gpu:2" in 24.11 (squeue tres-per-node, TresPerNode)
	if rest, found := strings.CutPrefix(item, "gres:"); found {
		item = rest
	} else {
		item = strings.TrimPrefix(item, "gres/")
	}
	parts := strings.Split(item, ":")
	if parts[0] == "" || len(parts) > 3 {
		return GRES{}, false, fmt.Errorf("want name[:type][:count], got %q", item)
	}
	g.Name, g.Count = parts[0], 1
	rest := parts[1:]
	if len(rest) > 0 && isDigits(rest[len(rest)-1]) {
		n, err := parseCount(rest[len(rest)-1])
		if err != nil {
			return GRES{}, false, err
		}
		g.Count = n
		rest = rest[:len(rest)-1]
	}
	switch len(rest) {
	case 0:
	case 1:
		g.Type = rest[0]
	default:
		return GRES{}, false, fmt.Errorf("count %q: %w", rest[len(rest)-1], ErrBadCount)
	}
	return g, true, checkNames(g)
}

// checkNames accepts GRES names and types made of letters, digits, '_', '.' and '-'
// (what gres.conf allows in practice: gpu, mps, shard, a100, a100_3g.20gb).
func checkNames(g GRES) error {
	for _, s := range []string{g.Name, g.Type} {
		for _, c := range s {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
			if !ok {
				return fmt.Errorf("bad character %q in GRES name or type %q", c, s)
			}
		}
	}
	if g.Name == "" {
		return errors.New("empty GRES name")
	}
	return nil
}

// String prints the entry in squeue's spelling, "gres:name[:type]:count[(detail)]",
// which ParseGRES reads back to the same entry (the "gres:" prefix keeps a GRES that
// is itself named "gres" unambiguous).
func (g GRES) String() string {
	s := "gres:" + g.Name
	if g.Type != "" {
		s += ":" + g.Type
	}
	s += ":" + strconv.Itoa(g.Count)
	if g.Detail != "" {
		s += "(" + g.Detail + ")"
	}
	return s
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func parseCount(s string) (int, error) {
	if !isDigits(s) {
		return 0, fmt.Errorf("%q: %w", s, ErrBadCount)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxCount {
		return 0, fmt.Errorf("%q: %w", s, ErrBadCount)
	}
	return n, nil
}

// GPUs sums the Count of the entries named "gpu" (all types together).
func GPUs(list []GRES) int {
	n := 0
	for _, g := range list {
		if g.Name == "gpu" {
			n += g.Count
		}
	}
	return n
}
