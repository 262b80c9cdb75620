package slurmcli

import (
	"errors"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // names joined with a space; "ERR" for an error
	}{
		{"an empty list has no names", "", ""},
		{"a single name stays itself", "n1", "n1"},
		{"a range expands in order", "n[1-3]", "n1 n2 n3"},
		{"ranges and singles mix inside brackets", "n[1-2,7]", "n1 n2 n7"},
		{"zero padding of the start is kept", "gpu[08-10]", "gpu08 gpu09 gpu10"},
		{"a suffix after the brackets is kept", "r[1-2]a", "r1a r2a"},
		{"top-level commas separate groups", "n[1-2],login,g[3]", "n1 n2 login g3"},
		{"(null) has no names", "(null)", ""},
		{"a reversed range is an error", "n[3-1]", "ERR"},
		{"a non-numeric range is an error", "n[a-b]", "ERR"},
		{"an unclosed bracket is an error", "n[1-2", "ERR"},
		{"a stray closing bracket is an error", "n1]", "ERR"},
		{"two bracket groups in one name are an error", "r[1-2]n[1-2]", "ERR"},
		{"an empty name between commas is an error", "n1,,n2", "ERR"},
		{"a huge range is an error, not an allocation", "n[0-999999999]", "ERR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExpandHostlist(tc.in)
			if tc.want == "ERR" {
				if !errors.Is(err, ErrHostlist) {
					t.Fatalf("ExpandHostlist(%q) = %v, %v; want an error wrapping ErrHostlist", tc.in, got, err)
				}
				return
			}
			if err != nil || strings.Join(got, " ") != tc.want {
				t.Fatalf("ExpandHostlist(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"n[1-3,7]", "gpu[08-10]x,login", "a[1]b[2]", "n[0-65535]", "x[-]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err != nil {
			return
		}
		if len(names) > MaxHosts {
			t.Fatalf("%q gave %d names, over the cap", s, len(names))
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "[],") {
				t.Fatalf("%q gave the name %q", s, n)
			}
		}
	})
}
