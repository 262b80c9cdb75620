package submit

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestScanScriptReadsDirectivesLikeSbatch(t *testing.T) {
	data, err := os.ReadFile("testdata/elastic.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ScanScript(data, "elastic.sbatch")
	if err != nil {
		t.Fatalf("ScanScript: %v", err)
	}
	if s.Owned.Elastic.Value != "1-4" || s.Owned.Elastic.Origin != "elastic.sbatch:4" {
		t.Errorf("elastic %+v", s.Owned.Elastic)
	}
	if s.Owned.LogicalWorkers.Value != "8" {
		t.Errorf("logical workers %+v (a trailing # comment must end the words)", s.Owned.LogicalWorkers)
	}
	if s.Owned.Determinism.Set {
		t.Errorf("a directive after the first command was read: %+v", s.Owned.Determinism)
	}
	want := strings.Replace(strings.Replace(string(data), "#SBATCH --elastic", "# easyscale-sbatch: --elastic", 1),
		"#SBATCH --logical-workers", "# easyscale-sbatch: --logical-workers", 1)
	if string(s.Hidden) != want {
		t.Errorf("hidden script:\n%s\nwant:\n%s", s.Hidden, want)
	}
}

func TestScanScriptCases(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		check   func(Script) bool
		wantErr string
	}{
		{"a script without our directives is left alone", "#!/bin/sh\n#SBATCH -N2 --comment='a # b'\nhostname\n",
			func(s Script) bool { return s.Hidden == nil && s.Nodes && s.Comment && !s.Owned.Any() }, ""},
		{"a hetjob separator is noticed", "#!/bin/sh\n#SBATCH -n1\n#SBATCH hetjob\n#SBATCH -n2\n",
			func(s Script) bool { return s.HetJob }, ""},
		{"an indented directive is not a directive", "#!/bin/sh\n  #SBATCH --elastic=2\n",
			func(s Script) bool { return !s.Owned.Any() }, ""},
		{"a longer word starting with SBATCH is not a directive", "#SBATCHX --elastic=2\n",
			func(s Script) bool { return !s.Owned.Any() }, ""},
		{"CRLF line ends are handled", "#!/bin/sh\r\n#SBATCH --elastic=3\r\necho\r\n",
			func(s Script) bool {
				return s.Owned.Elastic.Value == "3" && string(s.Hidden) == "#!/bin/sh\r\n# easyscale-sbatch: --elastic=3\r\necho\r\n"
			}, ""},
		{"a line mixing our options with sbatch's is refused", "#SBATCH --elastic=1-2 --time=5\n", nil,
			"x.sh:1: put --elastic"},
		{"an unterminated quote is refused", "#SBATCH --job-name='a\n", nil, "x.sh:1: unterminated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ScanScript([]byte(tc.script), "x.sh")
			if tc.wantErr != "" {
				var de *DirectiveError
				if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want *DirectiveError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(s) {
				t.Errorf("got %+v, %v", s, err)
			}
		})
	}
}

func FuzzScanScript(f *testing.F) {
	f.Add([]byte("#!/bin/sh\n#SBATCH --elastic=1-4\n#SBATCH -N1\nrun\n"))
	f.Add([]byte("#SBATCH --logical-workers '8' # x\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ScanScript(data, "f")
		if err != nil {
			return
		}
		if (s.Hidden != nil) != s.Owned.Any() {
			t.Fatalf("hidden copy %v but owned %+v", s.Hidden != nil, s.Owned)
		}
		if s.Hidden != nil {
			if strings.Count(string(s.Hidden), "\n") != strings.Count(string(data), "\n") {
				t.Fatalf("hiding changed the line count")
			}
			again, err := ScanScript(s.Hidden, "f")
			if err != nil || again.Owned.Any() {
				t.Fatalf("hidden script still has owned directives: %+v %v", again.Owned, err)
			}
		}
	})
}
