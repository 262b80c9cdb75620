package torchengine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ForkServerEnv names the environment variable that turns the fork server
// off: "0" starts every worker as its own interpreter, as before the server
// existed (each one imports torch: one to two seconds of CPU).
const ForkServerEnv = "EASYSCALE_FORKSERVER"

// errForkServerGone is returned (wrapped) when the fork server's socket closed.
var errForkServerGone = errors.New("the fork server exited")

// errForkServerFailedRecently is returned (wrapped) for a start within
// forkServerRetry of a failed server start for the same key (said once, at
// that failure).
var errForkServerFailedRecently = errors.New("the fork server failed to start")

// workerProc is a started worker process as Process drives it: an exec'd
// interpreter (execProc) or a fork of the fork server (forkedProc).
type workerProc interface {
	Pid() int
	Signal(sig os.Signal) error
	// Wait waits for the process to end and its output to be copied; it
	// returns nil for exit status 0. It may be called more than once.
	Wait() error
}

// execProc is a worker started as its own interpreter.
type execProc struct {
	cmd  *exec.Cmd
	once sync.Once
	err  error
}

func (p *execProc) Pid() int                   { return p.cmd.Process.Pid }
func (p *execProc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }
func (p *execProc) Wait() error {
	p.once.Do(func() { p.err = p.cmd.Wait() })
	return p.err
}

// forkServer is one easyscale.forkserver, run by forkServerBootstrap
// (python/easyscale/forkserver.py has its protocol): it has imported torch once and forks a
// worker per spawn. It lives as long as this process: the kernel kills it
// when this process dies, and its workers when it dies.
type forkServer struct {
	cmd   *exec.Cmd
	conn  *net.UnixConn
	ready chan struct{} // closed when the server reported it imported torch
	done  chan struct{} // closed when its socket closed
	key   string

	sending  chan struct{}      // a one-slot semaphore: one request on the socket at a time, under its spawn's deadline
	replies  pending[forkReply] // by request id: a late reply never answers another request
	mu       sync.Mutex         // guards children, err
	children map[int]*forkedProc
	err      error // why the socket closed
}

type forkReply struct {
	proc *forkedProc
	err  error
}

// forkedProc is a worker forked by a fork server; the server reaps it and
// reports its exit status.
type forkedProc struct {
	pid     int
	ended   chan struct{} // closed when the server reported the exit (or died)
	status  error         // set before ended is closed
	copying sync.WaitGroup

	mu    sync.Mutex // guards pidfd
	pidfd *os.File   // the worker's pidfd from the server; nil: none (closed once it ended)
}

func (p *forkedProc) Pid() int { return p.pid }

// Signal sends sig unless the process has been reported ended (its pid may
// then be another process's). It signals through the worker's pidfd when
// the server sent one: between the server reaping the worker and this
// process reading the exit, the kernel may give the pid to another
// process, and a pidfd names the worker only (pidfd_send_signal(2); an
// ended worker gives os.ErrProcessDone). Without one (Linux before 5.3,
// Python before 3.9) it is kill(2) on the pid.
func (p *forkedProc) Signal(sig os.Signal) error {
	select {
	case <-p.ended:
		return os.ErrProcessDone
	default:
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("signalling python worker %d: unsupported signal %v", p.pid, sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd == nil {
		return syscall.Kill(p.pid, s)
	}
	err := unix.PidfdSendSignal(int(p.pidfd.Fd()), s, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// end records the worker's exit status and closes its pidfd.
func (p *forkedProc) end(status error) {
	p.mu.Lock()
	if p.pidfd != nil {
		p.pidfd.Close()
		p.pidfd = nil
	}
	p.mu.Unlock()
	p.status = status
	close(p.ended)
}

func (p *forkedProc) Wait() error {
	<-p.ended
	p.copying.Wait()
	return p.status
}

// exitStatusError describes a forked worker's exit as exec's errors do.
func exitStatusError(status int) error {
	switch {
	case status == 0:
		return nil
	case status < 0:
		return fmt.Errorf("signal: %v", syscall.Signal(-status))
	default:
		return fmt.Errorf("exit status %d", status)
	}
}

// forkServers holds the running server of each key (the interpreter and the
// environment, forkServerFor), and
// when a server last failed to start for a key: for forkServerRetry after
// that, workers of the key start as their own interpreters at once.
var forkServers = struct {
	sync.Mutex
	m      map[string]*forkServer
	failed map[string]time.Time
}{m: map[string]*forkServer{}, failed: map[string]time.Time{}}

// forkServerRetry is how long after a failed start no server is tried again
// for the same interpreter and environment.
const forkServerRetry = time.Minute

// forkServerIdle is how long a server without workers waits for a spawn
// before it exits (python/easyscale/forkserver.py). A variable so that the
// tests, which start a server per environment they try, keep few alive.
var forkServerIdle = 60 * time.Second

// forkServerBootstrap ignores SIGINT, SIGTERM and SIGHUP before anything is
// imported (Slurm signals every process of a step, and the easyscale
// package imports torch, which takes seconds; only the interpreter's own
// start, milliseconds, comes before), then runs easyscale.forkserver as
// python3 -m would (the working directory first on sys.path, unless
// PYTHONSAFEPATH keeps it off), handing it the environment as it was
// before anything was imported: each worker's, but for PYTHONPATH. Its
// argument is the idle time in seconds. A shell that ignored the signals
// before it executed the interpreter would rewrite the environment (dash
// drops names that are not identifiers, such as Lmod's BASH_FUNC_module%%,
// and sets PWD), which the server must hand on unchanged.
const forkServerBootstrap = `import signal as s
for x in (s.SIGINT, s.SIGTERM, s.SIGHUP): s.signal(x, s.SIG_IGN)
import os, sys
if sys.path and sys.path[0] == "": sys.path[0] = os.getcwd()
import runpy; runpy.run_module("easyscale.forkserver", run_name="__main__", alter_sys=True, init_globals={"START_ENVIRON": dict(os.environ)})`

// dedupEnv returns env (NAME=value entries) with one entry per name, the
// last one's value, in name order (what a process started with env sees,
// as a stable key).
func dedupEnv(env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	out := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// withoutVar returns env without the entries of name.
func withoutVar(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// forkServerEnabled reports whether workers are forked ($EASYSCALE_FORKSERVER
// is not "0").
func forkServerEnabled() bool { return os.Getenv(ForkServerEnv) != "0" }

// forkServerFor returns the running fork server for python and env (a
// worker's whole environment, deduplicated, without PYTHONPATH: a server is
// started with it, so that what torch reads at its import is what the
// worker would have read), starting one with packageDir on its PYTHONPATH
// when there is none, and waits up to wait for it to have imported torch.
// A server that fails to start is not tried again for forkServerRetry.
func forkServerFor(python, packageDir string, env []string, wait time.Duration) (*forkServer, error) {
	key := python + "\x00" + strings.Join(env, "\x00")
	forkServers.Lock()
	if at, ok := forkServers.failed[key]; ok && time.Since(at) < forkServerRetry {
		forkServers.Unlock()
		return nil, fmt.Errorf("%w %s ago for %s", errForkServerFailedRecently, time.Since(at).Round(time.Second), python)
	}
	s := forkServers.m[key]
	if s == nil {
		var err error
		if s, err = startForkServer(python, packageDir, env, key); err != nil {
			forkServers.failed[key] = time.Now()
			forkServers.Unlock()
			return nil, err
		}
		forkServers.m[key] = s
	}
	forkServers.Unlock()
	failed := func(err error) (*forkServer, error) {
		forkServers.Lock()
		forkServers.failed[key] = time.Now()
		forkServers.Unlock()
		return nil, err
	}
	select {
	case <-s.ready:
		return s, nil
	case <-s.done:
		select {
		case <-s.ready: // it started, then exited (idle): spawn says it is gone, and a new one is started
			return s, nil
		default:
		}
		return failed(fmt.Errorf("starting the fork server: %w (%v)", errForkServerGone, s.closedErr()))
	case <-time.After(wait):
		_ = s.cmd.Process.Kill() // it has no worker yet
		<-s.done
		return failed(fmt.Errorf("starting the fork server: torch not imported within %s", wait))
	}
}

// retire takes s out of use: the next start for its key starts another
// server. Its workers keep running; it exits once it has none for
// forkServerIdle (or with this process).
func (s *forkServer) retire() {
	forkServers.Lock()
	if forkServers.m[s.key] == s {
		delete(forkServers.m, s.key)
	}
	forkServers.Unlock()
}

func startForkServer(python, packageDir string, env []string, key string) (*forkServer, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("starting the fork server: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "forkserver"), os.NewFile(uintptr(fds[1]), "forkserver-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("starting the fork server: %w", err)
	}
	idle := strconv.FormatFloat(forkServerIdle.Seconds(), 'g', -1, 64)
	cmd := exec.Command(python, "-c", forkServerBootstrap, idle)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(slices.Clone(env), "PYTHONPATH="+packageDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{theirs} // fd 3 in the server
	if err := cmd.Start(); err != nil {
		fc.Close()
		return nil, fmt.Errorf("starting the fork server %s: %w", python, err)
	}
	s := &forkServer{cmd: cmd, conn: fc.(*net.UnixConn), ready: make(chan struct{}), done: make(chan struct{}),
		key: key, children: map[int]*forkedProc{}, sending: make(chan struct{}, 1)}
	go s.read()
	return s, nil
}

// read handles the server's messages until its socket closes: readiness,
// spawn replies (registering the child before the spawner sees it, so that an
// exit reported at once is not lost) and exits.
func (s *forkServer) read() {
	buf := make([]byte, 1<<16)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	var err error
	for {
		var n, oobn int
		n, oobn, _, _, err = s.conn.ReadMsgUnix(buf, oob)
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			break
		}
		var pidfd *os.File
		if pidfd, err = receivedPidfd(oob[:oobn]); err != nil {
			break
		}
		var m struct {
			Ready  bool    `json:"ready"`
			ID     int64   `json:"id"`
			Pid    *int    `json:"pid"`
			Error  *string `json:"error"`
			Exited *int    `json:"exited"`
			Status int     `json:"status"`
		}
		if err = json.Unmarshal(buf[:n], &m); err != nil {
			err = fmt.Errorf("malformed message from the fork server: %w", err)
			break
		}
		if pidfd != nil && m.Pid == nil {
			pidfd.Close() // sent with no worker: nothing to signal through it
			pidfd = nil
		}
		switch {
		case m.Ready:
			close(s.ready)
		case m.Exited != nil:
			s.mu.Lock()
			if c := s.children[*m.Exited]; c != nil {
				delete(s.children, *m.Exited)
				c.end(exitStatusError(m.Status))
			}
			s.mu.Unlock()
		case m.Pid != nil:
			c := &forkedProc{pid: *m.Pid, ended: make(chan struct{}), pidfd: pidfd}
			s.mu.Lock()
			s.children[c.pid] = c
			s.replies.answer(m.ID, forkReply{proc: c})
			s.mu.Unlock()
		case m.Error != nil:
			s.mu.Lock()
			s.replies.answer(m.ID, forkReply{err: errors.New(*m.Error)}) // a spawn that gave up has left: dropped
			s.mu.Unlock()
		}
	}
	s.retire()               // first: an idle server's interpreter may take a while to finish exiting
	_ = s.cmd.Process.Kill() // its workers follow it (PR_SET_PDEATHSIG)
	_ = s.cmd.Wait()
	s.conn.Close()
	s.mu.Lock()
	s.err = err
	for pid, c := range s.children {
		c.end(fmt.Errorf("%w: %v", errForkServerGone, err))
		delete(s.children, pid)
	}
	s.mu.Unlock()
	close(s.done)
}

// receivedPidfd returns the pidfd a fork server sent with a message (oob,
// its control messages), nil when it sent none. More than one descriptor,
// or a control message that is not one, is the server breaking its
// protocol: every descriptor received is closed and an error returned.
func receivedPidfd(oob []byte) (*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("reading the fork server's control message: %w", err)
	}
	var fds []int
	for i := range msgs {
		rights, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			for _, fd := range fds {
				syscall.Close(fd)
			}
			return nil, fmt.Errorf("reading the fork server's control message: %w", err)
		}
		fds = append(fds, rights...)
	}
	switch len(fds) {
	case 0:
		return nil, nil
	case 1:
		return os.NewFile(uintptr(fds[0]), "pidfd"), nil
	}
	for _, fd := range fds {
		syscall.Close(fd)
	}
	return nil, fmt.Errorf("the fork server sent %d descriptors with one message, want at most a pidfd", len(fds))
}

func (s *forkServer) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// spawn forks a worker with packageDir as its PYTHONPATH (the rest of its
// environment is the server's: forkServerFor starts a server per
// environment), handing it files (stdin, control, stdout, stderr); the send
// and the reply together take at most wait. A server that does not take or
// answer the request in time is retired, not killed: its other workers run
// on. A server found gone (errForkServerGone) is retired at once, so that
// the next lookup starts another.
func (s *forkServer) spawn(packageDir string, files [4]*os.File, wait time.Duration) (*forkedProc, error) {
	deadline := time.Now().Add(wait)
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	id, reply, forget := s.replies.add()
	defer forget()
	msg, err := json.Marshal(map[string]any{"id": id, "package": packageDir})
	if err != nil {
		return nil, err
	}
	select {
	case s.sending <- struct{}{}:
	case <-time.After(time.Until(deadline)):
		s.retire()
		return nil, fmt.Errorf("asking the fork server for a worker: its socket was not free within %s", wait)
	}
	err = s.conn.SetWriteDeadline(deadline)
	if err == nil {
		_, _, err = s.conn.WriteMsgUnix(msg, syscall.UnixRights(fds...), nil)
	}
	<-s.sending
	switch {
	case err == nil:
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		s.retire()
		return nil, fmt.Errorf("asking the fork server for a worker: %w: %w", errForkServerGone, err)
	default: // a timeout (the server is stopped): this server cannot serve
		s.retire()
		return nil, fmt.Errorf("asking the fork server for a worker: %w", err)
	}
	select {
	case r := <-reply:
		if r.err != nil {
			return nil, fmt.Errorf("the fork server: %w", r.err)
		}
		return r.proc, nil
	case <-s.done: // its reader has retired it
		select {
		case r := <-reply: // answered before it exited: that worker is ending with it
			if r.err == nil {
				// not errForkServerGone: that worker may have written to the
				// control pipe, which no other may then use
				return nil, fmt.Errorf("asking the fork server for a worker: it exited after it forked worker %d (%v)",
					r.proc.pid, s.closedErr())
			}
		default:
		}
		return nil, fmt.Errorf("asking the fork server for a worker: %w (%v)", errForkServerGone, s.closedErr())
	case <-time.After(time.Until(deadline)):
		s.retire()
		return nil, fmt.Errorf("asking the fork server for a worker: no answer within %s", wait)
	}
}

// startForked starts a worker as a fork of the fork server for o: its stdin
// (tx), its control channel (rx) and its stdout and stderr copied to o's
// writers, as exec would.
func startForked(o StartOptions, env []string) (workerProc, io.WriteCloser, *os.File, error) {
	env = dedupEnv(env)
	serverEnv := withoutVar(env, "PYTHONPATH")
	var theirs []*os.File // closed here once the server has them
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
	}()
	var ours []io.Closer // closed on failure
	fail := func(err error) (workerProc, io.WriteCloser, *os.File, error) {
		for _, c := range ours {
			c.Close()
		}
		return nil, nil, nil, err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	theirs, ours = append(theirs, stdinR), append(ours, stdinW)
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	theirs, ours = append(theirs, ctlW), append(ours, ctlR)
	var copies []func(*forkedProc)
	output := func(w io.Writer) (*os.File, error) {
		if f, ok := w.(*os.File); ok && f != nil {
			return f, nil
		}
		if w == nil {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			theirs = append(theirs, f)
			return f, err
		}
		r, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		theirs, ours = append(theirs, pw), append(ours, r)
		copies = append(copies, func(p *forkedProc) {
			p.copying.Add(1)
			go func() {
				defer p.copying.Done()
				_, _ = io.Copy(w, r)
				r.Close()
			}()
		})
		return pw, nil
	}
	stdout, err := output(o.Stdout)
	if err != nil {
		return fail(err)
	}
	// One writer for both goes through one pipe, as exec.Cmd does, so that
	// it is never written by two copiers at once.
	stderr := stdout
	if !sameWriter(o.Stdout, o.Stderr) {
		if stderr, err = output(o.Stderr); err != nil {
			return fail(err)
		}
	}
	// A server found idle may exit as the request is sent (errForkServerGone,
	// and spawn has retired it): then one more, new server is asked.
	var p *forkedProc
	for try := 0; ; try++ {
		s, err := forkServerFor(o.Python, o.PackageDir, serverEnv, o.StartupTimeout)
		if err != nil {
			return fail(err)
		}
		if p, err = s.spawn(o.PackageDir, [4]*os.File{stdinR, ctlW, stdout, stderr}, o.StartupTimeout); err == nil {
			break
		}
		if !errors.Is(err, errForkServerGone) || try > 0 {
			return fail(err)
		}
	}
	for _, start := range copies {
		start(p)
	}
	return p, stdinW, ctlR, nil
}

// sameWriter reports whether a and b are one writer (exec.Cmd's test for
// sharing a pipe between Stdout and Stderr; writers that are not comparable
// are not).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}
