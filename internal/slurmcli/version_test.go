package slurmcli

import (
	"strings"
	"testing"
)

func TestParseSeries(t *testing.T) {
	for _, tc := range []struct {
		out, want string
	}{
		{"slurm 24.11.5\n", "24.11"},
		{"slurm-wlm 22.05.8\n", "22.05"},
		{"slurm 25.05.0-0rc1\n", "25.05"},
		{"", ""},
		{"slurm\n", ""},
		{"slurm 24\n", ""},
		{"slurm .11.5\n", ""},
		{"torque 24.11.5\n", ""},
		{"slurm 24.11.5 extra\n", ""},
	} {
		got, err := ParseSeries([]byte(tc.out))
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("ParseSeries(%q) = %q, %v; want %q", tc.out, got, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "scontrol --version") {
			t.Errorf("ParseSeries(%q): error %q does not name the command", tc.out, err)
		}
	}
}

func FuzzParseSeries(f *testing.F) {
	f.Add("slurm 24.11.5\n")
	f.Add("slurm-wlm 22.05.8")
	f.Fuzz(func(t *testing.T, out string) {
		s, err := ParseSeries([]byte(out))
		if err != nil {
			return
		}
		major, minor, ok := strings.Cut(s, ".")
		if !ok || major == "" || minor == "" || strings.ContainsAny(s, " \t\n") {
			t.Fatalf("ParseSeries(%q) = %q, want X.Y", out, s)
		}
	})
}
