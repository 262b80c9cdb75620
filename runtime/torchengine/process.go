package torchengine

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ProtocolVersion is the version of the control protocol this binary speaks
// (python/easyscale/protocol.py VERSION); a process reporting another is refused.
const ProtocolVersion = 3

// Frame limits, as in python/easyscale/protocol.py.
const (
	maxHeader  = 16 << 20
	maxPayload = 64 << 30
)

// PinnedEnv are the settings every Python process of a job starts with
// (docs/pytorch-bits.md §2): one BLAS/OpenMP thread per process (the
// intra-op thread count is set by the load request), the CUDA determinism
// workspace, and no bytecode files written next to the extracted package.
var PinnedEnv = []string{
	"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1",
	"CUBLAS_WORKSPACE_CONFIG=:4096:8", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
}

// ErrExited is returned (wrapped) by calls on a process that has exited or
// whose control channel closed.
var ErrExited = errors.New("python worker process exited")

// RemoteError is an error a Python process answered a request with.
type RemoteError struct {
	Request string
	// Kind is "request", "job", "numerics", "peer" (a collective failed: rebuild
	// the group and redo the step) or "internal".
	Kind    string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("python worker: %s: %s error: %s", e.Request, e.Kind, e.Message)
}

// Process is one Python worker process (python3 -m easyscale.worker) and its
// control channel. Calls may overlap: replies are matched to requests by id
// (the process serves them in order, except checkpoint and cancel, which it
// answers at once even during a step or a rendezvous).
type Process struct {
	proc workerProc
	tx   io.WriteCloser
	rx   *os.File

	mu      sync.Mutex     // guards writes to tx
	waiting pending[frame] // the calls waiting for their replies

	done    chan struct{} // closed when the reader stops
	readErr error

	beatMu    sync.Mutex
	lastBeat  time.Time
	hbTimeout time.Duration
	// heard is set by the first frame: until then the interpreter is
	// starting and importing torch, which StartupTimeout bounds instead.
	heard     bool
	started   time.Time
	startWait time.Duration
}

type frame struct {
	header  map[string]any
	payload []byte
}

// StartOptions say how to start a Python worker process.
type StartOptions struct {
	Python     string    // interpreter (see Python)
	PackageDir string    // PYTHONPATH entry holding easyscale (see Extract)
	Env        []string  // extra environment (NAME=value), after PinnedEnv
	Stdout     io.Writer // the user's prints; nil discards
	Stderr     io.Writer // Python's logs and tracebacks; nil discards
	// Heartbeat is how often the process reports it is alive (default 1 s).
	Heartbeat time.Duration
	// HeartbeatTimeout is how long a call waits without a heartbeat before it
	// fails with ErrHung (default 5 s, the runtime's worker heartbeat timeout).
	HeartbeatTimeout time.Duration
	// StartupTimeout bounds the wait for the process's first frame, while the
	// interpreter starts and imports torch (default 120 s: seconds on an idle
	// machine, far more on a loaded one), and its silence while it runs the
	// user's setup (CallSetup: load). With the fork server it also bounds the
	// server's start (its torch import) and, separately, each spawn request.
	StartupTimeout time.Duration
}

// ErrHung is returned (wrapped) by a call during which the process sent no
// heartbeat for StartOptions.HeartbeatTimeout: it is stuck (or stopped) and
// should be killed.
var ErrHung = errors.New("python worker process sent no heartbeat")

// Start launches a Python worker process. It exits when Close or Kill is
// called, or when this process dies (its control channel closes): not when
// a context ends, since after SIGTERM the run still reads the checkpoint of
// the last committed step from it.
func Start(o StartOptions) (*Process, error) {
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = 5 * time.Second
	}
	if o.StartupTimeout <= 0 {
		o.StartupTimeout = 120 * time.Second
	}
	env := append(append(os.Environ(), PinnedEnv...), o.Env...)
	env = append(env, "PYTHONPATH="+o.PackageDir, fmt.Sprintf("EASYSCALE_HEARTBEAT_S=%g", o.Heartbeat.Seconds()))
	var (
		proc workerProc
		tx   io.WriteCloser
		rx   *os.File
		err  error
	)
	if forkServerEnabled() {
		if proc, tx, rx, err = startForked(o, env); err != nil && o.Stderr != nil && !errors.Is(err, errForkServerFailedRecently) {
			fmt.Fprintf(o.Stderr, "easyscale: forking a python worker: %v; starting its own interpreter instead (%s=0 always does)\n", err, ForkServerEnv)
		}
	}
	if proc == nil {
		if proc, tx, rx, err = startExec(o, env); err != nil {
			return nil, err
		}
	}
	p := &Process{proc: proc, tx: tx, rx: rx, done: make(chan struct{}),
		lastBeat: time.Now(), hbTimeout: o.HeartbeatTimeout, started: time.Now(), startWait: o.StartupTimeout}
	go p.read()
	return p, nil
}

// startExec starts a worker as its own interpreter (python3 -m
// easyscale.worker) with env: its stdin (tx) and control channel (rx).
func startExec(o StartOptions, env []string) (workerProc, io.WriteCloser, *os.File, error) {
	cmd := exec.Command(o.Python, "-m", "easyscale.worker")
	// A worker must not outlive this process (SIGKILLed coordinator): the
	// kernel kills it when its parent dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	tx, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the python worker: %w", err)
	}
	rx, w, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the python worker: %w", err)
	}
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	if err := cmd.Start(); err != nil {
		rx.Close()
		w.Close()
		return nil, nil, nil, fmt.Errorf("starting the python worker %s: %w", o.Python, err)
	}
	w.Close()
	return &execProc{cmd: cmd}, tx, rx, nil
}

// read delivers replies and records heartbeats until the channel closes.
func (p *Process) read() {
	defer close(p.done)
	br := bufio.NewReaderSize(p.rx, 1<<20)
	for {
		f, err := readFrame(br)
		if err != nil {
			p.readErr = err
			return
		}
		p.beatMu.Lock()
		p.lastBeat, p.heard = time.Now(), true
		p.beatMu.Unlock()
		if f.header["type"] == "heartbeat" {
			continue
		}
		id, _ := f.header["id"].(float64)
		p.waiting.answer(int64(id), f) // a caller that gave up has left: dropped
	}
}

// silent returns an error wrapping ErrHung when the process has been silent
// too long at now: HeartbeatTimeout since its last frame, or StartupTimeout
// since its start when it has sent none yet.
func (p *Process) silent(now time.Time) error { return p.silentFor(now, p.hbTimeout) }

// silentFor is silent with limit in place of HeartbeatTimeout.
func (p *Process) silentFor(now time.Time, limit time.Duration) error {
	p.beatMu.Lock()
	defer p.beatMu.Unlock()
	if !p.heard {
		if waited := now.Sub(p.started); waited > p.startWait {
			return fmt.Errorf("%w since it started %s ago (importing torch takes longer?)", ErrHung, waited.Round(time.Second))
		}
		return nil
	}
	if silent := now.Sub(p.lastBeat); silent > limit {
		return fmt.Errorf("%w for %s", ErrHung, silent.Round(time.Millisecond))
	}
	return nil
}

// LastHeartbeat is when the process last showed it is alive (a heartbeat or a reply).
func (p *Process) LastHeartbeat() time.Time {
	p.beatMu.Lock()
	defer p.beatMu.Unlock()
	return p.lastBeat
}

// Call sends request typ with fields and payload and waits for its reply,
// ctx's end, or the process's exit. It returns the reply's fields and
// payload; a *RemoteError when the process answered with an error; an error
// wrapping ErrExited when the process is gone. The reply is decoded into out
// when out is not nil.
func (p *Process) Call(ctx context.Context, typ string, fields map[string]any, payload []byte, out any) ([]byte, error) {
	return p.call(ctx, typ, fields, payload, out, p.hbTimeout)
}

// CallSetup is Call for a request that runs the user's own code before it
// answers (load: the training program's imports and setup up to its first
// need of the runtime). The process may be silent for up to StartupTimeout
// during it, not HeartbeatTimeout: one C call that holds Python's GIL
// (pandas.read_csv, a C extension's import, a cold library paged in on a
// loaded machine) stops the heartbeat thread for seconds though nothing is
// hung, and a load under load in a clean-clone CI run failed so ("sent no
// heartbeat for 5.886s"). Errors as Call's.
func (p *Process) CallSetup(ctx context.Context, typ string, fields map[string]any, payload []byte, out any) ([]byte, error) {
	return p.call(ctx, typ, fields, payload, out, max(p.startWait, p.hbTimeout))
}

// call is Call with the longest silence allowed (limit).
func (p *Process) call(ctx context.Context, typ string, fields map[string]any, payload []byte, out any, limit time.Duration) ([]byte, error) {
	req, err := p.send(typ, fields, payload)
	if err != nil {
		return nil, err
	}
	f, err := p.await(ctx, typ, req, limit)
	if err != nil {
		return nil, err
	}
	return decodeReply(typ, f, out)
}

// request is a request sent to the process: its id, the channel its reply
// comes on, and forget, which unregisters it (await calls it).
type request struct {
	id     int64
	reply  <-chan frame
	forget func()
}

// send writes request typ and registers its reply channel; requests sent
// from one goroutine reach the process in that order.
func (p *Process) send(typ string, fields map[string]any, payload []byte) (request, error) {
	id, reply, forget := p.waiting.add()
	header := map[string]any{"type": typ, "id": id}
	for k, v := range fields {
		header[k] = v
	}
	p.mu.Lock()
	err := writeFrame(p.tx, header, payload)
	p.mu.Unlock()
	if err != nil {
		forget()
		return request{}, fmt.Errorf("%s: sending the request: %w: %v", typ, ErrExited, err)
	}
	return request{id: id, reply: reply, forget: forget}, nil
}

// await waits for the reply to req, the process's exit, its silence for
// longer than limit, or ctx's end.
func (p *Process) await(ctx context.Context, typ string, req request, limit time.Duration) (frame, error) {
	defer req.forget()
	watch := time.NewTicker(p.hbTimeout / 4)
	defer watch.Stop()
	for {
		select {
		case f := <-req.reply:
			return f, nil
		case <-p.done:
			p.beatMu.Lock()
			heard := p.heard
			p.beatMu.Unlock()
			if !heard { // Python never started its worker: no torch, or a broken install
				return frame{}, fmt.Errorf("%s: %w before its first message (%v): the interpreter could not start "+
					"easyscale.worker (importing torch?); its stderr says why", typ, ErrExited, p.readErr)
			}
			return frame{}, fmt.Errorf("%s: %w (%v)", typ, ErrExited, p.readErr)
		case <-ctx.Done():
			return frame{}, fmt.Errorf("%s: %w", typ, ctx.Err())
		case now := <-watch.C:
			if err := p.silentFor(now, limit); err != nil {
				return frame{}, fmt.Errorf("%s: %w", typ, err)
			}
		}
	}
}

func decodeReply(typ string, f frame, out any) ([]byte, error) {
	if f.header["type"] == "error" {
		kind, _ := f.header["kind"].(string)
		msg, _ := f.header["message"].(string)
		return nil, &RemoteError{Request: typ, Kind: kind, Message: msg}
	}
	if out != nil {
		b, _ := json.Marshal(f.header) // decoded from JSON: re-encodes
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s: decoding the reply: %w", typ, err)
		}
	}
	return f.payload, nil
}

// Close asks the process to exit, waits up to grace for it, then kills it.
// It returns the process's exit error, nil for a clean exit.
func (p *Process) Close(grace time.Duration) error {
	p.mu.Lock()
	_ = writeFrame(p.tx, map[string]any{"type": "exit"}, nil)
	p.tx.Close()
	p.mu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- p.proc.Wait() }()
	select {
	case err := <-exited:
		p.rx.Close()
		return err
	case <-time.After(grace):
		_ = p.proc.Signal(os.Kill)
		err := <-exited
		p.rx.Close()
		return fmt.Errorf("python worker did not exit within %s, killed: %w", grace, err)
	}
}

// Kill ends the process at once (SIGKILL) and reaps it.
func (p *Process) Kill() {
	_ = p.proc.Signal(os.Kill)
	p.tx.Close()
	_ = p.proc.Wait()
	p.rx.Close()
}

// exited reports whether the control channel has closed (the process died).
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process (SIGTERM: it asks to leave at the next step boundary).
func (p *Process) Signal(sig os.Signal) error { return p.proc.Signal(sig) }

// Pid is the process id.
func (p *Process) Pid() int { return p.proc.Pid() }

func writeFrame(w io.Writer, header map[string]any, payload []byte) error {
	head, err := json.Marshal(header)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, 4+len(head)+8)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(head)))
	buf = append(buf, head...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(payload)))
	if _, err := w.Write(buf); err != nil {
		return err
	}
	if len(payload) > 0 {
		_, err = w.Write(payload)
	}
	return err
}

func readFrame(r io.Reader) (frame, error) {
	var n4 [4]byte
	if _, err := io.ReadFull(r, n4[:]); err != nil {
		return frame{}, err
	}
	hlen := binary.BigEndian.Uint32(n4[:])
	if hlen > maxHeader {
		return frame{}, fmt.Errorf("frame header of %d bytes exceeds %d", hlen, maxHeader)
	}
	head := make([]byte, hlen)
	if _, err := io.ReadFull(r, head); err != nil {
		return frame{}, err
	}
	var f frame
	if err := json.Unmarshal(head, &f.header); err != nil {
		return frame{}, fmt.Errorf("frame header is not a JSON object: %w", err)
	}
	if _, ok := f.header["type"].(string); !ok {
		return frame{}, fmt.Errorf("frame header has no \"type\"")
	}
	var n8 [8]byte
	if _, err := io.ReadFull(r, n8[:]); err != nil {
		return frame{}, err
	}
	plen := binary.BigEndian.Uint64(n8[:])
	if plen > maxPayload {
		return frame{}, fmt.Errorf("frame payload of %d bytes exceeds %d", plen, maxPayload)
	}
	if plen > 0 {
		f.payload = make([]byte, plen)
		if _, err := io.ReadFull(r, f.payload); err != nil {
			return frame{}, err
		}
	}
	return f, nil
}
