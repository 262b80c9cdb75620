package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
)

// fakeScontrol answers squeue for job 7 (fakeSlurm), `scontrol show
// node|config` and records `scontrol requeue`; batchHostStates are the
// batch host's successive states (the last one repeats).
type fakeScontrol struct {
	mu              sync.Mutex
	jobState        string
	batchHostStates []string
	requeued        []string
}

func (f *fakeScontrol) exec(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmd := name + " " + strings.Join(args, " ")
	switch {
	case name == "squeue":
		job := slurmcli.Job{ID: "7", Name: "es-mnist", State: f.jobState, Partition: "normal", NodeList: "n[2-3]", BatchHost: "n1", User: "u", WorkDir: "/w"}
		return fakeSlurm{job: job}.exec(ctx, env, name, args...)
	case cmd == "scontrol show node -o":
		st := f.batchHostStates[0]
		if len(f.batchHostStates) > 1 {
			f.batchHostStates = f.batchHostStates[1:]
		}
		return []byte("NodeName=n1 State=" + st + " NodeAddr=127.0.0.1 Port=17211\nNodeName=n2 State=MIXED NodeAddr=127.0.0.1 Port=17212\n"), nil
	case cmd == "scontrol show config":
		return []byte("SlurmctldTimeout        = 120 sec\nSlurmdTimeout           = 1 sec\n"), nil
	case strings.HasPrefix(cmd, "scontrol requeue "):
		f.requeued = append(f.requeued, args[1])
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected command %q", cmd)
}

func TestAWorkerRequeuesTheJobOnlyWhenTheBatchHostIsDown(t *testing.T) {
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
			got := s.requeueOrphan(context.Background(), 10*time.Millisecond, 0)
			if got != tc.want || (len(f.requeued) == 1) != tc.want {
				t.Fatalf("requeueOrphan = %v, requeued %v; want %v", got, f.requeued, tc.want)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("took %v, more than SlurmdTimeout (1 s) and a margin", took)
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
