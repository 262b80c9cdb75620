package slurmcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReleaseReadsWhatEachSlurmPrints(t *testing.T) {
	tests := []struct {
		name, out string
		want      Release
		bad       bool
	}{
		{"Debian 12's 22.05 names itself slurm-wlm", "slurm-wlm 22.05.8\n", Release{22, 5}, false},
		{"Debian 13's 24.11 names itself slurm-wlm", "slurm-wlm 24.11.5\n", Release{24, 11}, false},
		{"an upstream build names itself slurm", "slurm 23.02.7\n", Release{23, 2}, false},
		{"a pre-release keeps its series", "slurm 25.05.0-0rc1\n", Release{25, 5}, false},
		{"empty output is no version", "", Release{}, true},
		{"another program's version is refused", "munge-0.5.15 (2022-06-22)\n", Release{}, true},
		{"a version without a minor is refused", "slurm 24\n", Release{}, true},
		{"a version that is not a number is refused", "slurm x.11.5\n", Release{}, true},
		{"two lines are refused", "slurm 24.11.5\nslurm 22.05.8\n", Release{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRelease([]byte(tc.out))
			if tc.bad {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Field != "version" {
					t.Fatalf("ParseRelease(%q) = %v, %v; want a *ParseError of field version", tc.out, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseRelease(%q) = %v, %v; want %v", tc.out, got, err, tc.want)
			}
		})
	}
}

// TestParseReleaseReadsTheRecordedVersions reads what the current lab's
// scontrol --version and sinfo --version printed (testdata/slurm-24.11/versions).
func TestParseReleaseReadsTheRecordedVersions(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "slurm-24.11", "versions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if v, err := ParseRelease([]byte(line)); err != nil || v != (Release{24, 11}) {
			t.Errorf("ParseRelease(%q) = %v, %v; want 24.11", line, v, err)
		}
	}
}

func TestReleaseStringAndOrder(t *testing.T) {
	if s := (Release{22, 5}).String(); s != "22.05" {
		t.Errorf("String() = %q, want 22.05", s)
	}
	for _, tc := range []struct {
		v            Release
		major, minor int
		want         bool
	}{
		{Release{22, 5}, 23, 2, false}, {Release{23, 2}, 23, 2, true}, {Release{23, 11}, 23, 2, true},
		{Release{24, 11}, 23, 2, true}, {Release{22, 11}, 23, 2, false},
	} {
		if got := tc.v.AtLeast(tc.major, tc.minor); got != tc.want {
			t.Errorf("%v.AtLeast(%d, %d) = %v, want %v", tc.v, tc.major, tc.minor, got, tc.want)
		}
	}
}

func TestShrinkArgsKeepARunningJobsTaskCountFrom23_02On(t *testing.T) {
	tests := []struct {
		name    string
		v       Release
		running bool
		want    string
	}{
		{"22.05 refuses NumTasks on a running job: NumNodes alone", Release{22, 5}, true, "update JobId=7 NumNodes=2"},
		{"24.11 recomputes the task count: the running job's is passed along", Release{24, 11}, true, "update JobId=7 NumNodes=2 NumTasks=3"},
		{"23.02 is the first release that needs it", Release{23, 2}, true, "update JobId=7 NumNodes=2 NumTasks=3"},
		{"a pending job's task count must follow its node count", Release{24, 11}, false, "update JobId=7 NumNodes=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(ShrinkArgs(tc.v, "7", 2, tc.running, 3), " "); got != tc.want {
				t.Errorf("ShrinkArgs = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSetNodesAsksForTheVersionAndOnNewReleasesTheTaskCount(t *testing.T) {
	tests := []struct {
		name, version, squeue string
		want                  []string // the commands run, in order
	}{
		{"22.05: scontrol --version, then NumNodes alone", "slurm-wlm 22.05.8\n", "",
			[]string{"scontrol --version", "scontrol update JobId=7 NumNodes=2"}},
		{"24.11, a running job: its task count is read and kept", "slurm-wlm 24.11.5\n", "RUNNING 3\n",
			[]string{"scontrol --version", "squeue --noheader --jobs=7 --Format=State:0 ,NumTasks:0",
				"scontrol update JobId=7 NumNodes=2 NumTasks=3"}},
		{"24.11, a pending job (start-small): NumNodes alone", "slurm-wlm 24.11.5\n", "PENDING 4\n",
			[]string{"scontrol --version", "squeue --noheader --jobs=7 --Format=State:0 ,NumTasks:0",
				"scontrol update JobId=7 NumNodes=2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			r := Runner{Env: []string{}, Exec: func(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
				cmd := name + " " + strings.Join(args, " ")
				ran = append(ran, cmd)
				switch {
				case cmd == "scontrol --version":
					return []byte(tc.version), nil
				case name == "squeue":
					return []byte(tc.squeue), nil
				}
				return nil, nil
			}}
			if err := r.SetNodes(context.Background(), "7", 2); err != nil {
				t.Fatal(err)
			}
			if strings.Join(ran, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("ran:\n%s\nwant:\n%s", strings.Join(ran, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestParseStateAndTasksRefusesWhatItCannotRead(t *testing.T) {
	for name, out := range map[string]string{
		"a count that is not a number": "RUNNING x\n",
		"one field":                    "RUNNING\n",
		"two jobs":                     "RUNNING 3\nRUNNING 2\n",
	} {
		t.Run(name, func(t *testing.T) {
			var pe *ParseError
			if _, _, err := ParseStateAndTasks("7", []byte(out)); !errors.As(err, &pe) || pe.ID != "7" {
				t.Errorf("ParseStateAndTasks(%q) = %v, want a *ParseError naming job 7", out, err)
			}
		})
	}
	if _, _, err := ParseStateAndTasks("7", nil); !errors.Is(err, ErrNoSuchJob) {
		t.Errorf("no output: %v, want ErrNoSuchJob", err)
	}
}

func FuzzParseRelease(f *testing.F) {
	for _, s := range []string{"slurm-wlm 22.05.8\n", "slurm 24.11.5", "slurm 9.x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRelease([]byte(s))
		if err != nil {
			return
		}
		// round trip: what String prints, as a version line, reads back the same
		if back, err := ParseRelease([]byte("slurm " + v.String())); err != nil || back != v {
			t.Fatalf("ParseRelease(%q) = %v; its String %q reads back as %v, %v", s, v, v.String(), back, err)
		}
	})
}
