package cli

import (
	"bytes"
	"strings"
	"testing"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestBadFlagsAreNamed(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a non-numeric --steps", []string{"run", "--config", "x.toml", "--steps", "abc"}, "--steps"},
		{"an unknown flag", []string{"run", "--bogus"}, "bogus"},
		{"a duration without unit", []string{"run", "--heartbeat-timeout", "5"}, "heartbeat-timeout"},
		{"a bad flag of status", []string{"status", "--tail", "x"}, "--tail"},
		{"a bad flag of worker", []string{"worker", "--io-timeout", "soon"}, "io-timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := run(c.args...)
			if code != 2 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "Usage:") {
				t.Fatalf("exit %d, stderr %q: want 2 and a message naming %s with the usage", code, stderr, c.want)
			}
		})
	}
}

func TestVersionAndHelpForms(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, out, _ := run(args...); code != 0 || strings.TrimSpace(out) != Version {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
	}
	if code, _, stderr := run("help", "run"); code != 0 || !strings.Contains(stderr, "--workers") {
		t.Errorf("help run: exit %d, stderr %q", code, stderr)
	}
}

func TestSimulateNamesItsOwnCommand(t *testing.T) {
	code, out, stderr := run("simulate", "--trace", "t.csv", "--policy", "rigid")
	want := "easyscale-simulate --trace t.csv --policy rigid"
	if code != 2 || out != "" || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q: want 2, nothing on stdout and the command %q", code, out, stderr, want)
	}
	if _, _, stderr := run("simulate"); !strings.Contains(stderr, "  easyscale-simulate\n") {
		t.Errorf("without arguments: stderr %q, want the command without a trailing blank", stderr)
	}
	if _, _, usage := run(); strings.Contains(usage, "simulate") {
		t.Errorf("the usage still lists simulate:\n%s", usage)
	}
}
