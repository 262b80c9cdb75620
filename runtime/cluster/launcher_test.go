package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// launchTest is a coordinator whose ProcLauncher starts this test binary as
// its worker processes (fakeWorkerEnv), each slot K doing what plans[K]
// says at each start.
type launchTest struct {
	c    *Coordinator
	l    *ProcLauncher
	dir  string // the fake workers' plans and start records
	src  *trainer.Replica
	logs *strings.Builder
}

func newLaunchTest(t *testing.T, plans map[int]string, joinTimeout time.Duration, mod func(*ProcLauncher)) *launchTest {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the fake worker finds its slot through /proc")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lt := &launchTest{dir: t.TempDir(), logs: &strings.Builder{}}
	for k, p := range plans {
		if err := os.WriteFile(filepath.Join(lt.dir, fmt.Sprintf("plan-%d", k)), []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(fakeWorkerEnv, lt.dir)
	spec, wl := setup(t)
	lt.src, err = trainer.NewReplica(spec, wl, 1)
	if err != nil {
		t.Fatal(err)
	}
	wl.InitNet(lt.src.Net, spec.Seed)
	state := t.TempDir()
	lt.l = &ProcLauncher{Command: self, LogDir: filepath.Join(state, "workers"), Cores: 1}
	if mod != nil {
		mod(lt.l)
	}
	log := hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: lt.logs}})
	lt.c, err = NewCoordinator(CoordinatorOptions{Spec: spec, Data: wl.Data(), StateDir: state, JoinTimeout: joinTimeout, Launcher: lt.l, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lt.c.Close() })
	return lt
}

// starts returns how often slot k's process was started.
func (lt *launchTest) starts(k int) int {
	files, _ := filepath.Glob(filepath.Join(lt.dir, fmt.Sprintf("start-%d-*", k)))
	return len(files)
}

// pid waits for the start try of slot k and returns its process id.
func (lt *launchTest) pid(t *testing.T, k, try int) int {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(lt.dir, fmt.Sprintf("start-%d-%d", k, try))); err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		select {
		case <-deadline:
			t.Fatalf("slot %d was not started a %d. time within 30 s", k, try+1)
		case <-tick.C:
		}
	}
}

// TestResizeStartsAgainAWorkerThatExitsBeforeAdmission: a grow whose
// launched process dies while it joins (before admission) gets it started
// again and completes, instead of waiting its whole join timeout and
// failing ("only 1 of 2 workers joined"); when a slot's tries are spent the
// grow goes on with the workers that joined, and with none it fails at
// once, saying none is on its way.
func TestResizeStartsAgainAWorkerThatExitsBeforeAdmission(t *testing.T) {
	const joinTimeout = 40 * time.Second
	spent := strings.Repeat("exit ", 1+DefaultMaxRelaunches)
	tests := []struct {
		name        string
		plans       map[int]string
		wantMembers int    // 0: Resize fails
		wantErr     string // in Resize's error
		wantStarts  map[int]int
	}{
		{"a worker killed while it joins is started again", map[int]string{0: "exit"}, 2, "", map[int]int{0: 2, 1: 1}},
		{"twice", map[int]string{1: "exit exit"}, 2, "", map[int]int{0: 1, 1: 3}},
		{"a slot whose tries are spent: the grow goes on with the others", map[int]string{1: spent}, 1, "", map[int]int{0: 1, 1: 1 + DefaultMaxRelaunches}},
		{"no worker can join: the grow fails at once", map[int]string{0: spent, 1: spent}, 0, "none is on its way", map[int]int{0: 1 + DefaultMaxRelaunches, 1: 1 + DefaultMaxRelaunches}},
		{"a worker that refuses its command line (exit 2) is not started again: no try cures it", map[int]string{1: "usage"}, 1, "", map[int]int{0: 1, 1: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLaunchTest(t, tc.plans, joinTimeout, nil)
			t0 := time.Now()
			err := lt.c.Resize(context.Background(), 2, lt.src)
			took := time.Since(t0)
			switch {
			case tc.wantMembers > 0 && err != nil:
				t.Fatalf("Resize(2) after %v: %v\n%s", took, err, lt.logs)
			case tc.wantMembers == 0 && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Resize(2) after %v = %v, want an error saying %q\n%s", took, err, tc.wantErr, lt.logs)
			case took >= joinTimeout:
				t.Fatalf("Resize(2) took the whole join timeout (%v)", took)
			}
			if got := lt.c.Workers(); got != tc.wantMembers {
				t.Fatalf("%d members after Resize(2), want %d\n%s", got, tc.wantMembers, lt.logs)
			}
			for k, want := range tc.wantStarts {
				if got := lt.starts(k); got != want {
					t.Errorf("slot %d started %d times, want %d", k, got, want)
				}
			}
		})
	}
}

// TestAGrowGoesOnWhenAWorkerHangsPastTheJoinTimeout: a launched process
// that neither joins nor exits (stopped, hung) makes the grow wait its
// join timeout and then go on with the workers that joined, as one that
// exited does; with none joined the grow fails, naming the timeout.
func TestAGrowGoesOnWhenAWorkerHangsPastTheJoinTimeout(t *testing.T) {
	// long enough for the joining worker on a loaded 2-core CI machine
	const joinTimeout = 15 * time.Second
	for _, tc := range []struct {
		name        string
		plans       map[int]string
		wantMembers int // 0: Resize fails
	}{
		{"one of two hangs: the grow goes on with the other", map[int]string{1: "hang"}, 1},
		{"both hang: the grow fails", map[int]string{0: "hang", 1: "hang"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLaunchTest(t, tc.plans, joinTimeout, nil)
			err := lt.c.Resize(context.Background(), 2, lt.src)
			switch {
			case tc.wantMembers > 0 && err != nil:
				t.Fatalf("Resize(2): %v\n%s", err, lt.logs)
			case tc.wantMembers == 0 && (err == nil || !strings.Contains(err.Error(), "joined within 15s")):
				t.Fatalf("Resize(2) = %v, want an error naming the 15 s join timeout\n%s", err, lt.logs)
			}
			if got := lt.c.Workers(); got != tc.wantMembers {
				t.Fatalf("%d members after Resize(2), want %d\n%s", got, tc.wantMembers, lt.logs)
			}
		})
	}
}

// TestResizeDoesNotStartAgainAWorkerThatLeft: a launched process that
// leaves before admission on request (a user's SIGTERM: the worker exits 0,
// or dies of the signal before it handles it) is not started again; the
// grow goes on with the workers that joined.
func TestResizeDoesNotStartAgainAWorkerThatLeft(t *testing.T) {
	const joinTimeout = 40 * time.Second
	for _, tc := range []struct {
		name string
		plan string
		sig  syscall.Signal // sent to slot 1's first process; 0: none
	}{
		{"it exits 0 (left on SIGTERM)", "leave", 0},
		{"SIGTERM kills it", "hang", syscall.SIGTERM},
		{"SIGINT kills it (Ctrl-C)", "hang", syscall.SIGINT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLaunchTest(t, map[int]string{1: tc.plan}, joinTimeout, nil)
			done := make(chan error, 1)
			t0 := time.Now()
			go func() { done <- lt.c.Resize(context.Background(), 2, lt.src) }()
			if tc.sig != 0 {
				if err := syscall.Kill(lt.pid(t, 1, 0), tc.sig); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("Resize(2) after %v: %v\n%s", time.Since(t0), err, lt.logs)
			}
			if took := time.Since(t0); took >= joinTimeout {
				t.Fatalf("Resize(2) took the whole join timeout (%v)", took)
			}
			if n := lt.starts(1); n != 1 {
				t.Fatalf("slot 1 was started %d times; a worker that left must not be started again\n%s", n, lt.logs)
			}
			if got := lt.c.Workers(); got != 1 {
				t.Fatalf("%d members after Resize(2), want 1\n%s", got, lt.logs)
			}
		})
	}
}

// TestAwaitWorkersWaitsOnlyForWorkersOnTheirWay: with no member left, the
// coordinator waits for a worker process of the job that is still running
// and not admitted (a joiner, or a worker rejoining after it missed a
// step's result) and admits it; it returns 0 at once when none is on its
// way, and as soon as the last one on its way exits, not after its join
// timeout.
func TestAwaitWorkersWaitsOnlyForWorkersOnTheirWay(t *testing.T) {
	const joinTimeout = 40 * time.Second
	tests := []struct {
		name   string
		launch string // plan of the one process launched; "": none
		kill   bool   // SIGKILL it once it runs
		queue  bool   // an in-process worker joins (no launcher involved)
		want   int
	}{
		{"nothing on its way", "", false, false, 0},
		{"a launched worker on its way joins", "join", false, false, 1},
		{"a launched worker on its way dies", "hang", true, false, 0},
		{"a queued joiner is admitted", "", false, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLaunchTest(t, map[int]string{0: tc.launch}, joinTimeout, func(l *ProcLauncher) { l.MaxRelaunches = -1 })
			if tc.launch != "" {
				if err := lt.l.Start(1, lt.c.Addr(), lt.c.TokenPath(), 1); err != nil {
					t.Fatal(err)
				}
				pid := lt.pid(t, 0, 0)
				if tc.kill {
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.queue {
				startWorker(t, lt.c)
				for deadline := time.Now().Add(30 * time.Second); len(lt.c.joiners) == 0; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the joiner was not waiting for admission 30 s after it started")
					}
				}
			}
			t0 := time.Now()
			n, err := lt.c.AwaitWorkers(context.Background(), lt.src, 7)
			if took := time.Since(t0); err != nil || n != tc.want || took >= joinTimeout {
				t.Fatalf("AwaitWorkers = %d, %v after %v; want %d before the join timeout (%v)\n%s", n, err, took, tc.want, joinTimeout, lt.logs)
			}
			if n != lt.c.Workers() {
				t.Fatalf("AwaitWorkers returned %d, the coordinator has %d members", n, lt.c.Workers())
			}
		})
	}
}

// TestAwaitWorkersEndsWithItsContext: SIGTERM of the coordinator (ctx)
// while it waits for a worker on its way returns at once, wrapping
// ctx.Err().
func TestAwaitWorkersEndsWithItsContext(t *testing.T) {
	lt := newLaunchTest(t, map[int]string{0: "hang"}, time.Minute, nil)
	if err := lt.l.Start(1, lt.c.Addr(), lt.c.TokenPath(), 1); err != nil {
		t.Fatal(err)
	}
	lt.pid(t, 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := lt.c.AwaitWorkers(ctx, lt.src, 3); n != 0 || err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("AwaitWorkers with an ended context = %d, %v; want 0 and the context's error", n, err)
	}
}

// TestLauncherWaitKillsWorkersItDidNotRelease: at the end of a job the
// launched processes that were not released (a worker still rejoining, a
// joiner never admitted) hold nothing and are killed at once; Wait does
// not spend its grace (meant for released workers) on them.
func TestLauncherWaitKillsWorkersItDidNotRelease(t *testing.T) {
	lt := newLaunchTest(t, map[int]string{0: "hang", 1: "hang"}, time.Minute, nil)
	if err := lt.l.Start(2, lt.c.Addr(), lt.c.TokenPath(), 2); err != nil {
		t.Fatal(err)
	}
	lt.pid(t, 0, 0)
	lt.pid(t, 1, 0)
	done := make(chan struct{})
	go func() { lt.l.Wait(time.Hour); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Wait waited for launched workers that were never released")
	}
	for k := range 2 {
		if n := lt.starts(k); n != 1 {
			t.Errorf("slot %d was started %d times; Wait must not start any again", k, n)
		}
	}
}
