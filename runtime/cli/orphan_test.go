package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
)

// fakeScontrol answers squeue for job 7 (fakeSlurm), `scontrol show
// node|config`, and records `scontrol requeue` and `scontrol update`;
// batchHostStates are the batch host's successive states (the last one
// repeats). Job 7 runs 3 tasks, one per node, on n[1-3] and lost n1 under
// --no-kill: Slurm counts 2 nodes and keeps 3 tasks.
type fakeScontrol struct {
	mu              sync.Mutex
	jobState        string
	batchHostStates []string
	requeued        []string
	updates         []string
	layoutKills     int    // how many task-layout squeues after the requeue Slurm's SIGTERM kills
	onDown          func() // called when the batch host reads DOWN (Slurm's SIGTERM cancelling the task's context)
	version         string // what `scontrol --version` prints ("" is "slurm-wlm 22.05.8")
}

func (f *fakeScontrol) exec(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmd := name + " " + strings.Join(args, " ")
	switch {
	case name == "squeue" && slices.Contains(args, "--Format="+slurmcli.TaskLayoutFormat):
		if len(f.requeued) > 0 && f.layoutKills > 0 {
			f.layoutKills--
			return nil, &slurmcli.CommandError{Command: "squeue", Err: errors.New("signal: terminated")}
		}
		if len(f.requeued) > 0 {
			return []byte("COMPLETING 2 3 1\n"), nil
		}
		return []byte(f.jobState + " 2 3 1\n"), nil
	case name == "squeue":
		job := slurmcli.Job{ID: "7", Name: "es-mnist", State: f.jobState, Partition: "normal", NodeList: "n[2-3]", BatchHost: "n1", User: "u", WorkDir: "/w"}
		return fakeSlurm{job: job}.exec(ctx, env, name, args...)
	case cmd == "scontrol show node -o":
		st := f.batchHostStates[0]
		if len(f.batchHostStates) > 1 {
			f.batchHostStates = f.batchHostStates[1:]
		}
		if strings.Contains(st, "DOWN") && f.onDown != nil {
			f.onDown()
		}
		return []byte("NodeName=n1 State=" + st + " NodeAddr=127.0.0.1 Port=17211\nNodeName=n2 State=MIXED NodeAddr=127.0.0.1 Port=17212\n"), nil
	case cmd == "scontrol --version":
		return []byte(cmp.Or(f.version, "slurm-wlm 22.05.8") + "\n"), nil
	case cmd == "scontrol show config":
		return []byte("SlurmctldTimeout        = 120 sec\nSlurmdTimeout           = 1 sec\n"), nil
	case strings.HasPrefix(cmd, "scontrol requeue "):
		if err := ctx.Err(); err != nil {
			return nil, err // as exec.CommandContext on a cancelled context
		}
		f.requeued = append(f.requeued, args[1])
		return nil, nil
	case strings.HasPrefix(cmd, "scontrol update "):
		f.updates = append(f.updates, cmd)
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected command %q", cmd)
}

func TestAWorkerRequeuesTheJobOnlyWhenTheBatchHostIsDown(t *testing.T) {
	t.Setenv("EASYSCALE_ELASTIC", "1-3")
	tests := []struct {
		name     string
		jobState string
		states   []string
		want     bool
	}{
		{"a batch host that Slurm set down is the coordinator's loss: requeue", "RUNNING", []string{"DOWN+NOT_RESPONDING"}, true},
		{"a silent batch host is waited for until Slurm sets it down", "RUNNING", []string{"MIXED", "MIXED+NOT_RESPONDING", "DOWN+NOT_RESPONDING"}, true},
		{"a batch host that stays up means the coordinator ended otherwise", "RUNNING", []string{"MIXED"}, false},
		{"a job already requeued by another task is left alone", "PENDING", []string{"DOWN"}, false},
		{"a job that is ending is left alone", "COMPLETING", []string{"DOWN"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeScontrol{jobState: tc.jobState, batchHostStates: tc.states}
			s := &slurmRun{task: &slurmjob.Task{JobID: "7"}, log: hclog.NewNullLogger(), runner: slurmcli.Runner{Env: []string{}, Exec: f.exec}}
			start := time.Now()
			got := s.requeueOrphan(context.Background(), 10*time.Millisecond, 0, false)
			if got != tc.want || (len(f.requeued) == 1) != tc.want {
				t.Fatalf("requeueOrphan = %v, requeued %v; want %v", got, f.requeued, tc.want)
			}
			// the requeued job's task count is lowered to its 2 nodes' (a
			// tester's job otherwise stayed PENDING until the lost node came back)
			if wantUpdates := map[bool]string{true: "scontrol update JobId=7 NumNodes=2 NumTasks=2"}[tc.want]; strings.Join(f.updates, "\n") != wantUpdates {
				t.Errorf("updates %q, want %q", f.updates, wantUpdates)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("took %v, more than SlurmdTimeout (1 s) and a margin", took)
			}
		})
	}
}

// The requeue makes Slurm SIGTERM every process of the step, a squeue the
// task has just started too (seen on the lab): the job's node and task
// counts are lowered all the same, by a later try.
func TestTheRequeuedJobIsFittedToItsNodesThoughSlurmsSIGTERMKillsAQuery(t *testing.T) {
	t.Setenv("EASYSCALE_ELASTIC", "1-3")
	f := &fakeScontrol{jobState: "RUNNING", batchHostStates: []string{"DOWN"}, layoutKills: 2}
	s := &slurmRun{task: &slurmjob.Task{JobID: "7"}, log: hclog.NewNullLogger(), runner: slurmcli.Runner{Env: []string{}, Exec: f.exec}}
	if !s.requeueOrphan(context.Background(), 10*time.Millisecond, 0, false) {
		t.Fatal("not requeued")
	}
	if strings.Join(f.updates, "\n") != "scontrol update JobId=7 NumNodes=2 NumTasks=2" {
		t.Fatalf("updates %q after two killed queries", f.updates)
	}
	// the SIGTERM also cancels the task's context: the fit runs all the same
	f.updates, f.layoutKills = nil, 1
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.fitRequeued(ctx, false)
	if strings.Join(f.updates, "\n") != "scontrol update JobId=7 NumNodes=2 NumTasks=2" {
		t.Fatalf("updates %q on a cancelled context", f.updates)
	}
}

// Slurm's own handling of the lost node SIGTERMs the step's tasks about
// when the task sees the batch host DOWN, cancelling its context: the
// requeue and the fit happen all the same (a clean-clone run saw
// "scontrol requeue: context canceled", and the job, requeued by Slurm
// unfitted, waited for the lost node).
func TestTheJobIsRequeuedAndFittedThoughSlurmsSIGTERMCancelsTheTask(t *testing.T) {
	t.Setenv("EASYSCALE_ELASTIC", "1-3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeScontrol{jobState: "RUNNING", batchHostStates: []string{"MIXED+NOT_RESPONDING", "DOWN+NOT_RESPONDING"}, onDown: cancel}
	s := &slurmRun{task: &slurmjob.Task{JobID: "7"}, log: hclog.NewNullLogger(), runner: slurmcli.Runner{Env: []string{}, Exec: f.exec}}
	if !s.requeueOrphan(ctx, 10*time.Millisecond, 0, true) || len(f.requeued) != 1 {
		t.Fatalf("requeued %v after the task's context was cancelled at the DOWN verdict, want job 7 requeued", f.requeued)
	}
	if strings.Join(f.updates, "\n") != "scontrol update JobId=7 NumNodes=2 NumTasks=2" {
		t.Fatalf("updates %q, want the requeued job fitted to its 2 nodes", f.updates)
	}
}

// A requeue that only ends a finished training asks for the nodes the job
// still had, however few: a tester's --elastic=4 job lost one of its 4
// nodes, the standby finished the training on 3, and the requeued run,
// asking for its minimum of 4, waited PENDING for the lost node. A requeue
// that resumes training keeps the elastic minimum.
func TestARequeueAfterAFinishedTrainingAsksForTheSurvivorsBelowTheMinimum(t *testing.T) {
	t.Setenv("EASYSCALE_ELASTIC", "4")
	for _, tc := range []struct {
		finished bool
		want     string
	}{{true, "scontrol update JobId=7 NumNodes=2 NumTasks=2"}, {false, "scontrol update JobId=7 NumNodes=4"}} {
		f := &fakeScontrol{jobState: "RUNNING", batchHostStates: []string{"DOWN"}}
		s := &slurmRun{task: &slurmjob.Task{JobID: "7"}, log: hclog.NewNullLogger(), runner: slurmcli.Runner{Env: []string{}, Exec: f.exec}}
		if !s.requeueOrphan(context.Background(), 10*time.Millisecond, 0, tc.finished) {
			t.Fatal("not requeued")
		}
		if strings.Join(f.updates, "\n") != tc.want {
			t.Errorf("finished %v: updates %q, want %q", tc.finished, f.updates, tc.want)
		}
	}
}

// A job that is not elastic keeps what it asked for: Slurm's own requeue
// would wait for its nodes too.
func TestARequeuedRigidJobKeepsItsRequest(t *testing.T) {
	t.Setenv("EASYSCALE_ELASTIC", "")
	f := &fakeScontrol{jobState: "RUNNING", batchHostStates: []string{"DOWN"}}
	s := &slurmRun{task: &slurmjob.Task{JobID: "7"}, log: hclog.NewNullLogger(), runner: slurmcli.Runner{Env: []string{}, Exec: f.exec}}
	if !s.requeueOrphan(context.Background(), 10*time.Millisecond, 0, false) || len(f.updates) != 0 {
		t.Fatalf("requeued %v, updates %q; want a requeue and no update", f.requeued, f.updates)
	}
}

// On a Slurm series where fitting a requeued job corrupts accounting
// (24.11; requeueFitSafeSeries) or whose version cannot be read, the task
// still requeues the job but leaves its node and task counts alone.
func TestARequeuedJobIsNotFittedOnASlurmWhereThatCorruptsAccounting(t *testing.T) {
	t.Setenv("EASYSCALE_ELASTIC", "1-3")
	for _, version := range []string{"slurm 24.11.5", "garbled"} {
		t.Run(version, func(t *testing.T) {
			f := &fakeScontrol{jobState: "RUNNING", batchHostStates: []string{"DOWN"}, version: version}
			s := &slurmRun{task: &slurmjob.Task{JobID: "7"}, log: hclog.NewNullLogger(), runner: slurmcli.Runner{Env: []string{}, Exec: f.exec}}
			if !s.requeueOrphan(context.Background(), 10*time.Millisecond, 0, false) || !slices.Equal(f.requeued, []string{"7"}) || len(f.updates) != 0 {
				t.Fatalf("Slurm %q: requeued %v, updates %q; want job 7 requeued and no update", version, f.requeued, f.updates)
			}
		})
	}
}

// A batch host lost before task 0 published the coordinator's address
// leaves the other tasks nothing to join: once Slurm sets it down, a task
// that waited its join timeout requeues the job (a tester's kill 0.2 s
// into a job left it RUNNING, idle, until its time limit). (While the
// batch host is up it exits 1 as before, after requeueOrphan's wait:
// TestAWorkerRequeuesTheJobOnlyWhenTheBatchHostIsDown.)
func TestAWorkerWithNoCoordinatorToJoinRequeuesWhenTheBatchHostIsDown(t *testing.T) {
	t.Setenv("EASYSCALE_ELASTIC", "1-3")
	for _, tc := range []struct {
		state    string
		wantCode int
	}{{"DOWN+NOT_RESPONDING", 0}} {
		t.Run(tc.state, func(t *testing.T) {
			f := &fakeScontrol{jobState: "RUNNING", batchHostStates: []string{tc.state}}
			s := &slurmRun{task: &slurmjob.Task{JobID: "7", Rendezvous: t.TempDir()}, log: hclog.NewNullLogger(),
				runner: slurmcli.Runner{Env: []string{}, Exec: f.exec}, joinWait: 50 * time.Millisecond}
			code, cp := s.workerTask(context.Background())
			if code != tc.wantCode || cp != nil {
				t.Fatalf("workerTask = %d, %v; want %d, nil", code, cp, tc.wantCode)
			}
			if requeued := len(f.requeued) == 1; requeued != (tc.wantCode == 0) {
				t.Fatalf("requeued %v with the batch host %s", f.requeued, tc.state)
			}
		})
	}
}
