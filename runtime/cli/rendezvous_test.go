package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// slurmTask is the task of job 7 that the Slurm environment env (plus the
// job id and the rendezvous directory dir) describes.
func slurmTask(t *testing.T, dir string, env map[string]string) *slurmjob.Task {
	t.Helper()
	m := map[string]string{"SLURM_JOB_ID": "7", "EASYSCALE_RENDEZVOUS_DIR": dir}
	for k, v := range env {
		m[k] = v
	}
	task, ok, err := slurmjob.FromEnv(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	if err != nil || !ok {
		t.Fatalf("FromEnv = %v, %v", ok, err)
	}
	return task
}

// squeueWatch answers squeue for job 7, started at start, and says on
// asked when it was first asked.
type squeueWatch struct {
	fake  fakeSlurm
	once  sync.Once
	asked chan struct{}
}

func newSqueueWatch(start string) *squeueWatch {
	job := slurmcli.Job{ID: "7", Name: "es-mnist", State: "RUNNING", Partition: "normal", NodeList: "n[1-2]", BatchHost: "n1",
		User: "u", WorkDir: "/w", StartTime: start}
	return &squeueWatch{fake: fakeSlurm{job: job}, asked: make(chan struct{})}
}

func (w *squeueWatch) runner() slurmcli.Runner {
	return slurmcli.Runner{Env: []string{}, Exec: func(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
		if name == "squeue" {
			w.once.Do(func() { close(w.asked) })
		}
		return w.fake.exec(ctx, env, name, args...)
	}}
}

// A job that reuses an earlier job's id (slurmctld lost its state, or the
// ids wrapped) in the same submit directory finds that job's rendezvous
// files until its task 0 moves them aside. A worker task that looks first
// must not take the earlier job's exit status for its own job's: it waits
// for its own coordinator, and stops only when that one records its exit.
func TestAWorkerTaskIgnoresTheRendezvousOfAnEarlierJobWithItsID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".easyscale", "7")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The earlier job 7 ended with exit status 0.
	for name, content := range map[string]string{"coordinator.0": "10.0.0.9:7000\n", "coordinator": "10.0.0.9:7000\n",
		"exit-code.0": "0\n", "exit-code": "0\n", "token": "old\n", "job-id": "old/0\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	slurm := newSqueueWatch("2025-06-01T10:00:00")
	var logs strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: &logs}})
	env := map[string]string{"SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2"}
	env["SLURM_PROCID"] = "1"
	worker := &slurmRun{task: slurmTask(t, dir, env), log: log, runner: slurm.runner(), joinWait: 30 * time.Second}
	env["SLURM_PROCID"] = "0"
	coordinator := &slurmRun{task: slurmTask(t, dir, env), log: log, runner: slurm.runner(), joinWait: 30 * time.Second}
	codes := make(chan int, 1)
	go func() { code, _ := worker.workerTask(context.Background()); codes <- code }()
	select {
	case code := <-codes:
		t.Fatalf("the worker task ended (exit %d) on the earlier job's rendezvous files:\n%s", code, logs.String())
	case <-slurm.asked: // it asks Slurm when its job started
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker task neither ended nor asked Slurm about its job in 10 s:\n%s", logs.String())
	}
	// Task 0 of this job moves the earlier job's directory aside, and its
	// coordinator ends (here at once, with exit status 3).
	if _, err := slurmjob.RetireStale(dir, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	coordinator.recordExit(3)
	select {
	case code := <-codes:
		if code != 0 || !strings.Contains(logs.String(), "exit status 3") || strings.Contains(logs.String(), "exit status 0") {
			t.Fatalf("the worker task exited %d; want 0 once its own coordinator ended with exit status 3:\n%s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker task still waits 10 s after its coordinator recorded its exit:\n%s", logs.String())
	}
}

const elasticJob = `
task = "mnist"
logical_workers = 4
micro_batch = 4
steps = 100
seed = 11
[model]
channels = [2, 4]
hidden = 16
[optimizer]
lr = 0.05
momentum = 0.9
`

// An elastic job (minimum 1 node of 2) whose second task never joins (it
// exited, or its node is slow) starts on the task that did once the join
// wait is over, instead of failing: the other task would join at a step
// boundary. A job that is not elastic still needs all its tasks.
func TestAnElasticSlurmJobStartsOnTheTasksThatJoined(t *testing.T) {
	spec, err := jobspec.Parse(elasticJob)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := workload.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	const steps = 6
	ref, err := trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		elastic string // EASYSCALE_ELASTIC
		wantErr string // "" for a run with the reference digest
	}{
		{"an elastic job starts on the one task that joined", "1-2", ""},
		{"an elastic job whose minimum did not join fails", "2", "only 1 of 2 workers joined"},
		{"a job that is not elastic needs all its tasks", "", "only 1 of 2 workers joined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(elastic.EnvElastic, tc.elastic)
			dir := filepath.Join(t.TempDir(), ".easyscale", "7")
			task := slurmTask(t, dir, map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2"})
			s := &slurmRun{task: task, listen: "127.0.0.1:0", threads: 1, log: hclog.NewNullLogger(),
				runner: newSqueueWatch("2025-06-01T10:00:00").runner(), joinWait: time.Second}
			opts := &trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true}
			finish, err := s.coordinatorTask(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := trainer.Run(context.Background(), *opts)
			finish(sum)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("the job did not start on the task that joined: %v", err)
			case tc.wantErr == "" && sum.Digest != ref.Digest:
				t.Fatalf("digest %s on the task that joined, %s on the fixed allocation", sum.Digest, ref.Digest)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("trainer.Run = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

// syncWriter serialises the log writes of a test's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
