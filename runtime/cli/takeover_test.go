package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// byeLossProxy stands between the standby and the coordinator. Once
// swallowing, it drops everything the coordinator sends (its goodbye
// among them) and keeps the standby's connection open after the
// coordinator closed its side, until cut: the goodbye lost on a
// connection that breaks later.
type byeLossProxy struct {
	ln        net.Listener
	target    string
	swallow   atomic.Bool
	mu        sync.Mutex
	conns     []net.Conn // the standby's side
	accepting sync.WaitGroup
}

func newByeLossProxy(t *testing.T, target string) *byeLossProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &byeLossProxy{ln: ln, target: target}
	p.accepting.Add(1)
	go p.accept()
	t.Cleanup(func() { p.cut(); p.accepting.Wait() })
	return p
}

func (p *byeLossProxy) accept() {
	defer p.accepting.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := up.Read(buf)
				if n > 0 && !p.swallow.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			if !p.swallow.Load() {
				c.Close()
			}
		}()
	}
}

// cut closes the standby's connections and stops accepting.
func (p *byeLossProxy) cut() {
	p.ln.Close()
	p.drop()
}

// drop closes the standby's connections; the proxy still accepts.
func (p *byeLossProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// At a normal end the coordinator writes the checkpoint of the last step,
// says goodbye, releases the state database and records its exit status.
// A standby whose goodbye is lost, and whose connection then breaks
// before the exit status is recorded, finds the state free: it must not
// take over a finished job (whose takeover waited for a node-down that
// never comes, holding the job's end for SlurmdTimeout plus 30 s) but exit
// 0 once the exit status is recorded. When none comes (the coordinator
// died between the two) it records a takeover and the exit status 0 in
// the coordinator's place, training nothing, and then waits for Slurm to
// set the batch host DOWN to end the job.
func TestAStandbyDoesNotTakeOverAFinishedJob(t *testing.T) {
	spec, err := jobspec.Parse(elasticJob)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := workload.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	const steps = 6
	tests := []struct {
		name string
		// recordAfter is when the coordinator records its exit status
		// after the standby's connection broke (negative: never).
		recordAfter time.Duration
	}{
		{"the coordinator records its exit status a second after the standby lost it", time.Second},
		{"the coordinator died before recording its exit status", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(elastic.EnvElastic, "")
			dir := filepath.Join(t.TempDir(), ".easyscale", "7")
			var logs strings.Builder
			log := hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: &logs}})
			env := map[string]string{"SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_PROCID": "0", "SLURMD_NODENAME": "n1"}
			slurm := newSqueueWatch("2025-06-01T10:00:00")
			coordinator := &slurmRun{task: slurmTask(t, dir, env), listen: "127.0.0.1:0", threads: 1, log: log.Named("coordinator"),
				runner: slurm.runner(), joinWait: 20 * time.Second}
			env["SLURM_PROCID"], env["SLURMD_NODENAME"] = "1", "n2"
			standby := &slurmRun{task: slurmTask(t, dir, env), threads: 1, log: log.Named("standby"), runner: slurm.runner(),
				joinWait: 20 * time.Second, stop: steps, endGrace: 3 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			opts := &trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true}
			finish, err := coordinator.coordinatorTask(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			// The standby reaches the coordinator through the proxy.
			addr, ok := slurmjob.CoordinatorAddr(dir, coordinator.rendezvousRun(ctx))
			if !ok {
				t.Fatal("the coordinator published no address")
			}
			proxy := newByeLossProxy(t, addr)
			if err := slurmjob.PublishCoordinator(dir, proxy.ln.Addr().String(), coordinator.rendezvousRun(ctx)); err != nil {
				t.Fatal(err)
			}
			type result struct {
				code int
				cp   *cluster.StandbyCopy
				at   time.Time
			}
			results := make(chan result, 1)
			go func() { code, cp := standby.workerTask(ctx); results <- result{code, cp, time.Now()} }()
			onStep := opts.OnStep
			opts.OnStep = func(step, stop int64, workers int) {
				onStep(step, stop, workers)
				if step == steps { // committed and checkpointed: what follows is the goodbye
					proxy.swallow.Store(true)
				}
			}
			sum, err := trainer.Run(ctx, *opts)
			if err != nil {
				t.Fatalf("the run failed: %v\n%s", err, logs.String())
			}
			finish(sum) // the state is released; the exit status not yet recorded
			proxy.cut()
			cut := time.Now()
			var recorded time.Time
			if tc.recordAfter >= 0 {
				time.Sleep(tc.recordAfter) // the coordinator's own delay, not a wait for an event
				coordinator.recordExit(0)
				recorded = time.Now()
			}
			select {
			case r := <-results:
				took := r.at.Sub(cut).Round(time.Millisecond)
				switch {
				case !strings.Contains(logs.String(), "lost the coordinator as its standby"):
					t.Fatalf("the standby never lost the coordinator as its standby (exit %d after %v): the test did not make the race\n%s", r.code, took, logs.String())
				case r.cp != nil:
					t.Fatalf("the standby took over a finished job at step %d (%v after losing the coordinator)\n%s", r.cp.Step, took, logs.String())
				case r.code != 0 || r.at.Sub(recorded) > 2*time.Second:
					t.Fatalf("the standby exited %d %v after the exit status was recorded; want 0 within 2 s", r.code, r.at.Sub(recorded))
				}
				t.Logf("standby: exit %d, took over %v, %v after losing the coordinator", r.code, r.cp != nil, took)
			case <-time.After(30 * time.Second):
				t.Fatalf("the standby still runs 30 s after losing the coordinator\n%s", logs.String())
			case <-ended(t, dir, coordinator.rendezvousRun(ctx), tc.recordAfter < 0):
				// it records the exit status in the coordinator's place
				took := time.Since(cut).Round(time.Millisecond)
				rec, ok := slurmjob.TakenOver(dir, coordinator.rendezvousRun(ctx))
				switch {
				case took < standby.endGrace:
					t.Fatalf("the standby recorded the exit status %v after losing the coordinator, before its end grace of %v", took, standby.endGrace)
				case !ok:
					t.Fatalf("the standby recorded the exit status without a takeover record\n%s", logs.String())
				}
				t.Logf("standby: recorded exit status 0 and takeover %q %v after losing the coordinator", rec, took)
				cancel() // it now waits for Slurm to set the batch host DOWN
				if r := <-results; r.cp != nil || r.code != 0 {
					t.Fatalf("the standby returned exit %d, copy %v; want 0 and no copy (it trains nothing)", r.code, r.cp != nil)
				}
			}
		})
	}
}

// ended is closed once run's exit status 0 is recorded in dir, when watch
// is set (nil otherwise: never).
func ended(t *testing.T, dir string, run slurmjob.Run, watch bool) <-chan struct{} {
	if !watch {
		return nil
	}
	c := make(chan struct{})
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if code, ok := slurmjob.Ended(dir, run); ok && code == 0 {
				close(c)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return c
}

// Where the state directory is node-local the standby's node has its own,
// empty, copy: no writer lock fences the standby there. A standby that
// lost the coordinator takes over only when the coordinator's listener no
// longer answers; it then creates the job in its own directory from its
// copy (job, checkpoint of its step). A coordinator that lived on (only
// the connection was lost) stops once it sees the takeover record,
// without recording an exit status. While the coordinator answers, the
// standby rejoins it and its directory stays without a job.
func TestAStandbyCreatesANodeLocalStateDirectoryFromItsCopy(t *testing.T) {
	spec, err := jobspec.Parse(elasticJob)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := workload.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	const steps, cutAt = 40, 5
	tests := []struct {
		name string
		// answering: the coordinator's published address still accepts
		// connections after the standby's connection broke.
		answering bool
	}{
		{"the coordinator no longer answers: take over", false},
		{"the coordinator answers: rejoin", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(elastic.EnvElastic, "")
			root := t.TempDir()
			dir := filepath.Join(root, ".easyscale", "7")
			var logs strings.Builder
			log := hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: &logs}})
			env := map[string]string{"SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_PROCID": "0", "SLURMD_NODENAME": "n1"}
			slurm := newSqueueWatch("2025-06-01T10:00:00")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cctx, supersede := context.WithCancel(ctx)
			defer supersede()
			coordinator := &slurmRun{task: slurmTask(t, dir, env), listen: "127.0.0.1:0", threads: 1, log: log.Named("coordinator"),
				runner: slurm.runner(), joinWait: 20 * time.Second, stop: steps, supersede: supersede}
			env["SLURM_PROCID"], env["SLURMD_NODENAME"] = "1", "n2"
			standbyState := filepath.Join(root, "n2-local", "state")
			standby := &slurmRun{task: slurmTask(t, dir, env), threads: 1, log: log.Named("standby"), runner: slurm.runner(),
				joinWait: 20 * time.Second, stop: steps, state: standbyState}
			opts := &trainer.Options{Spec: spec, Workload: wl, StopAfter: steps, SkipEval: true, StateDir: filepath.Join(root, "n1-local", "state")}
			finish, err := coordinator.coordinatorTask(cctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			addr, ok := slurmjob.CoordinatorAddr(dir, coordinator.rendezvousRun(ctx))
			if !ok {
				t.Fatal("the coordinator published no address")
			}
			proxy := newByeLossProxy(t, addr)
			if err := slurmjob.PublishCoordinator(dir, proxy.ln.Addr().String(), coordinator.rendezvousRun(ctx)); err != nil {
				t.Fatal(err)
			}
			type result struct {
				code int
				cp   *cluster.StandbyCopy
			}
			results := make(chan result, 1)
			go func() { code, cp := standby.workerTask(ctx); results <- result{code, cp} }()
			onStep := opts.OnStep
			opts.OnStep = func(step, stop int64, workers int) {
				onStep(step, stop, workers)
				switch {
				case step == cutAt && tc.answering:
					proxy.drop()
				case step == cutAt:
					proxy.cut()
				case step > cutAt:
					// a coordinator slower than the standby's claim and
					// the takeover watch's period (this job's steps
					// take a millisecond)
					time.Sleep(100 * time.Millisecond)
				}
			}
			type run struct {
				sum *trainer.Summary
				err error
			}
			runs := make(chan run, 1)
			go func() { sum, err := trainer.Run(cctx, *opts); runs <- run{sum, err} }()
			if !tc.answering {
				var r result
				select {
				case r = <-results:
				case <-time.After(30 * time.Second):
					t.Fatalf("the standby did not take over 30 s after losing the coordinator\n%s", logs.String())
				}
				if r.cp == nil {
					t.Fatalf("the standby exited %d without taking over\n%s", r.code, logs.String())
				}
				db, err := statedb.OpenReadOnly(standbyState)
				if err != nil {
					t.Fatalf("the standby's state directory: %v\n%s", err, logs.String())
				}
				job, jerr := db.Job()
				ck, _, cerr := db.LatestCheckpoint()
				db.Close()
				switch {
				case jerr != nil || job.ID != spec.ID():
					t.Fatalf("the standby's state directory holds job %q (%v), want %s", job.ID, jerr, spec.ID())
				case cerr != nil || ck == nil || ck.Step != r.cp.Step || r.cp.Step < cutAt-1:
					t.Fatalf("the standby's state directory: checkpoint %+v (%v), want one of the copy's step %d (the coordinator was lost after step %d)", ck, cerr, r.cp.Step, cutAt)
				}
				// What runCmd does next: coordinate, recording the takeover.
				standby.takeoverAt = time.Now()
				standby.recordTakeover(r.cp.Step)
				select {
				case ru := <-runs:
					if !errors.Is(ru.err, trainer.ErrInterrupted) || !coordinator.superseded.Load() {
						t.Fatalf("the superseded coordinator's run ended with %v (superseded %v), want interrupted", ru.err, coordinator.superseded.Load())
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("the coordinator still runs 30 s after the takeover record\n%s", logs.String())
				}
				coordinator.recordExit(143)
				if code, ok := slurmjob.Ended(dir, coordinator.rendezvousRun(ctx)); ok {
					t.Fatalf("the superseded coordinator recorded exit status %d", code)
				}
				// The standby's directory holds the coordinator's ledger
				// up to the copy's step (the state after steps
				// 1..Step), not only the rows after it.
				want := ledgerOf(t, opts.StateDir, r.cp.Step)
				got := ledgerOf(t, standbyState, r.cp.Step)
				if int64(len(want)) != r.cp.Step || len(got) != len(want) {
					t.Fatalf("ledger up to the takeover's step %d: the coordinator's has %d rows, the standby's %d; want %d in both\n%s",
						r.cp.Step, len(want), len(got), r.cp.Step, logs.String())
				}
				for i := range want {
					w, g := want[i], got[i]
					if g.Step != w.Step || g.Digest != w.Digest || g.Placement != w.Placement || g.SamplesHash != w.SamplesHash ||
						g.Loss != w.Loss || !g.Time.Equal(w.Time) || len(g.TensorDigests) != len(w.TensorDigests) {
						t.Fatalf("the standby's ledger row of step %d = %+v, the coordinator's %+v", w.Step, g, w)
					}
				}
				return
			}
			ru := <-runs
			if ru.err != nil {
				t.Fatalf("the run failed: %v\n%s", ru.err, logs.String())
			}
			finish(ru.sum)
			coordinator.recordExit(0)
			select {
			case r := <-results:
				if r.cp != nil || r.code != 0 {
					t.Fatalf("the standby exited %d, took over %v; want 0 without a takeover\n%s", r.code, r.cp != nil, logs.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the standby still runs 30 s after the job ended\n%s", logs.String())
			}
			if !strings.Contains(logs.String(), "the coordinator still answers") {
				t.Fatalf("the standby did not find the coordinator answering: the test did not make the loss\n%s", logs.String())
			}
			db, err := statedb.OpenReadOnly(standbyState)
			if err == nil {
				_, err = db.Job()
				db.Close()
			}
			if !errors.Is(err, statedb.ErrNoJob) {
				t.Fatalf("the standby's state directory: %v, want no job (it rejoined)", err)
			}
			if ru.sum.Steps != steps || coordinator.superseded.Load() {
				t.Fatalf("the coordinator's run: %d steps, superseded %v; want %d, not superseded", ru.sum.Steps, coordinator.superseded.Load(), steps)
			}
		})
	}
}

// ledgerOf reads the ledger rows of steps 0..to of the state directory dir.
func ledgerOf(t *testing.T, dir string, to int64) []statedb.LedgerEntry {
	t.Helper()
	db, err := statedb.OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("opening %s: %v", dir, err)
	}
	defer db.Close()
	rows, err := db.Ledger(0, to)
	if err != nil {
		t.Fatalf("reading the ledger of %s: %v", dir, err)
	}
	return rows
}

// A requeued run whose previous run was coordinated after a takeover and
// ended with exit status 0 trains nothing: the requeue only ends the job.
func TestARequeueAfterAFinishedTakeoverTrainsNothing(t *testing.T) {
	tests := []struct {
		name    string
		restart string
		files   map[string]string // rendezvous files of the previous run
		want    bool
	}{
		{"the first run", "0", nil, false},
		{"a takeover that ended with 0", "1", map[string]string{"takeover.0": "step 9 node n2 at 1\n", "exit-code.0": "0\n"}, true},
		{"a takeover interrupted by Slurm", "1", map[string]string{"takeover.0": "step 9 node n2 at 1\n", "exit-code.0": "143\n"}, false},
		{"a takeover still running", "1", map[string]string{"takeover.0": "step 9 node n2 at 1\n"}, false},
		{"a requeue without a takeover", "1", map[string]string{"exit-code.0": "0\n"}, false},
		{"the second requeue after a takeover in the first", "2", map[string]string{"takeover.0": "step 9 node n2 at 1\n", "exit-code.0": "0\n"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".easyscale", "7")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s := &slurmRun{task: slurmTask(t, dir, map[string]string{"SLURM_PROCID": "0", "SLURM_RESTART_COUNT": tc.restart}), log: hclog.NewNullLogger()}
			why, done := s.trainedByTakeover()
			if done != tc.want {
				t.Fatalf("trainedByTakeover = %q, %v; want %v", why, done, tc.want)
			}
		})
	}
}
