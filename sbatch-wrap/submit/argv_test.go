package submit

import (
	"reflect"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

func TestScanArgsSplitsOwnedFromPassedArguments(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		passed []string
		script int
		owned  elastic.Settings
		check  func(Args) bool
	}{
		{
			name:   "owned options in both forms are taken out",
			args:   []string{"-p", "gpu", "--elastic=1-4", "--logical-workers", "8", "job.sh", "--elastic=9"},
			passed: []string{"-p", "gpu", "job.sh", "--elastic=9"},
			script: 2,
			owned: elastic.Settings{
				Elastic:        elastic.Setting{Set: true, Value: "1-4", Origin: "--elastic"},
				LogicalWorkers: elastic.Setting{Set: true, Value: "8", Origin: "--logical-workers"},
			},
		},
		{
			name:   "an abbreviated owned option is recognised like getopt_long does",
			args:   []string{"--elas=2", "--det", "d2", "x.sh"},
			passed: []string{"x.sh"},
			script: 0,
			owned: elastic.Settings{
				Elastic:     elastic.Setting{Set: true, Value: "2", Origin: "--elastic"},
				Determinism: elastic.Setting{Set: true, Value: "d2", Origin: "--determinism"},
			},
		},
		{
			name:   "an option value that looks like a script is not the script",
			args:   []string{"--job-name", "job.sh", "-o", "out %j.txt", "-J", "--elastic=1", "real.sh", "a b"},
			passed: []string{"--job-name", "job.sh", "-o", "out %j.txt", "-J", "--elastic=1", "real.sh", "a b"},
			script: 6,
		},
		{
			name:   "clustered short options take the next word when the last needs one",
			args:   []string{"-vN", "2", "-Hpgpu", "s.sh"},
			passed: []string{"-vN", "2", "-Hpgpu", "s.sh"},
			script: 3,
			check:  func(a Args) bool { return a.Nodes },
		},
		{
			name:   "a double dash ends the options",
			args:   []string{"--parsable", "--", "--elastic=1"},
			passed: []string{"--parsable", "--", "--elastic=1"},
			script: 2,
			check:  func(a Args) bool { return a.Parsable },
		},
		{
			name:   "without a script the script comes from stdin",
			args:   []string{"--comment", "hello world", "--nodes=3"},
			passed: []string{"--comment", "hello world", "--nodes=3"},
			script: -1,
			check:  func(a Args) bool { return a.Comment && a.Nodes },
		},
		{
			name:   "wrap and hetjob separators are noticed",
			args:   []string{"-n1", ":", "-n2", "--wrap", "hostname"},
			passed: []string{"-n1", ":", "-n2", "--wrap", "hostname"},
			script: -1,
			check:  func(a Args) bool { return a.Wrap && a.HetJob },
		},
		{
			name:   "empty and unusual arguments pass through byte for byte",
			args:   []string{"--export=ALL,X=a\tb", "--begin=now+1hour", "--unknown-flag", "j\xffob.sh", ""},
			passed: []string{"--export=ALL,X=a\tb", "--begin=now+1hour", "--unknown-flag", "j\xffob.sh", ""},
			script: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := ScanArgs(tc.args)
			if !reflect.DeepEqual(a.Passed, tc.passed) {
				t.Errorf("passed %q, want %q", a.Passed, tc.passed)
			}
			if a.Script != tc.script {
				t.Errorf("script at %d, want %d", a.Script, tc.script)
			}
			if a.Owned != tc.owned {
				t.Errorf("owned %+v, want %+v", a.Owned, tc.owned)
			}
			if tc.check != nil && !tc.check(a) {
				t.Errorf("flags wrong: %+v", a)
			}
		})
	}
}

func FuzzScanArgs(f *testing.F) {
	f.Add("-p\x00gpu\x00--elastic=1-4\x00job.sh\x00x")
	f.Add("--logical-workers\x008\x00--\x00a")
	f.Add("-vN\x002\x00:\x00--wrap\x00true")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		a := ScanArgs(args)
		// Passed is args in order with only owned options removed.
		j := 0
		for _, p := range a.Passed {
			for j < len(args) && args[j] != p {
				j++
			}
			if j == len(args) {
				t.Fatalf("passed %q is not an ordered subsequence of %q", a.Passed, args)
			}
			j++
		}
		if !a.Owned.Any() && len(a.Passed) != len(args) {
			t.Fatalf("nothing owned but %d of %d arguments passed", len(a.Passed), len(args))
		}
		if a.Script >= len(a.Passed) {
			t.Fatalf("script index %d out of %d", a.Script, len(a.Passed))
		}
	})
}
