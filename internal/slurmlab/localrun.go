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
	d, err := l.LocalDigest("examples/mnist/job.toml", steps)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// LocalDigest is [Lab.LocalMNISTDigest] for any job file (a path relative
// to the repository root, or absolute); steps 0 trains to the job's
// horizon. args are more `easyscale run` flags, e.g. "--workers", "2" for
// a fixed allocation of 2 physical workers (a torch job's default is one
// Python process per logical worker). It does not touch a testing.T, so a
// test may run it in a goroutine beside a Slurm job. Errors name the job
// file and carry the run's stderr.
func (l *Lab) LocalDigest(config string, steps int, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(l.Root, "bin", "easyscale"), append([]string{"run", "--config", config,
		"--steps", fmt.Sprint(steps), "--no-eval", "--quiet"}, args...)...)
	cmd.Dir = l.Root
	cmd.Env = append(os.Environ(), "EASYSCALE_NO_SLURM=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("local run of %s %s: %w\n%s", config, strings.Join(args, " "), err, stderr.String())
	}
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "digest" && i+1 < len(f) {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("local run of %s: no digest in %q", config, out)
}
