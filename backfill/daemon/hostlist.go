package daemon

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxHosts bounds what expandHostlist produces, so a hostile range such as
// "n[0-999999999]" cannot exhaust memory.
const maxHosts = 65536

// errHostlist is wrapped by every expandHostlist error.
var errHostlist = errors.New("bad Slurm hostlist")

// expandHostlist expands a Slurm hostlist as squeue and sinfo print it
// ("n[1-3,7],gpu[01-02]x,login") into names, in order. Zero padding of a
// range's start is kept ("gpu[08-10]" gives gpu08 gpu09 gpu10). One bracket
// group per name is supported, which is what Slurm prints for one-dimensional
// node names (slurm.conf(5), "NodeName" ranges). "" and "(null)" give none.
func expandHostlist(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "(null)" || list == "None assigned" {
		return nil, nil
	}
	var out []string
	for _, item := range splitHostlist(list) {
		if item == "" {
			return nil, fmt.Errorf("%w %q: empty name", errHostlist, list)
		}
		names, err := expandItem(item, maxHosts-len(out))
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", errHostlist, list, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitHostlist splits on commas outside brackets.
func splitHostlist(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func expandItem(item string, room int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("unbalanced ']' in %q", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item, ']')
	if end < open || strings.ContainsAny(item[end+1:], "[]") || strings.Contains(item[open+1:end], "[") {
		return nil, fmt.Errorf("brackets of %q do not form one [..] group", item)
	}
	prefix, suffix := item[:open], item[end+1:]
	var out []string
	for _, r := range strings.Split(item[open+1:end], ",") {
		lo, hi, width, err := parseRange(r)
		if err != nil {
			return nil, err
		}
		if hi-lo >= room-len(out) {
			return nil, fmt.Errorf("more than %d names", maxHosts)
		}
		for n := lo; n <= hi; n++ {
			out = append(out, fmt.Sprintf("%s%0*d%s", prefix, width, n, suffix))
		}
	}
	return out, nil
}

// parseRange parses "7" or "08-10" into bounds and the zero-padded width.
func parseRange(r string) (lo, hi, width int, err error) {
	a, b, isRange := strings.Cut(r, "-")
	if !isRange {
		b = a
	}
	if !digits(a) || !digits(b) {
		return 0, 0, 0, fmt.Errorf("range %q is not N or N-M", r)
	}
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || hi < lo {
		return 0, 0, 0, fmt.Errorf("range %q is not N or N-M with N ≤ M", r)
	}
	width = 0
	if len(a) > 1 && a[0] == '0' {
		width = len(a)
	}
	return lo, hi, width, nil
}

func digits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
