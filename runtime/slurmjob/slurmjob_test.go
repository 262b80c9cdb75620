package slurmjob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	base := map[string]string{"SLURM_JOB_ID": "42", "SLURM_PROCID": "1", "SLURM_NTASKS": "3", "SLURM_SUBMIT_DIR": "/home/u", "SLURM_RESTART_COUNT": "2"}
	task, ok, err := FromEnv(env(base))
	if err != nil || !ok {
		t.Fatalf("FromEnv = %v, %v", ok, err)
	}
	if task.ProcID != 1 || task.NTasks != 3 || task.RestartCount != 2 || task.Rendezvous != "/home/u/.easyscale/42" || task.IsCoordinator() {
		t.Fatalf("task = %+v", task)
	}
	if _, ok, _ := FromEnv(env(map[string]string{})); ok {
		t.Fatal("a process outside Slurm was taken for a task")
	}
	for _, bad := range []map[string]string{
		{"SLURM_JOB_ID": "1", "SLURM_PROCID": "x"},
		{"SLURM_JOB_ID": "1", "SLURM_PROCID": "3", "SLURM_NTASKS": "3", "SLURM_SUBMIT_DIR": "/"},
		{"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
	} {
		if _, _, err := FromEnv(env(bad)); err == nil {
			t.Errorf("FromEnv(%v) accepted a malformed environment", bad)
		}
	}
}

func TestRetireStaleMovesAnEarlierJobsDirectoryOnlyOnTheFirstRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "42")
	os.MkdirAll(filepath.Join(dir, "state"), 0o700)
	if moved, err := RetireStale(dir, 1, time.Now()); err != nil || moved != "" {
		t.Fatalf("a requeued job's directory was moved: %q %v", moved, err)
	}
	moved, err := RetireStale(dir, 0, time.Now())
	if err != nil || !strings.HasPrefix(moved, dir+".old-") {
		t.Fatalf("RetireStale = %q, %v", moved, err)
	}
	if _, err := os.Stat(filepath.Join(moved, "state")); err != nil {
		t.Fatalf("the old state was not kept: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("the stale directory is still in place")
	}
}

func TestCoordinatorAddressRoundTripAndStaleness(t *testing.T) {
	dir := t.TempDir()
	// A run whose start is unknown (Start 0) reads the address by the
	// file's age.
	unknown := Run{JobID: "42"}
	if err := PublishCoordinator(dir, "10.0.0.1:7000", unknown); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if addr, err := WaitCoordinator(ctx, dir, unknown, time.Now().Add(-time.Minute)); err != nil || addr != "10.0.0.1:7000" {
		t.Fatalf("WaitCoordinator = %q, %v", addr, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, CoordinatorFile)); err != nil || string(b) != "10.0.0.1:7000\n" {
		t.Fatalf("the plain coordinator file (for extra jobs) holds %q, %v", b, err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := WaitCoordinator(short, dir, unknown, time.Now().Add(time.Hour)); err == nil {
		t.Fatal("a stale address was accepted")
	}
}

// A requeued job's rendezvous directory holds the files of its earlier
// runs: a task of run R reads only run R's.
func TestWaitCoordinatorReadsOnlyItsOwnRun(t *testing.T) {
	run := func(restart int) Run { return Run{JobID: "42", Restart: restart, Start: 1_750_000_000} }
	tests := []struct {
		name     string
		setup    func(dir string) error
		run      int
		wantAddr string
		wantErr  error // nil: wantAddr; context.DeadlineExceeded: still waiting
	}{
		{"the first run's finished coordinator is not the requeued run's", func(dir string) error {
			if err := PublishCoordinator(dir, "10.0.0.1:7000", run(0)); err != nil {
				return err
			}
			return RecordExit(dir, run(0), 0)
		}, 1, "", context.DeadlineExceeded},
		{"the requeued run's coordinator is found beside the first run's files", func(dir string) error {
			if err := PublishCoordinator(dir, "10.0.0.1:7000", run(0)); err != nil {
				return err
			}
			if err := RecordExit(dir, run(0), 0); err != nil {
				return err
			}
			return PublishCoordinator(dir, "10.0.0.2:7001", run(1))
		}, 1, "10.0.0.2:7001", nil},
		{"a run whose coordinator already ended says so", func(dir string) error {
			if err := PublishCoordinator(dir, "10.0.0.2:7001", run(1)); err != nil {
				return err
			}
			return RecordExit(dir, run(1), 0)
		}, 1, "", ErrEnded},
		{"a run whose coordinator failed before publishing says so", func(dir string) error {
			return RecordExit(dir, run(2), 1)
		}, 2, "", ErrEnded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			addr, err := WaitCoordinator(ctx, dir, run(tc.run), time.Now().Add(-time.Minute))
			if addr != tc.wantAddr || !errors.Is(err, tc.wantErr) {
				t.Fatalf("WaitCoordinator = %q, %v; want %q, %v", addr, err, tc.wantAddr, tc.wantErr)
			}
		})
	}
}

func TestRecordExitEndsTheRunAndKeepsThePlainFileForTheBatchScript(t *testing.T) {
	dir := t.TempDir()
	if _, ended := Ended(dir, Run{JobID: "42", Restart: 1}); ended {
		t.Fatal("a run without an exit status counts as ended")
	}
	if err := RecordExit(dir, Run{JobID: "42", Restart: 1}, 143); err != nil {
		t.Fatal(err)
	}
	if code, ended := Ended(dir, Run{JobID: "42", Restart: 1}); !ended || code != 143 {
		t.Fatalf("Ended = %d, %v; want 143, true", code, ended)
	}
	if _, ended := Ended(dir, Run{JobID: "42", Restart: 2}); ended {
		t.Fatal("run 1's exit status ended run 2")
	}
	if b, err := os.ReadFile(filepath.Join(dir, ExitCodeFile)); err != nil || string(b) != "143\n" {
		t.Fatalf("exit-code holds %q, %v; the batch script reads one number", b, err)
	}
}

// A job that reuses an earlier job's id finds that job's files in its
// rendezvous directory until its task 0 moves them aside: its tasks read
// only the files stamped with their own job's start.
func TestRendezvousFilesOfAnEarlierJobWithTheSameIDAreIgnored(t *testing.T) {
	earlier := Run{JobID: "42", Start: 1_700_000_000}
	this := Run{JobID: "42", Start: 1_750_000_000}
	unstamped := func(dir string) error { // as versions before the stamp wrote them
		for name, content := range map[string]string{"coordinator.0": "10.0.0.9:7000\n", "exit-code.0": "0\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				return err
			}
		}
		return nil
	}
	tests := []struct {
		name     string
		setup    func(dir string) error
		reader   Run
		wantAddr string
		wantErr  error  // nil: wantAddr; context.DeadlineExceeded: still waiting
		ignored  string // named in the error of a wait that timed out
	}{
		{"an earlier job's exit status is not this job's", func(dir string) error {
			if err := PublishCoordinator(dir, "10.0.0.9:7000", earlier); err != nil {
				return err
			}
			return RecordExit(dir, earlier, 0)
		}, this, "", context.DeadlineExceeded, "exit-code.0 (job 42 run 0 started 1700000000) is not this run's (job 42 run 0 started 1750000000)"},
		{"files without a stamp are an earlier version's, not this job's", unstamped, this, "", context.DeadlineExceeded, "coordinator.0 (no stamp) is not this run's"},
		{"this job's coordinator replaces the earlier job's files", func(dir string) error {
			if err := RecordExit(dir, earlier, 0); err != nil {
				return err
			}
			return PublishCoordinator(dir, "10.0.0.1:7000", this)
		}, this, "10.0.0.1:7000", nil, ""},
		{"this job's exit status ends its wait", func(dir string) error {
			return RecordExit(dir, this, 3)
		}, this, "", ErrEnded, ""},
		{"a reader that does not know its start reads any stamp", unstamped, Run{JobID: "42"}, "", ErrEnded, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			addr, err := WaitCoordinator(ctx, dir, tc.reader, time.Now().Add(-time.Minute))
			if addr != tc.wantAddr || !errors.Is(err, tc.wantErr) {
				t.Fatalf("WaitCoordinator = %q, %v; want %q, %v", addr, err, tc.wantAddr, tc.wantErr)
			}
			if tc.ignored != "" && !strings.Contains(err.Error(), tc.ignored) {
				t.Fatalf("WaitCoordinator's error %q does not name the file it ignored (%q)", err, tc.ignored)
			}
			if _, ended := Ended(dir, tc.reader); ended != errors.Is(tc.wantErr, ErrEnded) {
				t.Fatalf("Ended = %v, want %v", ended, errors.Is(tc.wantErr, ErrEnded))
			}
		})
	}
}

func TestTaskRunAndMinimumFromTheEnvironment(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		minNodes int
		wantMin  int
		wantRun  Run
	}{
		{"one task per node: the minimum nodes' tasks", map[string]string{"SLURM_NTASKS": "4", "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_START_TIME": "1750000000"}, 1, 1,
			Run{JobID: "42", Start: 1_750_000_000}},
		{"the step's nodes win over the job's", map[string]string{"SLURM_NTASKS": "8", "SLURM_STEP_NUM_NODES": "2", "SLURM_JOB_NUM_NODES": "4", "SLURM_RESTART_COUNT": "1"}, 1, 4,
			Run{JobID: "42", Restart: 1}},
		{"a job that is not elastic needs every task", map[string]string{"SLURM_NTASKS": "4", "SLURM_NNODES": "2"}, 0, 4, Run{JobID: "42"}},
		{"without a node count every task", map[string]string{"SLURM_NTASKS": "4"}, 1, 4, Run{JobID: "42"}},
		{"a minimum above the step's nodes is every task", map[string]string{"SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2"}, 3, 2, Run{JobID: "42"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{"SLURM_JOB_ID": "42", "SLURM_PROCID": "0", "SLURM_SUBMIT_DIR": "/home/u"}
			for k, v := range tc.env {
				m[k] = v
			}
			task, ok, err := FromEnv(env(m))
			if err != nil || !ok {
				t.Fatalf("FromEnv = %v, %v", ok, err)
			}
			if got := task.MinTasks(tc.minNodes); got != tc.wantMin {
				t.Errorf("MinTasks(%d) = %d, want %d", tc.minNodes, got, tc.wantMin)
			}
			if got := task.Run(); got != tc.wantRun {
				t.Errorf("Run() = %+v, want %+v", got, tc.wantRun)
			}
		})
	}
	if _, _, err := FromEnv(env(map[string]string{"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_SUBMIT_DIR": "/", "SLURM_JOB_START_TIME": "soon"})); err == nil ||
		!strings.Contains(err.Error(), "SLURM_JOB_START_TIME") {
		t.Fatalf("a malformed SLURM_JOB_START_TIME was accepted: %v", err)
	}
}
