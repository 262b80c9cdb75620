package slurmlab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSkipReasonWhenTheLabWasAskedFor(t *testing.T) {
	tests := []struct {
		name                string
		ci, root, installed bool
		want                string // a fragment of the reason; "" to run
	}{
		{"root with Slurm installed runs the lab", false, true, true, ""},
		{"root under CI runs the lab even before Slurm is installed (lab-up installs it)", true, true, false, ""},
		{"a user who is not root cannot run it", false, false, true, "needs root"},
		{"not root under CI is a reason too (Require fails then)", true, false, true, "needs root"},
		{"root without Slurm outside CI cannot run it", false, true, false, "Slurm is not installed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := skipReason(tc.ci, tc.root, tc.installed)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("skipReason(ci=%v, root=%v, installed=%v) = %q, want %q", tc.ci, tc.root, tc.installed, got, tc.want)
			}
		})
	}
}

func TestSwitchValues(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "No": false, "off": false,
		"1": true, "true": true, "yes": true} {
		if got := on(v); got != want {
			t.Errorf("on(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestLabTestsAreOffUnlessAsked runs a lab test of this package in a child test
// process without EASYSCALE_LAB, as root on this machine and with CI set: the test
// must skip with a message naming the switch, and the lab directory must not even
// be created (no lab-up, no lock files).
func TestLabTestsAreOffUnlessAsked(t *testing.T) {
	labDir := filepath.Join(t.TempDir(), "lab")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLabHasFourIdleNodesWithTwoGPUTypes$", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != Switch && k != "EASYSCALE_LAB_DIR" && k != "CI" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "CI=1", "EASYSCALE_LAB_DIR="+labDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child test process: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- SKIP: TestLabHasFourIdleNodesWithTwoGPUTypes") ||
		!strings.Contains(string(out), Switch+"=1") {
		t.Errorf("the lab test did not skip naming %s=1:\n%s", Switch, out)
	}
	if _, err := os.Stat(labDir); !os.IsNotExist(err) {
		t.Errorf("lab directory %s was touched (stat: %v): the lab was started though not asked for", labDir, err)
	}
}
