package slurmlab

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReplacePIDRewritesOnlyThatDaemonsLine(t *testing.T) {
	tests := []struct {
		name, before, want string
	}{
		{"the node's line gets the new PID", "munged 10\nslurmd-n1 11\nslurmd-n3 13\n", "munged 10\nslurmd-n1 11\nslurmd-n3 99\n"},
		{"a missing line is appended", "munged 10\n", "munged 10\nslurmd-n3 99\n"},
		{"a name that only starts alike is left alone", "slurmd-n30 30\nslurmd-n3 13\n", "slurmd-n30 30\nslurmd-n3 99\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lab.pids")
			if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := replacePID(path, "slurmd-n3", 99); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.want {
				t.Fatalf("lab.pids:\n%s\nwant:\n%s", b, tc.want)
			}
		})
	}
}
