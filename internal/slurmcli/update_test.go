package slurmcli

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// refusal is what 24.11's scontrol prints when an update would change a
// running job's task count (recorded on the current lab).
var refusal = &CommandError{Command: "scontrol update", Err: errors.New("exit status 1"),
	Stderr: "Job is no longer pending execution for job 7"}

func TestUpdateJobKeepsARunningJobsTaskCountWhenSlurmRefusesToChangeIt(t *testing.T) {
	tests := []struct {
		name   string
		first  error  // the first scontrol update's error
		squeue string // squeue's State and NumTasks
		retry  error  // the second scontrol update's error
		want   []string
		fails  bool
	}{
		{name: "22.05, or a job without --ntasks-per-node: the first update goes through",
			want: []string{"scontrol update JobId=7 NumNodes=2"}},
		{name: "24.11 refuses a running job's shrink: its task count is read and passed along",
			first: refusal, squeue: "RUNNING 3\n",
			want: []string{"scontrol update JobId=7 NumNodes=2", "squeue --noheader --jobs=7 --Format=State:0 ,NumTasks:0",
				"scontrol update JobId=7 NumNodes=2 NumTasks=3"}},
		{name: "a pending job's refusal stands (its task count may change, so that is not why)",
			first: refusal, squeue: "PENDING 3\n", fails: true,
			want: []string{"scontrol update JobId=7 NumNodes=2", "squeue --noheader --jobs=7 --Format=State:0 ,NumTasks:0"}},
		{name: "a refusal for another reason is not retried",
			first: &CommandError{Command: "scontrol update", Err: errors.New("exit status 1"), Stderr: "Invalid job id specified"},
			fails: true, want: []string{"scontrol update JobId=7 NumNodes=2"}},
		{name: "a retry that fails too is the error",
			first: refusal, squeue: "RUNNING 3\n", retry: refusal, fails: true,
			want: []string{"scontrol update JobId=7 NumNodes=2", "squeue --noheader --jobs=7 --Format=State:0 ,NumTasks:0",
				"scontrol update JobId=7 NumNodes=2 NumTasks=3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			updates := 0
			r := Runner{Env: []string{}, Exec: func(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
				ran = append(ran, name+" "+strings.Join(args, " "))
				if name == "squeue" {
					return []byte(tc.squeue), nil
				}
				if updates++; updates == 1 {
					return nil, tc.first
				}
				return nil, tc.retry
			}}
			err := r.SetNodes(context.Background(), "7", 2)
			if (err != nil) != tc.fails {
				t.Fatalf("SetNodes: %v, want failure %v", err, tc.fails)
			}
			if err != nil && !strings.Contains(err.Error(), "updating job 7 (NumNodes=2") {
				t.Errorf("error %q does not say what was being done", err)
			}
			if strings.Join(ran, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("ran:\n%s\nwant:\n%s", strings.Join(ran, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestUpdateJobKeepsTheTaskCountForEveryFieldAfterAShrink(t *testing.T) {
	// after a shrink on 24.11 the job's comment cannot be updated alone either
	var ran []string
	r := Runner{Env: []string{}, Exec: func(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
		ran = append(ran, name+" "+strings.Join(args, " "))
		switch {
		case name == "squeue":
			return []byte("RUNNING 1\n"), nil
		case !strings.Contains(strings.Join(args, " "), "NumTasks="):
			return nil, refusal
		}
		return nil, nil
	}}
	if err := r.UpdateJob(context.Background(), "7", "Comment=es step=5/10 workers=1/8 d1 req=1-2"); err != nil {
		t.Fatal(err)
	}
	if last := ran[len(ran)-1]; last != "scontrol update JobId=7 Comment=es step=5/10 workers=1/8 d1 req=1-2 NumTasks=1" {
		t.Errorf("last command %q", last)
	}
}

func TestParseStateAndTasks(t *testing.T) {
	tests := []struct {
		name, out string
		running   bool
		tasks     int
		field     string // of the *ParseError; "" for none
		noJob     bool
	}{
		{name: "a running job", out: "RUNNING 3\n", running: true, tasks: 3},
		{name: "a suspended job is shrunk in place too", out: "SUSPENDED 2", running: true, tasks: 2},
		{name: "a pending job", out: "PENDING 4\n", tasks: 4},
		{name: "no line: squeue does not know the job", out: "", noJob: true},
		{name: "a count that is not a number", out: "RUNNING x\n", field: "NumTasks"},
		{name: "no tasks is not a count", out: "RUNNING 0\n", field: "NumTasks"},
		{name: "one field", out: "RUNNING\n", field: "State"},
		{name: "two jobs", out: "RUNNING 3\nRUNNING 2\n", field: "State"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			running, tasks, err := ParseStateAndTasks("7", []byte(tc.out))
			var pe *ParseError
			switch {
			case tc.noJob:
				if !errors.Is(err, ErrNoSuchJob) {
					t.Errorf("err %v, want ErrNoSuchJob", err)
				}
			case tc.field != "":
				if !errors.As(err, &pe) || pe.Field != tc.field || pe.ID != "7" {
					t.Errorf("err %v, want a *ParseError of job 7, field %s", err, tc.field)
				}
			case err != nil || running != tc.running || tasks != tc.tasks:
				t.Errorf("= %v, %d, %v; want %v, %d", running, tasks, err, tc.running, tc.tasks)
			}
		})
	}
}

func FuzzParseStateAndTasks(f *testing.F) {
	for _, s := range []string{"RUNNING 3\n", "PENDING 1", "", "RUNNING x", "RUNNING 3\nRUNNING 2\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		running, tasks, err := ParseStateAndTasks("7", []byte(s))
		if err != nil {
			return
		}
		// what it read prints back as the same line
		state := strings.Fields(s)[0]
		if tasks < 1 || running != (state == "RUNNING" || state == "SUSPENDED") {
			t.Fatalf("ParseStateAndTasks(%q) = %v, %d", s, running, tasks)
		}
	})
}
