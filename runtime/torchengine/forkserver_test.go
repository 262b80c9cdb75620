package torchengine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain has idle fork servers exit after 10 s: the tests start a server
// for each environment they try, and would otherwise keep a dozen (about
// 120 MB each) for a minute.
func TestMain(m *testing.M) {
	forkServerIdle = 10 * time.Second
	os.Exit(m.Run())
}

// parentOf reads pid's parent from /proc/PID/stat (the field after the
// parenthesised command, which may itself hold spaces).
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %q: %v", pid, b, err)
	}
	return ppid
}

// waitUntil polls cond every 20 ms until it holds or deadline passes.
func waitUntil(t *testing.T, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkersAreForksOfOneServerAndItsLossEndsThem starts three workers:
// each is a child of one `python3 -m easyscale.forkserver`, not of this
// process. SIGKILLing the server ends every worker (PR_SET_PDEATHSIG), each
// Process reports its exit, and the next start brings a new server whose
// workers train.
func TestWorkersAreForksOfOneServerAndItsLossEndsThem(t *testing.T) {
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	server := 0
	for _, p := range l.Processes() {
		ppid := parentOf(t, p.Pid())
		if server == 0 {
			server = ppid
		}
		if ppid != server || ppid == os.Getpid() {
			t.Fatalf("worker %d's parent is %d; want one fork server for all (first: %d), not this process (%d)",
				p.Pid(), ppid, server, os.Getpid())
		}
	}
	for _, p := range l.Processes() {
		// Python 3.9 and Linux 5.3 have pidfd_open: the server sends each
		// worker's pidfd, which its signals go through.
		if f, ok := p.proc.(*forkedProc); !ok || f.pidfd == nil {
			t.Errorf("worker %d: %T without a pidfd, want the server's pidfd of it", p.Pid(), p.proc)
		}
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", server))
	if !strings.Contains(string(cmdline), "easyscale.forkserver") {
		t.Fatalf("the workers' parent %d runs %q, want python3 -m easyscale.forkserver", server, cmdline)
	}
	workers := l.Processes()
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, p := range workers {
		waitUntil(t, 20*time.Second, fmt.Sprintf("worker %d ended with its server", p.Pid()), p.exited)
		if err := p.proc.Wait(); err == nil {
			t.Errorf("worker %d: Wait after its server was killed gave nil, want its end reported", p.Pid())
		}
		if err := p.proc.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("worker %d: Signal after its end gave %v, want os.ErrProcessDone", p.Pid(), err)
		}
	}

	again, ctx := newLocal(t)
	if err := again.Resize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if ppid := parentOf(t, again.Processes()[0].Pid()); ppid == server || ppid == os.Getpid() {
		t.Fatalf("a worker after the server's loss has parent %d; want a new fork server (old %d, this process %d)",
			ppid, server, os.Getpid())
	}
	if _, err := again.Step(ctx, 0, []int{2, 2}, nil); err != nil {
		t.Fatalf("a step on the new server's workers: %v", err)
	}
}

// TestAnInterpreterWhoseForkServerFailsStartsWorkersOfItsOwn runs an
// interpreter that cannot run the fork server (a wrapper that exits 3 for
// it): the worker starts as its own interpreter, the reason is on the
// worker's stderr, and a step runs.
func TestAnInterpreterWhoseForkServerFailsStartsWorkersOfItsOwn(t *testing.T) {
	py := requireTorch(t)
	wrapper := filepath.Join(t.TempDir(), "python3")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *easyscale.forkserver*) exit 3;; esac\nexec %s \"$@\"\n", py)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	l, ctx := newLocal(t)
	stderr := &lockedBuffer{}
	l.start.Python, l.start.Stderr = wrapper, stderr
	if err := l.Resize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ppid := parentOf(t, l.Processes()[0].Pid()); ppid != os.Getpid() {
		t.Fatalf("the worker's parent is %d, want this process (%d): started as its own interpreter", ppid, os.Getpid())
	}
	if !strings.Contains(stderr.String(), "starting its own interpreter instead") {
		t.Fatalf("stderr %q: want the fork server's failure reported", stderr.String())
	}
	if _, err := l.Step(ctx, 0, []int{4}, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Logf("close: %v", err)
	}
}

// overlapWriter counts Write calls that overlap another, and keeps what
// was written.
type overlapWriter struct {
	busy     atomic.Int32
	overlaps atomic.Int32
	mu       sync.Mutex
	out      bytes.Buffer
}

func (w *overlapWriter) Write(p []byte) (int, error) {
	if w.busy.Add(1) > 1 {
		w.overlaps.Add(1)
	}
	time.Sleep(time.Millisecond) // long enough for a second copier to arrive
	w.mu.Lock()
	w.out.Write(p)
	w.mu.Unlock()
	w.busy.Add(-1)
	return len(p), nil
}

// lines is what was written, line by line.
func (w *overlapWriter) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Split(strings.TrimSpace(w.out.String()), "\n")
}

// fakePackage writes a package directory whose easyscale.worker is source.
func fakePackage(t *testing.T, source string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "easyscale"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"__init__.py": "", "worker.py": source} {
		if err := os.WriteFile(filepath.Join(dir, "easyscale", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAWriterGivenForStdoutAndStderrIsWrittenByOneCopier: as with exec.Cmd,
// a worker whose stdout and stderr go to one writer has them copied by one
// goroutine, so a writer that is not safe for concurrent use (a
// bytes.Buffer, the engine's Stderr) is never written twice at once. The
// worker is a fork (its parent is the server the real worker started).
func TestAWriterGivenForStdoutAndStderrIsWrittenByOneCopier(t *testing.T) {
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 1); err != nil { // the server, started from the real package
		t.Fatal(err)
	}
	server := parentOf(t, l.Processes()[0].Pid())
	o := l.start
	o.PackageDir = fakePackage(t, `import os, sys, threading
def spam(stream, tag):
    for i in range(200):
        stream.write(f"{tag} {i}\n")
        stream.flush()
print("parent", os.getppid(), flush=True)
ts = [threading.Thread(target=spam, args=(s, t)) for s, t in ((sys.stdout, "out"), (sys.stderr, "err"))]
for t in ts: t.start()
for t in ts: t.join()
`)
	w := &overlapWriter{}
	o.Stdout, o.Stderr = w, w
	p, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.proc.Wait()
	p.Kill()
	if w.overlaps.Load() != 0 {
		t.Errorf("%d overlapping writes to the one writer given for stdout and stderr, want 0", w.overlaps.Load())
	}
	lines := w.lines()
	if !slices.Contains(lines, fmt.Sprintf("parent %d", server)) {
		t.Fatalf("the worker did not report the fork server %d as its parent: %.200q", server, lines)
	}
	if len(lines) != 401 {
		t.Errorf("%d lines copied, want 401 (the parent line, 200 of stdout, 200 of stderr)", len(lines))
	}
}

// TestASpawnThatTimesOutLeavesTheServersOtherWorkersRunning stops the fork
// server (SIGSTOP) while one of its workers runs, then starts another
// worker with a 2 s start-up bound: that one starts as its own interpreter,
// and the first worker still answers.
func TestASpawnThatTimesOutLeavesTheServersOtherWorkersRunning(t *testing.T) {
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	first := l.Processes()[0]
	server := parentOf(t, first.Pid())
	if err := syscall.Kill(server, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(server, syscall.SIGCONT) })
	o := l.start
	o.StartupTimeout = 2 * time.Second
	o.Stderr = &lockedBuffer{}
	p, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if ppid := parentOf(t, p.Pid()); ppid != os.Getpid() {
		t.Errorf("the worker started while the server was stopped has parent %d, want this process (%d)", ppid, os.Getpid())
	}
	if !strings.Contains(o.Stderr.(*lockedBuffer).String(), "no answer within 2s") {
		t.Errorf("stderr %q: want the server's silence reported", o.Stderr.(*lockedBuffer).String())
	}
	if _, err := first.Call(ctx, "hello", nil, nil, nil); err != nil || first.exited() {
		t.Fatalf("the stopped server's worker after the timeout: %v (exited %v), want it running", err, first.exited())
	}
	_ = syscall.Kill(server, syscall.SIGCONT)
}

// TestAVariableTorchReadsAtItsImportReachesAForkedWorker gives one worker
// OMP_NUM_THREADS=3 and MKL_NUM_THREADS=3 (torch sizes its thread pool from
// them at import; with MKL_NUM_THREADS=1 of PinnedEnv it takes 1): it is
// forked from a server started with that environment, not from the one
// that imported torch with PinnedEnv's 1.
func TestAVariableTorchReadsAtItsImportReachesAForkedWorker(t *testing.T) {
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	shared := parentOf(t, l.Processes()[0].Pid())
	o := l.start
	server, err := os.ReadFile("python/easyscale/forkserver.py")
	if err != nil {
		t.Fatal(err)
	}
	o.PackageDir = fakePackage(t, "import os, sys, torch\nprint(os.getppid(), torch.get_num_threads(), sys.path[0], flush=True)\n")
	if err := os.WriteFile(filepath.Join(o.PackageDir, "easyscale", "forkserver.py"), server, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env     []string
		threads int
	}{{nil, 1}, {[]string{"OMP_NUM_THREADS=3", "MKL_NUM_THREADS=3"}, 3}} {
		out := &lockedBuffer{}
		o.Env, o.Stdout, o.Stderr = c.env, out, os.Stderr
		p, err := Start(o)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.proc.Wait()
		p.Kill()
		var parent, threads int
		var path0 string
		if _, err := fmt.Sscan(out.String(), &parent, &threads, &path0); err != nil {
			t.Fatalf("env %q: the worker printed %q: %v", c.env, out.String(), err)
		}
		if wd, _ := os.Getwd(); path0 != wd {
			t.Errorf("env %q: the worker's sys.path[0] is %q, want the working directory %q (as python3 -m has it)",
				c.env, path0, wd)
		}
		if parent == os.Getpid() || threads != c.threads || (c.env == nil) != (parent == shared) {
			t.Errorf("env %q: parent %d, %d torch threads; want a fork (this process %d) of the server for that "+
				"environment (the PinnedEnv one: %d), %d threads", c.env, parent, threads, os.Getpid(), shared, c.threads)
		}
	}
}

// TestAForkServerIgnoresSlurmsSignalsWhileItImportsTorch sends SIGTERM,
// SIGINT and SIGHUP to a starting server every 100 ms, from when the kernel
// shows them ignored (its bootstrap ignores them before the package imports
// torch, which takes seconds) until it is ready: it must get ready.
func TestAForkServerIgnoresSlurmsSignalsWhileItImportsTorch(t *testing.T) {
	py := requireTorch(t)
	dir, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := dedupEnv(append(append(os.Environ(), PinnedEnv...), "FORKSERVER_SIGNAL_TEST=1"))
	s, err := startForkServer(py, dir, env, "a key of this test only")
	if err != nil {
		t.Fatal(err)
	}
	defer s.conn.Close() // the server exits when its socket closes
	// The interpreter's own start comes before the bootstrap: wait until
	// the kernel shows SIGTERM ignored (/proc/PID/status SigIgn).
	waitUntil(t, time.Minute, "the server ignoring SIGTERM", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
		for _, line := range strings.Split(string(b), "\n") {
			if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
				return err == nil && mask&(1<<(syscall.SIGTERM-1)) != 0
			}
		}
		return false
	})
	deadline := time.After(2 * time.Minute)
	sent := 0
	for ready := false; !ready; {
		select {
		case <-s.ready:
			ready = true
		case <-s.done:
			t.Fatalf("the fork server ended after %d signals before it was ready: %v", sent, s.closedErr())
		case <-time.After(100 * time.Millisecond):
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
				if err := syscall.Kill(s.cmd.Process.Pid, sig); err == nil {
					sent++
				}
			}
		case <-deadline:
			t.Fatal("the fork server was not ready within 2 min")
		}
	}
	if sent == 0 {
		t.Fatal("the server was ready before any signal was sent: the test proves nothing")
	}
	t.Logf("%d signals sent while the server imported torch", sent)
}

// TestAServerThatEndsAsAWorkerStartsIsReplaced puts in the registry, in
// place of the running fork server, one whose socket has closed: as an idle
// server is between its exit and its reader seeing it (and, the second
// case, after its reader saw it but before it was taken out). A worker
// started then must be forked by a new server, never started as its own
// interpreter, and nothing is said on stderr.
func TestAServerThatEndsAsAWorkerStartsIsReplaced(t *testing.T) {
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	running := parentOf(t, l.Processes()[0].Pid())
	for _, readerSawIt := range []bool{false, true} {
		forkServers.Lock()
		var key string
		for k, s := range forkServers.m {
			if s.cmd.Process.Pid == running {
				key = k
			}
		}
		if key == "" {
			forkServers.Unlock()
			t.Fatalf("fork server %d is not in the registry", running)
		}
		dying := endedForkServer(t, key, readerSawIt)
		forkServers.m[key] = dying
		forkServers.Unlock()

		o := l.start
		stderr := &lockedBuffer{}
		o.Stderr = stderr
		p, err := Start(o)
		if err != nil {
			t.Fatal(err)
		}
		ppid := parentOf(t, p.Pid())
		p.Kill()
		if ppid == os.Getpid() || ppid == running || stderr.String() != "" {
			t.Fatalf("reader saw it %v: the worker's parent is %d (this process %d, the replaced server %d), "+
				"stderr %q; want a fork of a new server and nothing said", readerSawIt, ppid, os.Getpid(), running,
				stderr.String())
		}
		forkServers.Lock()
		if forkServers.m[key] == dying {
			t.Errorf("reader saw it %v: the ended server is still in the registry", readerSawIt)
		}
		forkServers.Unlock()
		running = ppid
	}
}

// endedForkServer returns a forkServer for key that had reported ready and
// whose socket's other end is closed; its done channel is closed when
// readerSawIt.
func endedForkServer(t *testing.T, key string, readerSawIt bool) *forkServer {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "ended-forkserver")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &forkServer{conn: c.(*net.UnixConn), ready: make(chan struct{}), done: make(chan struct{}), key: key,
		children: map[int]*forkedProc{}, sending: make(chan struct{}, 1)}
	close(s.ready)
	if readerSawIt {
		s.err = io.EOF
		close(s.done)
	}
	return s
}

// TestAForkedWorkerSeesWhatItsOwnInterpreterWould starts a worker of a
// package that prints its environment, sys.path and parent, forked and then
// as its own interpreter (EASYSCALE_FORKSERVER=0), with variables a shell
// would drop or rewrite (names that are not identifiers, Lmod's exported
// function, PWD) and with PYTHONSAFEPATH=1 (no working directory on
// sys.path): the forked one must be a fork, say nothing on stderr, and see
// the same environment and path.
func TestAForkedWorkerSeesWhatItsOwnInterpreterWould(t *testing.T) {
	l, _ := newLocal(t)
	server, err := os.ReadFile("python/easyscale/forkserver.py")
	if err != nil {
		t.Fatal(err)
	}
	o := l.start
	o.PackageDir = fakePackage(t, "import json, os, sys\n"+
		"print(json.dumps({'env': dict(os.environ), 'path': sys.path, 'ppid': os.getppid()}), flush=True)\n")
	if err := os.WriteFile(filepath.Join(o.PackageDir, "easyscale", "forkserver.py"), server, 0o644); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Env  map[string]string `json:"env"`
		Path []string          `json:"path"`
		Ppid int               `json:"ppid"`
	}
	run := func(env []string) (seen, string) {
		out, stderr := &lockedBuffer{}, &lockedBuffer{}
		o.Env, o.Stdout, o.Stderr = env, out, stderr
		p, err := Start(o)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.proc.Wait()
		p.Kill()
		var s seen
		if err := json.Unmarshal([]byte(out.String()), &s); err != nil {
			t.Fatalf("env %q: the worker printed %q (stderr %q): %v", env, out.String(), stderr.String(), err)
		}
		delete(s.Env, ForkServerEnv)
		return s, stderr.String()
	}
	for _, env := range [][]string{
		{"A.B=1", "X-Y=2", "BASH_FUNC_module%%=() {  eval x\n}", "PWD=/nonexistent"},
		{"PYTHONSAFEPATH=1"},
	} {
		forked, stderr := run(env)
		t.Setenv(ForkServerEnv, "0")
		own, _ := run(env)
		os.Unsetenv(ForkServerEnv)
		if forked.Ppid == os.Getpid() || stderr != "" {
			t.Errorf("env %q: the worker's parent is %d (this process %d), stderr %q: want a fork, nothing said",
				env, forked.Ppid, os.Getpid(), stderr)
		}
		if own.Ppid != os.Getpid() {
			t.Fatalf("env %q: with %s=0 the worker's parent is %d, want this process %d", env, ForkServerEnv, own.Ppid, os.Getpid())
		}
		if !maps.Equal(forked.Env, own.Env) {
			for k, v := range own.Env {
				if fv, ok := forked.Env[k]; !ok || fv != v {
					t.Errorf("env %q: %s is %q forked, %q (present %v) in its own interpreter", env, k, fv, v, ok)
				}
			}
			for k, v := range forked.Env {
				if _, ok := own.Env[k]; !ok {
					t.Errorf("env %q: %s=%q only in the forked worker", env, k, v)
				}
			}
		}
		if !slices.Equal(forked.Path, own.Path) {
			t.Errorf("env %q: sys.path forked %q, own interpreter %q", env, forked.Path, own.Path)
		}
	}
}

// TestASpawnWaitingForTheSocketIsBoundedByItsDeadline: a spawn whose
// server's socket is taken by another request (a stopped server's full
// socket buffer holds every sender) gives up at its own deadline and
// retires the server.
func TestASpawnWaitingForTheSocketIsBoundedByItsDeadline(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[1]) // the server's end: open, never read
	f := os.NewFile(uintptr(fds[0]), "busy-forkserver")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "a key of this test only"
	s := &forkServer{conn: c.(*net.UnixConn), ready: make(chan struct{}), done: make(chan struct{}), key: key,
		children: map[int]*forkedProc{}, sending: make(chan struct{}, 1)}
	forkServers.Lock()
	forkServers.m[key] = s
	forkServers.Unlock()
	s.sending <- struct{}{} // another request is being sent
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	began := time.Now()
	_, err = s.spawn(t.TempDir(), [4]*os.File{r, w, w, w}, 200*time.Millisecond)
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "not free within 200ms") || took > 5*time.Second {
		t.Fatalf("spawn gave %v after %s; want its socket reported busy at its 200 ms deadline", err, took)
	}
	forkServers.Lock()
	defer forkServers.Unlock()
	if forkServers.m[key] == s {
		delete(forkServers.m, key)
		t.Error("the busy server is still in the registry")
	}
}

// TestAForkedWorkerIsSignalledThroughItsPidfd: a worker the server sent a
// pidfd for is signalled through it, not by its pid, which the kernel may
// have given to another process once the server reaped the worker. Here
// the pid names one process (a stand-in for the pid's next owner) and the
// pidfd another: the signal reaches the pidfd's only, and once that one
// has ended and been reaped Signal says so without signalling the pid.
func TestAForkedWorkerIsSignalledThroughItsPidfd(t *testing.T) {
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	reuser, worker := start(), start()
	fd, err := unix.PidfdOpen(worker.Process.Pid, 0)
	if err != nil {
		t.Skipf("pidfd_open: %v (Linux before 5.3)", err)
	}
	p := &forkedProc{pid: reuser.Process.Pid, ended: make(chan struct{}), pidfd: os.NewFile(uintptr(fd), "pidfd")}
	defer p.end(nil)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if err := worker.Wait(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("the pidfd's process ended with %v, want SIGTERM", err)
	}
	if err := syscall.Kill(reuser.Process.Pid, 0); err != nil {
		t.Fatalf("the process with the worker's pid: %v, want it untouched", err)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after the pidfd's process was reaped: %v, want os.ErrProcessDone", err)
	}
	if err := syscall.Kill(reuser.Process.Pid, 0); err != nil {
		t.Errorf("the process with the worker's pid: %v after the second Signal, want it untouched", err)
	}
}

// TestAMessageWithMoreThanOnePidfdIsRefused: the server sends at most one
// descriptor with a message (a worker's pidfd); more is a broken protocol,
// and every descriptor received is closed.
func TestAMessageWithMoreThanOnePidfdIsRefused(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	if f, err := receivedPidfd(nil); f != nil || err != nil {
		t.Errorf("no control message: %v, %v; want none", f, err)
	}
	if _, err := receivedPidfd(syscall.UnixCredentials(&syscall.Ucred{Pid: 1})); err == nil {
		t.Error("a control message of credentials, not rights, was read, want an error")
	}
	// Each rights message is received as new descriptors, as the kernel
	// does: dup them for the parser to own.
	dup := func(fd int) int {
		d, err := syscall.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	one := dup(fds[0])
	f, err := receivedPidfd(syscall.UnixRights(one))
	if err != nil || f == nil || int(f.Fd()) != one {
		t.Fatalf("one descriptor: %v, %v; want it as the pidfd", f, err)
	}
	f.Close()
	a, b := dup(fds[0]), dup(fds[1])
	if f, err := receivedPidfd(syscall.UnixRights(a, b)); f != nil || err == nil {
		t.Errorf("two descriptors: %v, %v; want an error", f, err)
	}
	for _, fd := range []int{a, b} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("descriptor %d after a refused message: %v, want it closed", fd, err)
		}
	}
}
