package torchengine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ForkServerEnv names the environment variable that turns the fork server
// off: "0" starts every worker as its own interpreter, as before the server
// existed (each one imports torch: one to two seconds of CPU).
const ForkServerEnv = "EASYSCALE_FORKSERVER"

// errForkServerGone is returned (wrapped) when the fork server's socket closed.
var errForkServerGone = errors.New("the fork server exited")

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

// forkServer is one `python3 -m easyscale.forkserver` (python/easyscale/
// forkserver.py has its protocol): it has imported torch once and forks a
// worker per spawn. It lives as long as this process: the kernel kills it
// when this process dies, and its workers when it dies.
type forkServer struct {
	cmd   *exec.Cmd
	conn  *net.UnixConn
	ready chan struct{} // closed when the server reported it imported torch
	done  chan struct{} // closed when its socket closed
	key   string

	spawnMu sync.Mutex     // one spawn request at a time: replies come in order
	replies chan forkReply // the reader's answer to the spawn in flight

	mu       sync.Mutex // guards children, err
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
}

func (p *forkedProc) Pid() int { return p.pid }

// Signal sends sig unless the process has been reported ended (its pid may
// then be another process's).
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
	return syscall.Kill(p.pid, s)
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

var forkServers = struct {
	sync.Mutex
	m map[string]*forkServer
}{m: map[string]*forkServer{}}

// forkServerEnabled reports whether workers are forked ($EASYSCALE_FORKSERVER
// is not "0").
func forkServerEnabled() bool { return os.Getenv(ForkServerEnv) != "0" }

// forkServerFor returns the running fork server for python and base (this
// process's environment and PinnedEnv: what torch reads at its import),
// starting one with packageDir on its PYTHONPATH when there is none, and
// waits up to wait for it to have imported torch.
func forkServerFor(python, packageDir string, base []string, wait time.Duration) (*forkServer, error) {
	key := python + "\x00" + strings.Join(base, "\x00")
	forkServers.Lock()
	s := forkServers.m[key]
	if s == nil {
		var err error
		if s, err = startForkServer(python, packageDir, base, key); err != nil {
			forkServers.Unlock()
			return nil, err
		}
		forkServers.m[key] = s
	}
	forkServers.Unlock()
	select {
	case <-s.ready:
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("starting the fork server: %w (%v)", errForkServerGone, s.closedErr())
	case <-time.After(wait):
		_ = s.cmd.Process.Kill()
		<-s.done
		return nil, fmt.Errorf("starting the fork server: torch not imported within %s", wait)
	}
}

func startForkServer(python, packageDir string, base []string, key string) (*forkServer, error) {
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
	cmd := exec.Command(python, "-m", "easyscale.forkserver")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(append([]string(nil), base...), "PYTHONPATH="+packageDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{theirs} // fd 3 in the server
	if err := cmd.Start(); err != nil {
		fc.Close()
		return nil, fmt.Errorf("starting the fork server %s: %w", python, err)
	}
	s := &forkServer{cmd: cmd, conn: fc.(*net.UnixConn), ready: make(chan struct{}), done: make(chan struct{}),
		key: key, replies: make(chan forkReply, 1), children: map[int]*forkedProc{}}
	go s.read()
	return s, nil
}

// read handles the server's messages until its socket closes: readiness,
// spawn replies (registering the child before the spawner sees it, so that an
// exit reported at once is not lost) and exits.
func (s *forkServer) read() {
	buf := make([]byte, 1<<16)
	var err error
	for {
		var n int
		n, _, _, _, err = s.conn.ReadMsgUnix(buf, nil)
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			break
		}
		var m struct {
			Ready  bool    `json:"ready"`
			Pid    *int    `json:"pid"`
			Error  *string `json:"error"`
			Exited *int    `json:"exited"`
			Status int     `json:"status"`
		}
		if err = json.Unmarshal(buf[:n], &m); err != nil {
			err = fmt.Errorf("malformed message from the fork server: %w", err)
			break
		}
		switch {
		case m.Ready:
			close(s.ready)
		case m.Exited != nil:
			s.mu.Lock()
			if c := s.children[*m.Exited]; c != nil {
				delete(s.children, *m.Exited)
				c.status = exitStatusError(m.Status)
				close(c.ended)
			}
			s.mu.Unlock()
		case m.Pid != nil:
			c := &forkedProc{pid: *m.Pid, ended: make(chan struct{})}
			s.mu.Lock()
			s.children[c.pid] = c
			s.mu.Unlock()
			s.replies <- forkReply{proc: c}
		case m.Error != nil:
			s.replies <- forkReply{err: errors.New(*m.Error)}
		}
	}
	_ = s.cmd.Process.Kill() // its workers follow it (PR_SET_PDEATHSIG)
	_ = s.cmd.Wait()
	s.conn.Close()
	forkServers.Lock()
	if forkServers.m[s.key] == s {
		delete(forkServers.m, s.key)
	}
	forkServers.Unlock()
	s.mu.Lock()
	s.err = err
	for pid, c := range s.children {
		c.status = fmt.Errorf("%w: %v", errForkServerGone, err)
		close(c.ended)
		delete(s.children, pid)
	}
	s.mu.Unlock()
	close(s.done)
}

func (s *forkServer) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// spawn forks a worker with env (NAME=value, the last of a name wins) and
// packageDir on its path, handing it files (stdin, control, stdout, stderr);
// it waits up to wait for the reply.
func (s *forkServer) spawn(env []string, packageDir string, files [4]*os.File, wait time.Duration) (*forkedProc, error) {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	msg, err := json.Marshal(map[string]any{"env": vars, "package": packageDir})
	if err != nil {
		return nil, err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	if _, _, err := s.conn.WriteMsgUnix(msg, syscall.UnixRights(fds...), nil); err != nil {
		return nil, fmt.Errorf("asking the fork server for a worker: %w", err)
	}
	select {
	case r := <-s.replies:
		if r.err != nil {
			return nil, fmt.Errorf("the fork server: %w", r.err)
		}
		return r.proc, nil
	case <-s.done:
		return nil, fmt.Errorf("asking the fork server for a worker: %w (%v)", errForkServerGone, s.closedErr())
	case <-time.After(wait):
		_ = s.cmd.Process.Kill()
		return nil, fmt.Errorf("asking the fork server for a worker: no answer within %s", wait)
	}
}

// startForked starts a worker as a fork of the fork server for o: its stdin
// (tx), its control channel (rx) and its stdout and stderr copied to o's
// writers, as exec would.
func startForked(o StartOptions, base, env []string) (workerProc, io.WriteCloser, *os.File, error) {
	s, err := forkServerFor(o.Python, o.PackageDir, base, o.StartupTimeout)
	if err != nil {
		return nil, nil, nil, err
	}
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
	stderr, err := output(o.Stderr)
	if err != nil {
		return fail(err)
	}
	p, err := s.spawn(env, o.PackageDir, [4]*os.File{stdinR, ctlW, stdout, stderr}, o.StartupTimeout)
	if err != nil {
		return fail(err)
	}
	for _, start := range copies {
		start(p)
	}
	return p, stdinW, ctlR, nil
}
