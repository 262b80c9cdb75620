package cluster

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"0", []int{0}, ""},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, ""},
		{" 3, 1-2 ,2", []int{1, 2, 3}, ""},
		{"5-5", []int{5}, ""},
		{"", nil, "empty"},
		{"1,,2", nil, `"": want a CPU number`},
		{"a", nil, `"a": want a CPU number`},
		{"-1", nil, `"-1": want a CPU number`},
		{"+1", nil, `"+1": want a CPU number`},
		{"3-1", nil, "ends below its start"},
		{"0-8192", nil, "between 0 and 8191"},
		{"1-2-3", nil, "want a CPU number"},
	}
	for _, c := range cases {
		got, err := ParseCPUList(c.in)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("ParseCPUList(%q): %v", c.in, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("ParseCPUList(%q) error %v, want one containing %q", c.in, err, c.wantErr)
		case c.wantErr == "" && !slices.Equal(got, c.want):
			t.Errorf("ParseCPUList(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestFormatCPUListRunsAsRanges(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0,1,2,5": "0-2,5", "7,9,10,11,13": "7,9-11,13"} {
		cpus, err := ParseCPUList(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatCPUList(cpus); got != want {
			t.Errorf("FormatCPUList(%v) = %q, want %q", cpus, got, want)
		}
	}
}

// FuzzParseCPUList: any input parses without panicking, and what parses
// formats to a list that parses back to the same CPUs.
func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0", "0-3,8", "1,,2", "3-1", " 2 ", "0-8191"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		again, err := ParseCPUList(FormatCPUList(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("%q parsed to %v, formatted to %q, parsed back to %v (%v)", s, cpus, FormatCPUList(cpus), again, err)
		}
	})
}
