package slurmcli

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestParseTaskLayout(t *testing.T) {
	tests := []struct {
		name  string
		out   string
		want  TaskLayout
		field string // the *ParseError's field; "" for success
		none  bool   // ErrNoSuchJob
	}{
		// lines recorded on the 22.05 lab: a requeued job that lost a node
		// under --no-kill, --nodes=2 --ntasks=3 and a plain --nodes=1
		{name: "requeued after a node loss", out: "PENDING 3 4 1\n", want: TaskLayout{"PENDING", 3, 4, 1}},
		{name: "no --ntasks-per-node prints 0", out: "PENDING 2 3 0\n", want: TaskLayout{"PENDING", 2, 3, 0}},
		{name: "NO_VAL16 is unset too", out: "RUNNING 1 1 65534", want: TaskLayout{"RUNNING", 1, 1, 0}},
		{name: "no line: the job is gone", out: "\n", none: true},
		{name: "two lines", out: "PENDING 3 4 1\nPENDING 3 4 1\n", field: "State"},
		{name: "a missing value", out: "PENDING 3 4\n", field: "State"},
		{name: "a node count that is no count", out: "PENDING x 4 1\n", field: "NumNodes"},
		{name: "no tasks", out: "PENDING 3 0 1\n", field: "NumTasks"},
		{name: "a negative per-node count", out: "PENDING 3 4 -1\n", field: "NTPerNode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTaskLayout("7", []byte(tc.out))
			var pe *ParseError
			switch {
			case tc.none:
				if !errors.Is(err, ErrNoSuchJob) {
					t.Fatalf("err = %v, want ErrNoSuchJob", err)
				}
			case tc.field != "":
				if !errors.As(err, &pe) || pe.Field != tc.field || pe.ID != "7" {
					t.Fatalf("err = %v, want a ParseError for field %s of job 7", err, tc.field)
				}
			case err != nil || got != tc.want:
				t.Fatalf("= %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseTaskLayout(f *testing.F) {
	for _, s := range []string{"PENDING 3 4 1\n", "PENDING 2 3 0", "", "RUNNING 1 1 65534", "A B C D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseTaskLayout("7", []byte(s))
		if err != nil {
			return
		}
		if l.Nodes < 1 || l.Tasks < 1 || l.TasksPerNode < 0 || l.TasksPerNode >= noVal16 || l.State != strings.Fields(s)[0] {
			t.Fatalf("ParseTaskLayout(%q) = %+v", s, l)
		}
	})
}

func TestFitRequeuedAsksForTheNodesAJobStillHasAndTheTasksTheyHold(t *testing.T) {
	tests := []struct {
		name     string
		squeue   string
		minNodes int
		want     Refit
		update   string // the scontrol update run; "" for none
	}{
		{name: "3 nodes left of 4 at one task per node", squeue: "COMPLETING 3 4 1\n", minNodes: 3, want: Refit{3, 3, 3},
			update: "scontrol update JobId=7 NumNodes=3 NumTasks=3"},
		{name: "2 nodes left at 2 tasks per node", squeue: "PENDING 2 8 2\n", minNodes: 1, want: Refit{2, 4, 2},
			update: "scontrol update JobId=7 NumNodes=2 NumTasks=4"},
		{name: "never below the job's elastic minimum", squeue: "COMPLETING 2 4 1\n", minNodes: 3, want: Refit{3, 3, 2},
			update: "scontrol update JobId=7 NumNodes=3 NumTasks=3"},
		{name: "tasks that fit are left", squeue: "COMPLETING 3 3 1\n", minNodes: 1, want: Refit{3, 0, 3},
			update: "scontrol update JobId=7 NumNodes=3"},
		{name: "no --ntasks-per-node: Slurm places the tasks", squeue: "COMPLETING 2 4 0\n", minNodes: 1, want: Refit{2, 0, 2},
			update: "scontrol update JobId=7 NumNodes=2"},
		{name: "a job that started again is not touched", squeue: "RUNNING 3 4 1\n", minNodes: 1},
		{name: "a job that is not elastic is not touched", squeue: "COMPLETING 3 4 1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var updates []string
			r := Runner{Env: []string{}, Exec: func(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
				cmd := name + " " + strings.Join(args, " ")
				if name == "squeue" {
					if cmd != "squeue --noheader --jobs=7 --Format="+TaskLayoutFormat {
						t.Errorf("ran %q", cmd)
					}
					return []byte(tc.squeue), nil
				}
				updates = append(updates, cmd)
				return nil, nil
			}}
			got, err := r.FitRequeued(context.Background(), "7", tc.minNodes)
			if err != nil || got != tc.want {
				t.Fatalf("FitRequeued = %+v, %v; want %+v", got, err, tc.want)
			}
			if strings.Join(updates, "\n") != tc.update {
				t.Errorf("updates %q, want %q", updates, tc.update)
			}
		})
	}
}

func TestFitRequeuedSaysWhatItWasDoingWhenSlurmRefuses(t *testing.T) {
	r := Runner{Env: []string{}, Exec: func(_ context.Context, _ []string, name string, _ ...string) ([]byte, error) {
		if name == "squeue" {
			return []byte("COMPLETING 3 4 1\n"), nil
		}
		return nil, &CommandError{Command: "scontrol update", Err: errors.New("exit status 1"), Stderr: "Access/permission denied"}
	}}
	_, err := r.FitRequeued(context.Background(), "7", 1)
	var ce *CommandError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "fitting requeued job 7 (4 tasks, 1 per node) to 3 nodes") {
		t.Fatalf("err = %v", err)
	}
}
