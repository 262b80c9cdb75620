package cluster

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

const smallJob = `
task = "mnist"
logical_workers = 4
micro_batch = 4
steps = 100
seed = 11
[model]
channels = [2, 4]
hidden = 16
dropout = 0.2
[optimizer]
lr = 0.05
momentum = 0.9
`

func setup(t *testing.T) (*jobspec.Spec, workload.Workload) {
	t.Helper()
	spec, err := jobspec.Parse(smallJob)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := workload.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return spec, wl
}

// referenceAndCoordinator runs spec in process for steps (the reference
// digest) and starts a coordinator whose log goes to the returned builder.
func referenceAndCoordinator(t *testing.T, spec *jobspec.Spec, wl workload.Workload, steps int64) (string, *Coordinator, *strings.Builder) {
	t.Helper()
	ref, err := trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true})
	if err != nil {
		t.Fatal(err)
	}
	logs := &strings.Builder{}
	log := hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: logs}})
	c, err := NewCoordinator(CoordinatorOptions{Spec: spec, Data: wl.Data(), StateDir: t.TempDir(), JoinTimeout: 10 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return ref.Digest, c, logs
}

func startWorker(t *testing.T, c *Coordinator) chan error {
	t.Helper()
	secret, err := auth.LoadSecret(c.TokenPath())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- RunWorker(context.Background(), WorkerOptions{Join: c.Addr(), Secret: secret, JobID: c.jobID, Threads: 1, JoinTimeout: 5 * time.Second})
	}()
	return done
}

// TestCoordinatorMatchesTheLocalExecutor runs two worker sessions (as
// goroutines, over real loopback TCP with the real protocol and ring),
// then admits a third mid-run, and compares with the in-process run.
func TestCoordinatorMatchesTheLocalExecutor(t *testing.T) {
	spec, wl := setup(t)
	const steps = 12
	ref, c, logs := referenceAndCoordinator(t, spec, wl, steps)
	w1, w2 := startWorker(t, c), startWorker(t, c)
	// After step 3 a late joiner arrives; it is admitted at a step boundary.
	onStep := func(step, _ int64, _ int) {
		if step != 3 {
			return
		}
		startWorker(t, c)
		for deadline := time.Now().Add(10 * time.Second); len(c.joiners) == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("the late joiner was not waiting for admission 10 s after it started")
				return
			}
		}
	}
	sum, err := trainer.Run(context.Background(), trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true,
		Executor: c, Schedule: schedule.Schedule{{Workers: 2}}, OnStep: onStep})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Digest != ref {
		t.Fatalf("process-protocol digest %s, in-process %s", sum.Digest, ref)
	}
	if n := strings.Count(logs.String(), "admitted"); n != 3 {
		t.Fatalf("%d workers admitted, want 3 (the late joiner too):\n%s", n, logs.String())
	}
	for _, w := range []chan error{w1, w2} {
		if err := <-w; err != ErrLeft {
			t.Fatalf("a worker ended with %v, want ErrLeft after the job finished", err)
		}
	}
}

// TestJoinerOfAnotherVersionIsRefused authenticates correctly but speaks
// another protocol version: the coordinator closes the connection.
func TestJoinerOfAnotherVersionIsRefused(t *testing.T) {
	spec, wl := setup(t)
	c, err := NewCoordinator(CoordinatorOptions{Spec: spec, Data: wl.Data(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	secret, _ := auth.LoadSecret(c.TokenPath())
	nc, err := net.Dial("tcp", c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := auth.Client(context.Background(), nc, auth.Config{JobID: c.jobID, Secret: secret}, "worker"); err != nil {
		t.Fatal(err)
	}
	p := &peer{c: wire.NewConn(nc, 5*time.Second, wire.MaxTensor)}
	var w welcomeMsg
	if err := p.recvJSON(typeWelcome, &w); err != nil {
		t.Fatal(err)
	}
	if err := p.send(typeJoin, joinMsg{Version: ProtocolVersion + 1, JobID: c.jobID}, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.recv(); err == nil {
		t.Fatal("the coordinator answered a joiner of another protocol version")
	}
}

func TestStateRoundTrip(t *testing.T) {
	spec, wl := setup(t)
	a, _ := trainer.NewReplica(spec, wl, 1)
	wl.InitNet(a.Net, 5)
	a.Apply(make([]float32, a.NumParams()), 0.1) // momentum buffers exist
	state, names, lens := packState(a)
	b, _ := trainer.NewReplica(spec, wl, 1)
	if err := loadState(b, state, names, lens); err != nil {
		t.Fatal(err)
	}
	again, _, _ := packState(b)
	if stateChecksum(again) != stateChecksum(state) {
		t.Fatal("state changed in a pack/load round trip")
	}
	if err := loadState(b, state[:len(state)-1], names, lens); err == nil {
		t.Fatal("a truncated state was accepted")
	}
}

func TestTokenFilesArePrivate(t *testing.T) {
	dir := t.TempDir()
	if _, err := ensureToken(dir, "job/1"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{TokenFile, JobIDFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	if _, err := ensureToken(dir, "job/2"); err == nil || !strings.Contains(err.Error(), "belongs to job job/1") {
		t.Fatalf("another job took over the token directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, JobIDFile)); strings.TrimSpace(string(b)) != "job/1" {
		t.Fatalf("the job-id file was overwritten: %q", b)
	}
	os.Chmod(filepath.Join(dir, TokenFile), 0o644)
	if _, err := ensureToken(dir, "job/1"); err == nil || !strings.Contains(err.Error(), "chmod") {
		t.Fatalf("a world-readable token was accepted: %v", err)
	}
}

// syncWriter serialises writes from the coordinator's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
