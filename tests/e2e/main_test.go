// Package e2e drives the real `easyscale` binary as a user would: real
// processes, real SQLite state directories, real MNIST, SIGKILL.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// easyscale is the path of the binary built once for the package.
var easyscale string

// binaryEnv names a binary built beforehand that the package tests instead of
// building its own: `make test-current` runs this package's test binary in the
// current lab's Debian 13 root, which has no Go, with the bin/easyscale it built on
// the host.
const binaryEnv = "EASYSCALE_E2E_BINARY"

func TestMain(m *testing.M) {
	if prebuilt := os.Getenv(binaryEnv); prebuilt != "" {
		abs, err := filepath.Abs(prebuilt)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", binaryEnv, err)
			os.Exit(1)
		}
		easyscale = abs
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "easyscale-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	easyscale = filepath.Join(dir, "easyscale")
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	build := exec.Command("go", "build", "-o", easyscale, "./runtime/cmd/easyscale")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building easyscale: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished invocation.
type result struct {
	code           int
	stdout, stderr string
	summary        map[string]any
}

// easy runs the binary with args and returns its exit code and output; a
// summary file is read when the run wrote one.
func easy(t *testing.T, args ...string) result {
	t.Helper()
	sum := filepath.Join(t.TempDir(), "summary.json")
	if len(args) > 0 && args[0] == "run" {
		if !slices.Contains(args, "--summary") {
			args = append(args, "--summary", sum)
		}
		args = append(args, "--quiet")
	}
	cmd := exec.Command(easyscale, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running easyscale %v: %v", args, err)
	}
	if b, err := os.ReadFile(sum); err == nil {
		if err := json.Unmarshal(b, &r.summary); err != nil {
			t.Fatalf("summary of %v: %v", args, err)
		}
	}
	return r
}

func config() string { return filepath.Join("testdata", "mnist-small.toml") }

// mustRun runs and requires success, returning the digest.
func mustRun(t *testing.T, args ...string) result {
	t.Helper()
	r := easy(t, args...)
	if r.code != 0 {
		t.Fatalf("easyscale %v exited %d\nstderr:\n%s", args, r.code, r.stderr)
	}
	return r
}

func digest(r result) string {
	d, _ := r.summary["digest"].(string)
	return d
}
