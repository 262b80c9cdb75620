package slurmcli

import (
	"testing"
	"time"
)

func TestParseSlurmdTimeout(t *testing.T) {
	for _, c := range []struct {
		out  string
		want time.Duration
		ok   bool
	}{
		{"SlurmctldTimeout        = 120 sec\nSlurmdTimeout           = 30 sec\n", 30 * time.Second, true},
		{"SlurmdTimeout = 300 sec", 300 * time.Second, true},
		{"SlurmctldTimeout        = 120 sec\n", 0, false},
		{"SlurmdTimeout           = 0 sec\n", 0, false},
		{"SlurmdTimeout           = 99999999999999999999 sec\n", 0, false},
	} {
		got, err := ParseSlurmdTimeout([]byte(c.out))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSlurmdTimeout(%q) = %v, %v; want %v, ok %v", c.out, got, err, c.want, c.ok)
		}
	}
}
