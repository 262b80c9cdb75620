package slurmlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// LocalMNISTDigest trains the MNIST example (examples/mnist/job.toml) for
// steps steps on this machine without Slurm — one physical worker per
// logical worker — and returns its model digest: what an elastic job on the
// lab must reproduce. It fails t when the run fails.
func (l *Lab) LocalMNISTDigest(t testing.TB, steps int) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.Root, "bin", "easyscale"), "run", "--config", "examples/mnist/job.toml",
		"--steps", fmt.Sprint(steps), "--no-eval", "--quiet")
	cmd.Dir = l.Root
	cmd.Env = append(os.Environ(), "EASYSCALE_NO_SLURM=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("local MNIST run: %v", err)
	}
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "digest" && i+1 < len(f) {
			return f[i+1]
		}
	}
	t.Fatalf("no digest in %q", out)
	return ""
}
