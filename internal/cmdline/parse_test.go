package cmdline

import (
	"bytes"
	"errors"
	"testing"

	"github.com/spf13/pflag"
)

func newSet(out *bytes.Buffer) (*pflag.FlagSet, *int) {
	fs := pflag.NewFlagSet("easyscale-x", pflag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("n", 1, "a number")
	fs.Usage = func() { fs.Output().Write([]byte("Usage: easyscale-x [--n N]\n")) }
	return fs, n
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		ok     bool
		n      int
		output string
	}{
		{"good flags are parsed and the command goes on", []string{"--n", "3"}, 0, true, 3, ""},
		{"no flags keep the defaults", nil, 0, true, 1, ""},
		{"--help prints the usage and exits 0", []string{"--help"}, 0, false, 1, "Usage: easyscale-x [--n N]\n"},
		{"-h is --help", []string{"-h"}, 0, false, 1, "Usage: easyscale-x [--n N]\n"},
		{"an unknown flag is named, then the usage, exit 2", []string{"--m"}, ExitUsage, false, 1,
			"easyscale-x: unknown flag: --m\n\nUsage: easyscale-x [--n N]\nRun easyscale-x --help for every flag.\n"},
		{"a bad value is named, then the usage, exit 2", []string{"--n", "x"}, ExitUsage, false, 1,
			"easyscale-x: invalid argument \"x\" for \"--n\" flag: must be an integer\n\nUsage: easyscale-x [--n N]\nRun easyscale-x --help for every flag.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			fs, n := newSet(&out)
			code, ok := Parse(fs, tc.args)
			if code != tc.code || ok != tc.ok || *n != tc.n || out.String() != tc.output {
				t.Fatalf("Parse(%q) = %d, %v, n=%d, output %q; want %d, %v, n=%d, output %q",
					tc.args, code, ok, *n, out.String(), tc.code, tc.ok, tc.n, tc.output)
			}
		})
	}
}

func TestParseHelpTo(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"--help prints the usage on the help writer", []string{"--help"}, 0, "Usage: easyscale-x [--n N]\n", ""},
		{"a bad flag still goes to the flag set's output", []string{"--m"}, ExitUsage, "",
			"easyscale-x: unknown flag: --m\n\nUsage: easyscale-x [--n N]\nRun easyscale-x --help for every flag.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			fs, _ := newSet(&stderr)
			code, ok := ParseHelpTo(&stdout, fs, tc.args)
			if code != tc.code || ok || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Fatalf("ParseHelpTo(%q) = %d, %v, stdout %q, stderr %q; want %d, false, %q, %q",
					tc.args, code, ok, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
			if fs.Output() != &stderr {
				t.Fatal("ParseHelpTo left the flag set writing to the help writer")
			}
		})
	}
}

func TestBadUsage(t *testing.T) {
	var out bytes.Buffer
	fs, _ := newSet(&out)
	if code := BadUsage(fs, errors.New("--window: want START:END")); code != ExitUsage {
		t.Fatalf("BadUsage = %d, want %d", code, ExitUsage)
	}
	if want := "easyscale-x: --window: want START:END\n\nUsage: easyscale-x [--n N]\nRun easyscale-x --help for every flag.\n"; out.String() != want {
		t.Fatalf("BadUsage printed %q, want %q", out.String(), want)
	}
}

// A usage with a synopsis, a blank line and the flags: only the synopsis
// is printed after the error, so the error stays on the screen.
func TestBadUsagePrintsTheSynopsisOnly(t *testing.T) {
	var out bytes.Buffer
	fs := pflag.NewFlagSet("easyscale-y", pflag.ContinueOnError)
	fs.SetOutput(&out)
	fs.Usage = func() {
		fs.Output().Write([]byte("Usage: easyscale-y --a A\n       (or --b B)\n\nFlags:\n  --a  one\n  --b  two\n"))
	}
	BadUsage(fs, errors.New("--a: required"))
	if want := "easyscale-y: --a: required\n\nUsage: easyscale-y --a A\n       (or --b B)\nRun easyscale-y --help for every flag.\n"; out.String() != want {
		t.Fatalf("BadUsage printed %q, want %q", out.String(), want)
	}
	if fs.Output() != &out {
		t.Fatal("BadUsage left the flag set writing elsewhere")
	}
}
