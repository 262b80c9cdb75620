package submit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

func input(env map[string]string, files map[string]string, stdin string) Input {
	return Input{
		Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		ReadFile: func(p string) ([]byte, error) {
			if d, ok := files[p]; ok {
				return []byte(d), nil
			}
			return os.ReadFile(p)
		},
		Stdin: func() ([]byte, error) { return []byte(stdin), nil },
	}
}

func TestPrepareBuildsTheSubmission(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		files   map[string]string
		stdin   string
		want    []string
		wantEnv []string
		check   func(Plan) bool
	}{
		{
			name:    "the script's directives make an elastic job submitted at its minimum",
			args:    []string{"--parsable", "testdata/elastic.sbatch", "arg 1"},
			want:    []string{"--nodes=1", "--no-kill", "--comment=es-req min=1 max=4 lw=8 d1", "--parsable", "testdata/elastic.sbatch", "arg 1"},
			wantEnv: []string{"EASYSCALE_ELASTIC=1-4", "EASYSCALE_LOGICAL_WORKERS=8", "EASYSCALE_DETERMINISM=d1", "SLURM_NO_KILL=set"},
			check: func(p Plan) bool {
				return p.ScriptAt == 4 && bytes.Contains(p.Script, []byte("# easyscale-sbatch: --elastic=1-4"))
			},
		},
		{
			name:    "the command line wins over a directive, a directive over the environment",
			args:    []string{"--elastic=2-3", "testdata/elastic.sbatch"},
			env:     map[string]string{"EASYSCALE_LOGICAL_WORKERS": "4", "EASYSCALE_DETERMINISM": "d2"},
			want:    []string{"--nodes=2", "--no-kill", "--comment=es-req min=2 max=3 lw=8 d2", "testdata/elastic.sbatch"},
			wantEnv: []string{"EASYSCALE_ELASTIC=2-3", "EASYSCALE_LOGICAL_WORKERS=8", "EASYSCALE_DETERMINISM=d2", "SLURM_NO_KILL=set"},
		},
		{
			name:    "the job's own speeds go into the comment and the environment",
			args:    []string{"--elastic=1-2", "--logical-workers=4", "--speeds=v100:1,t4:0.4", "--wrap", "srun true"},
			want:    []string{"--nodes=1", "--no-kill", "--comment=es-req min=1 max=2 lw=4 d1 speeds=t4:0.4,v100:1", "--wrap", "srun true"},
			wantEnv: []string{"EASYSCALE_ELASTIC=1-2", "EASYSCALE_LOGICAL_WORKERS=4", "EASYSCALE_DETERMINISM=d1", "EASYSCALE_SPEEDS=t4:0.4,v100:1", "SLURM_NO_KILL=set"},
		},
		{
			name:    "a node count in the --elastic range is the size the job starts at",
			args:    []string{"--elastic=1-4", "--logical-workers=8", "-N2", "--wrap", "srun true"},
			want:    []string{"--no-kill", "--comment=es-req min=1 max=4 lw=8 d1", "-N2", "--wrap", "srun true"},
			wantEnv: []string{"EASYSCALE_ELASTIC=1-4", "EASYSCALE_LOGICAL_WORKERS=8", "EASYSCALE_DETERMINISM=d1", "SLURM_NO_KILL=set"},
		},
		{
			name:  "a job without EasyScale options passes through untouched",
			args:  []string{"-N", "2", "--comment", "mine", "testdata/plain.sbatch"},
			want:  []string{"-N", "2", "--comment", "mine", "testdata/plain.sbatch"},
			check: func(p Plan) bool { return p.Request == nil && p.Script == nil && p.Env == nil },
		},
		{
			name:  "a script from stdin is fed to sbatch with our directives hidden",
			args:  []string{"--logical-workers=2"},
			stdin: "#!/bin/sh\n#SBATCH --elastic=1-2\nhostname\n",
			want:  []string{"--nodes=1", "--no-kill", "--comment=es-req min=1 max=2 lw=2 d1"},
			check: func(p Plan) bool {
				return string(p.Stdin) == "#!/bin/sh\n# easyscale-sbatch: --elastic=1-2\nhostname\n"
			},
		},
		{
			name: "a wrapped command takes the request from the command line only",
			args: []string{"--logical-workers=4", "--wrap", "srun true"},
			want: []string{"--comment=es-req lw=4 d1", "--wrap", "srun true"},
			check: func(p Plan) bool {
				return p.Stdin == nil && p.Script == nil && !slices.Contains(p.Env, "SLURM_NO_KILL=set")
			},
		},
		{
			name:    "the user's --no-kill=off decides what a node failure does to the job and its steps",
			args:    []string{"--elastic=2-4", "--no-kill=off", "--wrap", "srun true"},
			want:    []string{"--nodes=2", "--comment=es-req min=2 max=4 d1", "--no-kill=off", "--wrap", "srun true"},
			wantEnv: []string{"EASYSCALE_ELASTIC=2-4", "EASYSCALE_DETERMINISM=d1"},
			check: func(p Plan) bool {
				return !slices.ContainsFunc(p.Env, func(e string) bool { return strings.HasPrefix(e, "SLURM_NO_KILL=") })
			},
		},
		{
			name:  "a clustered -k is the user's --no-kill",
			args:  []string{"--elastic=2", "-vk", "--wrap", "srun true"},
			want:  []string{"--nodes=2", "--comment=es-req min=2 max=2 d1", "-vk", "--wrap", "srun true"},
			check: func(p Plan) bool { return slices.Contains(p.Env, "SLURM_NO_KILL=set") },
		},
		{
			name:  "an abbreviated --no-k is the user's --no-kill",
			args:  []string{"--elastic=2", "--no-k", "--wrap", "srun true"},
			want:  []string{"--nodes=2", "--comment=es-req min=2 max=2 d1", "--no-k", "--wrap", "srun true"},
			check: func(p Plan) bool { return slices.Contains(p.Env, "SLURM_NO_KILL=set") },
		},
		{
			name:  "a #SBATCH -k directive is the user's --no-kill",
			args:  []string{"--elastic=1-2", "job.sbatch"},
			files: map[string]string{"job.sbatch": "#!/bin/sh\n#SBATCH -k\nsrun true\n"},
			want:  []string{"--nodes=1", "--comment=es-req min=1 max=2 d1", "job.sbatch"},
		},
		{
			name:  "a #SBATCH --no-kill=off directive turns off the steps' no-kill too",
			args:  []string{"--elastic=1-2", "job.sbatch"},
			files: map[string]string{"job.sbatch": "#!/bin/sh\n#SBATCH --no-kill=off\nsrun true\n"},
			want:  []string{"--nodes=1", "--comment=es-req min=1 max=2 d1", "job.sbatch"},
			check: func(p Plan) bool {
				return !slices.ContainsFunc(p.Env, func(e string) bool { return strings.HasPrefix(e, "SLURM_NO_KILL=") })
			},
		},
		{
			name: "SBATCH_NO_KILL=off turns off the steps' no-kill too",
			args: []string{"--elastic=1-2", "--wrap", "srun true"},
			env:  map[string]string{"SBATCH_NO_KILL": "OFF"},
			want: []string{"--nodes=1", "--comment=es-req min=1 max=2 d1", "--wrap", "srun true"},
			check: func(p Plan) bool {
				return !slices.ContainsFunc(p.Env, func(e string) bool { return strings.HasPrefix(e, "SLURM_NO_KILL=") })
			},
		},
		{
			name:  "the command line's --no-kill wins over a directive's --no-kill=off",
			args:  []string{"--elastic=1-2", "--no-kill", "job.sbatch"},
			files: map[string]string{"job.sbatch": "#!/bin/sh\n#SBATCH --no-kill=off\nsrun true\n"},
			want:  []string{"--nodes=1", "--comment=es-req min=1 max=2 d1", "--no-kill", "job.sbatch"},
			check: func(p Plan) bool { return slices.Contains(p.Env, "SLURM_NO_KILL=set") },
		},
		{
			name:    "SBATCH_NO_KILL and SLURM_NO_KILL in the environment are the user's",
			args:    []string{"--elastic=1-2", "--wrap", "srun true"},
			env:     map[string]string{"SBATCH_NO_KILL": "", "SLURM_NO_KILL": "off"},
			want:    []string{"--nodes=1", "--comment=es-req min=1 max=2 d1", "--wrap", "srun true"},
			wantEnv: []string{"EASYSCALE_ELASTIC=1-2", "EASYSCALE_DETERMINISM=d1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare(tc.args, input(tc.env, tc.files, tc.stdin))
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if !reflect.DeepEqual(p.Args, tc.want) {
				t.Errorf("args %q, want %q", p.Args, tc.want)
			}
			if tc.wantEnv != nil && !reflect.DeepEqual(p.Env, tc.wantEnv) {
				t.Errorf("env %q, want %q", p.Env, tc.wantEnv)
			}
			if tc.check != nil && !tc.check(p) {
				t.Errorf("plan %+v", p)
			}
		})
	}
}

func TestPrepareRefusesBadRequests(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		want  string
		cause error
	}{
		{"a reversed range names --elastic", []string{"--elastic=4-2", "--wrap", "true"}, nil,
			"invalid --elastic=4-2", elastic.ErrReversed},
		{"zero logical workers name --logical-workers", []string{"--logical-workers=0", "--wrap", "true"}, nil,
			"invalid --logical-workers=0", elastic.ErrOutOfRange},
		{"a bad environment twin names where it came from", []string{"--wrap", "true"},
			map[string]string{"EASYSCALE_DETERMINISM": "d7"}, "from EASYSCALE_DETERMINISM", elastic.ErrDeterminism},
		{"a bad speed names --speeds", []string{"--elastic=1", "--speeds=v100:fast", "--wrap", "true"}, nil,
			"invalid --speeds=v100:fast", nil},
		{"a bad speeds twin names where it came from", []string{"--elastic=1", "--wrap", "true"},
			map[string]string{"EASYSCALE_SPEEDS": "v100"}, "from EASYSCALE_SPEEDS", nil},
		{"a node count above the --elastic maximum is refused", []string{"--elastic=1-2", "-N", "3", "--wrap", "true"}, nil,
			`--nodes/-N "3"`, ErrConflict},
		{"a node count below the --elastic minimum is refused", []string{"--elastic=2-4", "--nodes=1", "--wrap", "true"}, nil,
			`--nodes/-N "1"`, ErrConflict},
		{"a node range is refused: the range is --elastic's", []string{"--elastic=1-4", "-N1-2", "--wrap", "true"}, nil,
			`--nodes/-N "1-2"`, ErrConflict},
		{"a node count in the script outside the range is refused", []string{"--elastic=1-2", "testdata/nodes3.sbatch"}, nil,
			`--nodes/-N "3"`, ErrConflict},
		{"a user comment in the script is refused before its node count is looked at", []string{"--elastic=1-2", "testdata/plain.sbatch"}, nil,
			"--comment", ErrConflict},
		{"a user comment conflicts with the recorded request", []string{"--logical-workers=2", "--comment=x", "--wrap", "true"}, nil,
			"--comment", ErrConflict},
		{"a comment is refused also with a node count in the range", []string{"--elastic=1-4", "-N2", "--comment=evil", "--wrap", "true"}, nil,
			"--comment", ErrConflict},
		{"a heterogeneous job is refused also with a node count in the range", []string{"--elastic=1-4", "-N2", "--wrap", "true", ":", "--nodes=1", "--wrap", "true"}, nil,
			"heterogeneous", ErrConflict},
		{"--speeds without an EasyScale job is refused, not dropped", []string{"--speeds=v100:bad", "--wrap", "true"}, nil,
			"--speeds", ErrConflict},
		{"a script whose only wrapper directive is --speeds is refused, not passed to sbatch", []string{"testdata/speeds-only.sbatch"}, nil,
			"--speeds", ErrConflict},
		{"a heterogeneous job is refused", []string{"--elastic=1", "-n1", ":", "-n2", "--wrap", "true"}, nil,
			"heterogeneous", ErrConflict},
		{"a missing script is reported", []string{"--elastic=1", "nonexistent.sbatch"}, nil,
			"read batch script nonexistent.sbatch", os.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Prepare(tc.args, input(tc.env, nil, ""))
			if err == nil || (tc.cause != nil && !errors.Is(err, tc.cause)) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q wrapping %v", err, tc.want, tc.cause)
			}
		})
	}
}

// runFake runs Main against testdata/fake-sbatch.sh and returns stdout,
// stderr, the exit status and the fake's log.
func runFake(t *testing.T, args []string, env map[string]string) (string, string, int, string) {
	t.Helper()
	fake, err := filepath.Abs("testdata/fake-sbatch.sh")
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "sbatch.log")
	t.Setenv("FAKE_SBATCH_LOG", logPath)
	lookup := map[string]string{EnvSbatch: fake}
	for k, v := range env {
		if k == EnvSbatch {
			lookup[k] = v // the wrapper reads SBATCH through Input.Lookup
			continue
		}
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, input(lookup, nil, ""), Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut})
	log, _ := os.ReadFile(logPath)
	return out.String(), errOut.String(), code, string(log)
}

func TestMainRunsSbatchWithThePlan(t *testing.T) {
	out, errOut, code, log := runFake(t, []string{"--parsable", "-J", "a b", "testdata/elastic.sbatch", "x y"}, nil)
	if code != 0 || out != "42\n" || errOut != "" {
		t.Fatalf("exit %d stdout %q stderr %q, want sbatch's own output", code, out, errOut)
	}
	wantArgs := "ARG --nodes=1\nARG --no-kill\nARG --comment=es-req min=1 max=4 lw=8 d1\nARG --parsable\nARG -J\nARG a b\nARG "
	if !strings.HasPrefix(log, wantArgs) {
		t.Errorf("sbatch argv:\n%s\nwant prefix:\n%s", log, wantArgs)
	}
	if !strings.Contains(log, "/elastic.sbatch\nFILE ") || !strings.Contains(log, "# easyscale-sbatch: --elastic=1-4\n") {
		t.Errorf("sbatch did not get a copy named elastic.sbatch with our directives hidden:\n%s", log)
	}
	if !strings.Contains(log, "ARG x y\n") || !strings.Contains(log, "ENV EASYSCALE_ELASTIC=1-4\n") || !strings.Contains(log, "ENV SLURM_NO_KILL=set\n") {
		t.Errorf("script argument or environment twin missing:\n%s", log)
	}
	for _, line := range strings.Split(log, "\n") {
		if p, ok := strings.CutPrefix(line, "FILE "); ok && strings.Contains(p, "easyscale-sbatch-") {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("script copy %s not removed after sbatch exited", p)
			}
		}
	}
}

func TestMainOutputIsSbatchsOutput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		out     string
		errPart string
		code    int
	}{
		{"a plain submission prints sbatch's line", []string{"--wrap", "true"}, nil, "Submitted batch job 42\n", "", 0},
		{"sbatch's failure and status come through", []string{"--wrap", "true"},
			map[string]string{"FAKE_SBATCH_FAIL": "Batch job submission failed"}, "", "sbatch: error: Batch job submission failed", 1},
		{"a refused request never reaches sbatch", []string{"--elastic=4-2", "--wrap", "true"}, nil, "",
			"easyscale-sbatch: error: invalid --elastic=4-2", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code, log := runFake(t, tc.args, tc.env)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.errPart) {
				t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
			}
			if tc.code == 1 && tc.errPart != "" && strings.HasPrefix(tc.errPart, "easyscale") && log != "" {
				t.Errorf("sbatch ran for a refused request:\n%s", log)
			}
		})
	}
}

func TestMainHelpWorksWithoutSbatch(t *testing.T) {
	own := []string{"Usage: easyscale-sbatch [EASYSCALE OPTIONS] [SBATCH OPTIONS] [SCRIPT [ARGS...]]",
		"--elastic string", "EASYSCALE_ELASTIC", "--logical-workers string", "EASYSCALE_LOGICAL_WORKERS",
		"--determinism string", "EASYSCALE_DETERMINISM", "(default \"d1\")", "command line wins over a directive",
		"es-req min=MIN max=MAX lw=L d1|d2", "es-req min=1 max=4 lw=8 d1", "SBATCH   path of the real sbatch"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		then string // what follows the wrapper's own help
	}{
		{"--help appends sbatch's help when sbatch gives it", []string{"--help"}, nil,
			"sbatch's own options (from "},
		{"-h works like --help", []string{"-h"}, nil, "Usage: sbatch [OPTIONS(0)...]"},
		{"a failing sbatch leaves the wrapper's help and one line saying why", []string{"--help"},
			map[string]string{"FAKE_SBATCH_FAIL": "Unable to contact slurm controller"},
			"--help is not available here: sbatch: error: Unable to contact slurm controller;"},
		{"a missing sbatch leaves the wrapper's help and one line saying why", []string{"--help"},
			map[string]string{EnvSbatch: filepath.Join(t.TempDir(), "no-sbatch")}, "--help is not available here: start "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code, _ := runFake(t, tc.args, tc.env)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errOut)
			}
			for _, w := range own {
				if !strings.Contains(out, w) {
					t.Errorf("help lacks %q:\n%s", w, out)
				}
			}
			if i, j := strings.Index(out, "Usage: easyscale-sbatch"), strings.Index(out, tc.then); i != 0 || j < i {
				t.Errorf("help does not start with the wrapper's usage followed by %q:\n%s", tc.then, out)
			}
		})
	}
}
