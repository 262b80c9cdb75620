package slurmcli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxHosts bounds what [ExpandHostlist] produces, so a hostile range such as
// "n[0-999999999]" cannot exhaust memory.
const MaxHosts = 65536

// ErrHostlist is wrapped by every [ExpandHostlist] error.
var ErrHostlist = errors.New("bad Slurm hostlist")

// ExpandHostlist expands a Slurm hostlist as squeue and sinfo print it
// (NodeList, SchedNodes, ReqNodes, ExcNodes: "n[1-3,7],gpu[01-02]x,login")
// into node names, in order. Zero padding of a range's start is kept
// ("gpu[08-10]" gives gpu08 gpu09 gpu10). One bracket group per name is
// supported, which is what Slurm prints for one-dimensional node names
// (slurm.conf(5), "NodeName" ranges; hostlist_expand in Slurm's
// src/common/hostlist.c). "", "(null)" and "None assigned" give none.
// Errors wrap [ErrHostlist] and quote the list: an empty name, brackets
// that do not form one [..] group, a range that is not N or N-M with
// N ≤ M (at most 9 digits), or more than [MaxHosts] names.
func ExpandHostlist(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "(null)" || list == "None assigned" {
		return nil, nil
	}
	var out []string
	for _, item := range splitHostlist(list) {
		if item == "" {
			return nil, fmt.Errorf("%w %q: empty name", ErrHostlist, list)
		}
		names, err := expandItem(item, MaxHosts-len(out))
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrHostlist, list, err)
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
			return nil, fmt.Errorf("more than %d names", MaxHosts)
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
	if !Digits(a) || !Digits(b) {
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

// Digits reports whether s is 1 to 9 decimal digits: a number that fits
// an int on every platform, as a hostlist bound, a time field, a job id or
// a Unix group id the daemon writes or compares must be.
func Digits(s string) bool {
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
