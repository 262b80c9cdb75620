package daemon

import (
	"context"
	"errors"
	"os/exec"
	"os/user"
	"slices"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

func TestExtraSpecArgs(t *testing.T) {
	base := ExtraSpec{Parent: "42", User: "alice", Account: "proj", Partition: "low", Node: "n2", GPUType: "v100",
		GPUs: 2, TimeLimitMinutes: 7, Rendezvous: "/home/alice/run/.easyscale/42", Script: "srun w"}
	tests := []struct {
		name    string
		edit    func(*ExtraSpec)
		asRoot  bool
		want    []string // must appear
		notWant []string // must not appear (prefixes)
		wantErr bool
	}{
		{"a typed GPU request names the type", func(*ExtraSpec) {}, false,
			[]string{"--gres=gpu:v100:2", "--ntasks=2", "--export=ALL,SLURM_GPUS_PER_TASK=1", "--time=7", "--nodelist=n2", "--no-requeue", "--account=proj", "--wrap=srun w"}, []string{"--uid", "--qos"}, false},
		{"untyped GPUs give gpu:N and one task per GPU", func(s *ExtraSpec) { s.GPUType = "" }, false,
			[]string{"--gres=gpu:2", "--ntasks=2", "--export=ALL,SLURM_GPUS_PER_TASK=1"}, nil, false},
		{"four lent GPUs run four worker tasks", func(s *ExtraSpec) { s.GPUs = 4 }, false,
			[]string{"--gres=gpu:v100:4", "--ntasks=4", "--export=ALL,SLURM_GPUS_PER_TASK=1"}, nil, false},
		{"a CPU node gets no GRES and one task", func(s *ExtraSpec) { s.GPUs = 0 }, false, []string{"--ntasks=1"},
			[]string{"--gres", "--export"}, false},
		{"root submits in the user's name and group", func(s *ExtraSpec) { s.Group = "1001" }, true, []string{"--uid=alice", "--gid=1001"}, nil, false},
		{"root submits in the user's and the group's names, not their numbers (Slurm looks digits up as a name first)",
			func(s *ExtraSpec) { s.UID, s.Group, s.GroupName = "1001", "1001", "alice" }, true,
			[]string{"--uid=alice", "--gid=alice"}, []string{"--uid=1001", "--gid=1001"}, false},
		{"root refuses a user without a group (the job would run with group root)", func(*ExtraSpec) {}, true, nil, nil, true},
		{"root refuses a group that is not a number", func(s *ExtraSpec) { s.Group = "0 --uid=root" }, true, nil, nil, true},
		{"root does not pass --uid=root", func(s *ExtraSpec) { s.User = "root" }, true, nil, []string{"--uid", "--gid"}, false},
		{"a QOS is passed on", func(s *ExtraSpec) { s.QOS = "scavenger" }, false, []string{"--qos=scavenger"}, nil, false},
		{"no account leaves the user's default", func(s *ExtraSpec) { s.Account = "" }, false, nil, []string{"--account"}, false},
		{"a zero time limit is refused", func(s *ExtraSpec) { s.TimeLimitMinutes = 0 }, false, nil, nil, true},
		{"a missing node is refused", func(s *ExtraSpec) { s.Node = "" }, false, nil, nil, true},
		{"an empty script is refused", func(s *ExtraSpec) { s.Script = "" }, false, nil, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			args, err := s.Args(tc.asRoot)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Args = %q, want an error", args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if args[len(args)-1] != "--wrap="+s.Script {
				t.Errorf("last argument %q, want --wrap", args[len(args)-1])
			}
			joined := " " + strings.Join(args, " ") + " "
			for _, w := range append(tc.want, "--job-name=es-extra-42", "--comment=es-extra parent=42", "--partition=low", "--nodes=1") {
				if !strings.Contains(joined, " "+w+" ") {
					t.Errorf("args %q lack %q", args, w)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(joined, " "+nw) {
					t.Errorf("args %q have %q", args, nw)
				}
			}
		})
	}
}

func TestWorkerScriptQuotesPathsForTheShell(t *testing.T) {
	dir := "/home/o'neil/my run/.easyscale/7"
	script := WorkerScript(`printf '%s|' {job_id} {rendezvous} {coordinator_file} {token_file}`, "7", dir)
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", script, err)
	}
	want := "7|" + dir + "|" + dir + "/coordinator|" + dir + "/token|"
	if string(out) != want {
		t.Fatalf("the shell saw %q, want %q (script %q)", out, want, script)
	}
}

func TestDefaultWorkerCommandJoinsTheCoordinator(t *testing.T) {
	got := WorkerScript(`srun easyscale worker --join "$(cat {coordinator_file})" --token-file {token_file}`, "42", "/w/.easyscale/42")
	want := `srun easyscale worker --join "$(cat /w/.easyscale/42/coordinator)" --token-file /w/.easyscale/42/token`
	if got != want {
		t.Fatalf("script %q, want %q", got, want)
	}
}

// An extra job gets none of the root daemon's environment: sbatch runs
// with PATH and SLURM_CONF alone (its --export=ALL hands the submitter's
// environment to the job), whatever the daemon holds.
func TestExtraJobsAreSubmittedWithoutTheDaemonsEnvironment(t *testing.T) {
	daemonEnv := []string{"PATH=/usr/sbin:/usr/bin", "HOME=/root", "SLURM_CONF=/etc/slurm/lab.conf", "SECRET_TOKEN=hunter2",
		"SBATCH_EXPORT=ALL", "LD_PRELOAD=/x.so", "SLURM_JOB_ID=9"}
	var gotEnv []string
	run := slurmcli.Runner{Env: daemonEnv, Exec: func(_ context.Context, env []string, name string, _ ...string) ([]byte, error) {
		if name == "sbatch" {
			gotEnv = env
		}
		return []byte("57\n"), nil
	}}
	a := &SlurmActuator{Slurm: run}
	spec := ExtraSpec{Parent: "42", Partition: "low", Node: "n2", GPUs: 1, TimeLimitMinutes: 3, Script: "srun w"}
	if _, err := a.Submit(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/usr/sbin:/usr/bin", "SLURM_CONF=/etc/slurm/lab.conf"}
	if strings.Join(gotEnv, "\n") != strings.Join(want, "\n") {
		t.Errorf("sbatch ran with environment %q, want %q", gotEnv, want)
	}
}

// A daemon with neither PATH nor SLURM_CONF (started with env -i) must not
// hand sbatch a nil environment, which os/exec reads as its own.
func TestSubmitEnvIsNeverNil(t *testing.T) {
	if env := SubmitEnv([]string{"HOME=/root", "DAEMON_SECRET=s3cret"}); env == nil || len(env) != 0 {
		t.Fatalf("SubmitEnv = %#v, want an empty, non-nil environment", env)
	}
}

func TestSlurmActuatorRunsSbatchAndScancel(t *testing.T) {
	var calls []string
	reply := map[string]struct {
		out string
		err error
	}{}
	run := slurmcli.Runner{Exec: func(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
		line := name + " " + strings.Join(args, " ")
		calls = append(calls, line)
		r := reply[name]
		return []byte(r.out), r.err
	}}
	a := &SlurmActuator{Slurm: run}
	spec := ExtraSpec{Parent: "42", Partition: "low", Node: "n2", GPUs: 1, TimeLimitMinutes: 3, Script: "srun w"}
	tests := []struct {
		name  string
		reply map[string]struct {
			out string
			err error
		}
		do      func() (string, error)
		want    string // the command line run
		wantID  string
		wantErr bool
	}{
		{"sbatch --parsable output gives the job id", map[string]struct {
			out string
			err error
		}{"sbatch": {"57\n", nil}},
			func() (string, error) { return a.Submit(context.Background(), spec) }, "sbatch --parsable --job-name=es-extra-42", "57", false},
		{"a cluster suffix is dropped", map[string]struct {
			out string
			err error
		}{"sbatch": {"58;lab\n", nil}},
			func() (string, error) { return a.Submit(context.Background(), spec) }, "sbatch", "58", false},
		{"sbatch printing no id is an error", map[string]struct {
			out string
			err error
		}{"sbatch": {"Submitted\n", nil}},
			func() (string, error) { return a.Submit(context.Background(), spec) }, "sbatch", "", true},
		{"a failing sbatch is an error naming the node", map[string]struct {
			out string
			err error
		}{"sbatch": {"", &slurmcli.CommandError{Command: "sbatch", Err: errors.New("exit status 1"), Stderr: "Invalid partition"}}},
			func() (string, error) { return a.Submit(context.Background(), spec) }, "sbatch", "", true},
		{"a signal is scancel --signal=TERM", nil,
			func() (string, error) { return "", a.Signal(context.Background(), "57") }, "scancel --signal=TERM 57", "", false},
		{"a cancel is plain scancel", nil,
			func() (string, error) { return "", a.Cancel(context.Background(), "57") }, "scancel 57", "", false},
		{"cancelling a job Slurm forgot is not an error", map[string]struct {
			out string
			err error
		}{"scancel": {"", &slurmcli.CommandError{Command: "scancel", Err: errors.New("exit status 1"), Stderr: "scancel: error: Invalid job id 57"}}},
			func() (string, error) { return "", a.Cancel(context.Background(), "57") }, "scancel 57", "", false},
		{"cancelling a completed job is not an error", map[string]struct {
			out string
			err error
		}{"scancel": {"", &slurmcli.CommandError{Command: "scancel", Err: errors.New("exit status 1"), Stderr: "Kill job error on job id 57: Job/step already completing or completed"}}},
			func() (string, error) { return "", a.Cancel(context.Background(), "57") }, "scancel 57", "", false},
		{"scancel failing otherwise is an error", map[string]struct {
			out string
			err error
		}{"scancel": {"", &slurmcli.CommandError{Command: "scancel", Err: errors.New("exit status 1"), Stderr: "Unable to contact slurm controller"}}},
			func() (string, error) { return "", a.Cancel(context.Background(), "57") }, "scancel 57", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls, reply = nil, tc.reply
			id, err := tc.do()
			if (err != nil) != tc.wantErr || id != tc.wantID {
				t.Fatalf("got %q, %v; want id %q, error %v", id, err, tc.wantID, tc.wantErr)
			}
			if len(calls) != 1 || !strings.HasPrefix(calls[0], tc.want) {
				t.Fatalf("ran %q, want %q...", calls, tc.want)
			}
		})
	}
}

func TestParseExtraComment(t *testing.T) {
	tests := []struct {
		name, comment, parent string
		ok                    bool
	}{
		{"the contract's comment gives the parent", "es-extra parent=42", "42", true},
		{"extra fields make it a user's comment", "es-extra note=x parent=7", "", false},
		{"trailing words make it a user's comment", "es-extra parent=7 mine", "", false},
		{"other spacing makes it a user's comment", "es-extra  parent=7", "", false},
		{"a non-numeric parent is refused", "es-extra parent=4x", "", false},
		{"an elastic job's own comment is not an extra", "es-req min=1 max=4 lw=8 d1", "", false},
		{"a user's comment is not an extra", "es-extra-ish parent=1", "", false},
		{"no parent is not an extra", "es-extra", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := parseExtraComment(tc.comment)
			if p != tc.parent || ok != tc.ok {
				t.Fatalf("parseExtraComment(%q) = %q, %v; want %q, %v", tc.comment, p, ok, tc.parent, tc.ok)
			}
		})
	}
}

func FuzzParseExtraComment(f *testing.F) {
	f.Add("es-extra parent=42")
	f.Add("es-extra parent=")
	f.Add("es step=1/2 workers=1/4 d1 req=1-2")
	f.Fuzz(func(t *testing.T, c string) {
		p, ok := parseExtraComment(c)
		if !ok {
			return
		}
		if !slurmcli.Digits(p) || c != ExtraComment(p) {
			t.Fatalf("parent %q of %q: not a job id, or the comment is not exactly the extra form", p, c)
		}
		if q, ok := parseExtraComment(ExtraComment(p)); !ok || q != p {
			t.Fatalf("round trip of parent %q gave %q, %v", p, q, ok)
		}
	})
}

// TestRootSubmitsAsTheOwnersNamesCheckedAgainstTheJobsUID submits as root
// for the system's nobody (Debian: uid 65534, primary group nogroup): sbatch
// gets the user's and the group's names, since Slurm looks digits up as a
// name first (an account named "23184" took the extra jobs of uid 23184:
// helper 84's finding), and a user whose name does not give the job's uid
// is refused without running sbatch.
func TestRootSubmitsAsTheOwnersNamesCheckedAgainstTheJobsUID(t *testing.T) {
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Skipf("nobody's group %s has no name here: %v", u.Gid, err)
	}
	var sbatch []string
	run := slurmcli.Runner{Exec: func(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
		if name == "sbatch" {
			sbatch = args
		}
		return []byte("57\n"), nil
	}}
	a := &SlurmActuator{Slurm: run, AsRoot: true}
	spec := ExtraSpec{Parent: "42", User: "nobody", UID: u.Uid, Partition: "low", Node: "n2", GPUs: 1, TimeLimitMinutes: 3, Script: "srun w"}
	if _, err := a.Submit(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--uid=nobody", "--gid=" + g.Name} {
		if !slices.Contains(sbatch, want) {
			t.Errorf("sbatch %q, want %s", sbatch, want)
		}
	}
	sbatch = nil
	spec.UID = "4242"
	if _, err := a.Submit(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "not the job's uid 4242") || sbatch != nil {
		t.Errorf("a name giving another uid than the job's: error %v, sbatch %q; want refused, nothing run", err, sbatch)
	}
	if name, err := ownerGroup(u.Gid); err != nil || name != g.Name {
		t.Errorf("ownerGroup(%s) = %q, %v; want %q", u.Gid, name, err, g.Name)
	}
	if _, err := user.LookupGroup("4243"); err == nil {
		t.Skip("a group here is named 4243")
	}
	if name, err := ownerGroup("4243"); err != nil || name != "" {
		t.Errorf("ownerGroup of a gid with no name and no group named with its digits = %q, %v; want the digits passed as they are", name, err)
	}
}
