package cli

import (
	"context"
	"io"
	"net"
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
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// At a normal end the coordinator writes the checkpoint of the last step,
// says goodbye, releases the state database and records its exit status.
// A standby whose goodbye is lost, and whose connection then breaks
// before the exit status is recorded, finds the state free: it must not
// take over a finished job (whose takeover waited for a node-down that
// never comes, holding the job's end for SlurmdTimeout plus 30 s) but exit
// 0 once the exit status is recorded. When none comes (the coordinator
// died between the two) it takes over, which ends the job.
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
		recordAfter  time.Duration
		wantTakeover bool
	}{
		{"the coordinator records its exit status a second after the standby lost it", time.Second, false},
		{"the coordinator died before recording its exit status", -1, true},
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
				case tc.wantTakeover && r.cp == nil:
					t.Fatalf("the standby exited %d after %v without taking over, though no exit status was recorded\n%s", r.code, took, logs.String())
				case tc.wantTakeover && took < standby.endGrace:
					t.Fatalf("the standby took over %v after losing the coordinator, before its end grace of %v", took, standby.endGrace)
				case !tc.wantTakeover && r.cp != nil:
					t.Fatalf("the standby took over a finished job at step %d (%v after losing the coordinator)\n%s", r.cp.Step, took, logs.String())
				case !tc.wantTakeover && (r.code != 0 || r.at.Sub(recorded) > 2*time.Second):
					t.Fatalf("the standby exited %d %v after the exit status was recorded; want 0 within 2 s", r.code, r.at.Sub(recorded))
				}
				t.Logf("standby: exit %d, took over %v, %v after losing the coordinator", r.code, r.cp != nil, took)
			case <-time.After(30 * time.Second):
				t.Fatalf("the standby still runs 30 s after losing the coordinator\n%s", logs.String())
			}
		})
	}
}
