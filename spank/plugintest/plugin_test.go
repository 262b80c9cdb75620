package plugintest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

const (
	pluginDir = "../plugin"
	caseTable = "../../internal/elastic/testdata/validation_cases.tsv"
	spankH    = "/usr/include/slurm/spank.h"
)

// need skips the test when a build tool is missing, except under CI where
// the tools are part of the contract.
func need(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s missing under CI", what)
	}
	t.Skipf("%s missing", what)
}

func haveFile(p string) bool { _, err := os.Stat(p); return err == nil }

func haveCC() bool { _, err := exec.LookPath("cc"); return err == nil }

func compile(t *testing.T, out string, args ...string) string {
	t.Helper()
	need(t, "cc", haveCC())
	bin := filepath.Join(t.TempDir(), out)
	cmd := exec.Command("cc", append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-I" + pluginDir, "-o", bin}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", args, err, b)
	}
	return bin
}

// goResult renders what internal/elastic decides for one table row, in the
// format of testdata/validate_main.c.
func goResult(col []string) string {
	set := func(v, option string) elastic.Setting {
		switch v {
		case "-":
			return elastic.Setting{}
		case "''":
			return elastic.Setting{Set: true, Origin: "--" + option}
		}
		return elastic.Setting{Set: true, Value: v, Origin: "--" + option}
	}
	s := elastic.Settings{
		Elastic:        set(col[1], elastic.OptionElastic),
		LogicalWorkers: set(col[2], elastic.OptionLogicalWorkers),
		Determinism:    set(col[3], elastic.OptionDeterminism),
	}
	r, err := s.Request()
	if oe, ok := err.(*elastic.OptionError); ok {
		return fmt.Sprintf("%s\terr %s\t%s", col[0], oe.Option, err)
	}
	return fmt.Sprintf("%s\tok %d %d %d %s", col[0], r.MinNodes, r.MaxNodes, r.LogicalWorkers, r.Determinism)
}

func TestCValidationAgreesWithInternalElastic(t *testing.T) {
	bin := compile(t, "validate", "testdata/validate_main.c", filepath.Join(pluginDir, "request.c"))
	table, err := os.ReadFile(caseTable)
	if err != nil {
		t.Fatalf("read case table: %v", err)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(table)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("validate driver: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	var n int
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		col := strings.Split(line, "\t")
		if n >= len(got) {
			t.Fatalf("C driver printed %d results, table has more", len(got))
		}
		if want := goResult(col); got[n] != want {
			t.Errorf("case %q:\n C:  %s\n Go: %s", col[0], got[n], want)
		}
		n++
	}
	if n != len(got) || n < 20 {
		t.Errorf("compared %d cases, C printed %d", n, len(got))
	}
}

func TestHelperRunnerExportsOnlyEasyScaleVariables(t *testing.T) {
	need(t, spankH+" (libslurm-dev)", haveFile(spankH))
	bin := compile(t, "helpertest", "testdata/helper_main.c", "testdata/stub.c", filepath.Join(pluginDir, "helper.c"))
	tests := []struct {
		name    string
		script  string
		timeout string
		want    []string
		absent  []string
	}{
		{
			name: "variables are exported and the task environment reaches the helper",
			script: "echo EASYSCALE_GPU_COUNT=1\necho EASYSCALE_GPU_CVD=$CUDA_VISIBLE_DEVICES\n" +
				"echo 'EASYSCALE_GPU_MODEL=NVIDIA A100-SXM4-40GB'\n",
			timeout: "5",
			want: []string{"SET EASYSCALE_GPU_COUNT=1", "SET EASYSCALE_GPU_CVD=2",
				"SET EASYSCALE_GPU_MODEL=NVIDIA A100-SXM4-40GB", "RC 0"},
		},
		{
			name:    "other variables and malformed lines are refused and logged",
			script:  "echo LD_PRELOAD=/tmp/x.so\necho easyscale_lower=1\necho EASYSCALE_=1\necho garbage\necho EASYSCALE_OK=1\n",
			timeout: "5",
			want:    []string{"SET EASYSCALE_OK=1", "error: easyscale: helper: ignoring output line \"LD_PRELOAD=/tmp/x.so\"", "RC 0"},
			absent:  []string{"SET LD_PRELOAD", "SET easyscale_lower", "SET EASYSCALE_=1"},
		},
		{
			name:    "stderr is logged with the plugin prefix",
			script:  "echo 'no NVIDIA driver' >&2\necho EASYSCALE_GPU_COUNT=0\n",
			timeout: "5",
			want:    []string{"info: easyscale: helper: no NVIDIA driver", "SET EASYSCALE_GPU_COUNT=0", "RC 0"},
		},
		{
			name: "output beyond 64 KiB is dropped and the drop is logged",
			script: "echo EASYSCALE_FIRST=1\nhead -c 70000 /dev/zero | tr '\\0' x\necho\necho EASYSCALE_LATE=1\n" +
				"echo EASYSCALE_OK=1 >&2\n",
			timeout: "5",
			want:    []string{"SET EASYSCALE_FIRST=1", "error: easyscale: helper: stdout beyond 65536 bytes dropped", "RC 0"},
			absent:  []string{"SET EASYSCALE_LATE", "stderr beyond"},
		},
		{
			name:    "a failing helper exports nothing and reports its status",
			script:  "echo EASYSCALE_GPU_COUNT=3\nexit 3\n",
			timeout: "5",
			want:    []string{"exited with status 3", "RC -1"},
			absent:  []string{"SET "},
		},
		{
			name:    "a hanging helper is killed at the deadline",
			script:  "echo EASYSCALE_GPU_COUNT=1\nexec sleep 30\n",
			timeout: "1",
			want:    []string{"did not finish within 1 s; killed", "RC -1"},
			absent:  []string{"SET "},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			helper := filepath.Join(t.TempDir(), "easyscale-gpuctx")
			if err := os.WriteFile(helper, []byte("#!/bin/sh\n"+tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, helper, tc.timeout).CombinedOutput()
			if err != nil {
				t.Fatalf("driver: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(string(out), a) {
					t.Errorf("output has %q:\n%s", a, out)
				}
			}
		})
	}
	t.Run("a missing helper is reported", func(t *testing.T) {
		out, _ := exec.Command(bin, "/nonexistent/easyscale-gpuctx", "5").CombinedOutput()
		if !strings.Contains(string(out), "RC -1") || !strings.Contains(string(out), "No such file") {
			t.Errorf("missing helper output:\n%s", out)
		}
	})
}
