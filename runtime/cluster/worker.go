package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// WorkerOptions configure one worker process.
type WorkerOptions struct {
	// Join is the coordinator's HOST:PORT.
	Join string
	// Secret and JobID authenticate this worker (the job's token file and
	// id file, written by the coordinator into its state directory).
	Secret auth.Secret
	JobID  string
	// RingListen is the address of this worker's all-reduce endpoint;
	// empty means the address it reaches the coordinator from, any port.
	RingListen string
	// DataDir overrides the job file's data.dir on this machine.
	DataDir string
	// Threads is the cores this worker computes on (default all).
	Threads int
	// IOTimeout bounds every network read or write without progress
	// (default 10 s); Heartbeat is the heartbeat period (default 1 s).
	IOTimeout, Heartbeat time.Duration
	// JoinTimeout bounds how long the worker retries reaching the
	// coordinator, counted from its start and again from each loss of a
	// coordinator that had accepted it, however long it was connected
	// (default 60 s).
	JoinTimeout time.Duration
	// CoordinatorTimeout declares the coordinator lost when nothing, not
	// even its heartbeat, arrives for this long (default 15 s).
	CoordinatorTimeout time.Duration
	// LeaveGrace is how long a worker that got SIGTERM waits for the step
	// boundary where the coordinator releases it (default 5 s, under
	// Slurm's KillWait: 30 s by default, 10 s on the lab). A step that ends
	// within it is finished and nothing is redone; past it the worker
	// abandons its part of the step in progress and leaves at once, and
	// the coordinator redoes that step on the survivors. Negative: leave
	// at once.
	LeaveGrace time.Duration
	// Ended, when set, is asked after each failed attempt to reach or keep
	// the coordinator (at most every 500 ms) whether the job has ended
	// meanwhile, e.g. the coordinator recorded its exit status in the
	// rendezvous directory: RunWorker then returns ErrJobEnded at once
	// instead of retrying for JoinTimeout.
	Ended func() bool
	// Node is this worker's Slurm node (SLURMD_NODENAME), reported at
	// join so that the coordinator picks its standby on another node.
	Node string
	// Takeover lets RunWorker return a *TakeoverError when this worker,
	// the coordinator's standby, loses the coordinator (standby.go),
	// instead of trying to rejoin it; an engine session (Torch) returns
	// its own *TakeoverError, with an engine's copy, which RunWorker then
	// passes on.
	Takeover bool
	// Locate, when set, is asked before each attempt to rejoin for the
	// coordinator's address (the rendezvous directory's record, which a
	// standby that took over rewrites); "" keeps Join.
	Locate func() string
	Logger hclog.Logger
	// Torch runs this worker's part of a torch job (engine = "torch") on
	// the authenticated, welcomed connection (torchengine.RunWorker); nil
	// refuses torch jobs.
	Torch func(ctx context.Context, s *EngineSession) error
	// connectRing builds the all-reduce ring (tests may replace it).
	connectRing ringConnector
}

func (o *WorkerOptions) defaults() {
	if o.IOTimeout == 0 {
		o.IOTimeout = 10 * time.Second
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = time.Second
	}
	if o.JoinTimeout == 0 {
		o.JoinTimeout = 60 * time.Second
	}
	if o.CoordinatorTimeout == 0 {
		o.CoordinatorTimeout = 15 * time.Second
	}
	if o.LeaveGrace == 0 {
		o.LeaveGrace = DefaultLeaveGrace
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.connectRing == nil {
		o.connectRing = connectCollective(o.IOTimeout, o.Secret, o.JobID)
	}
}

// DefaultLeaveGrace is WorkerOptions.LeaveGrace's default.
const DefaultLeaveGrace = 5 * time.Second

// ErrLeft is returned by RunWorker when the worker left on request
// (SIGTERM, or the coordinator released it): the process should exit 0.
var ErrLeft = errors.New("worker released")

// RefusedError is returned by RunWorker when the coordinator refused to
// admit this worker, e.g. because its training data differ (File names
// the first file that does). Retrying cannot help, so RunWorker does not.
type RefusedError struct {
	Coordinator string // HOST:PORT
	Reason      string
	File        string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the coordinator %s refused this worker: %s", e.Coordinator, e.Reason)
}

// ErrUnreachable is wrapped by RunWorker's error when the coordinator
// stayed unreachable for JoinTimeout (from the worker's start, or from the
// loss of the coordinator); the error says for how long and since when.
var ErrUnreachable = errors.New("unreachable")

// ErrJobEnded is returned by RunWorker when WorkerOptions.Ended says the
// job ended while the worker was not admitted: the process should exit 0.
var ErrJobEnded = errors.New("the job has ended")

// RunWorker joins the coordinator and executes steps until released
// (returns ErrLeft), ctx ends, or the coordinator stays unreachable for
// JoinTimeout. A lost coordinator (killed and restarted, or one that
// dropped this worker) is rejoined, with JoinTimeout counted from the loss.
//
// SIGTERM (or SIGUSR1) asks the coordinator to release this worker at the
// next step boundary; if that boundary has not come LeaveGrace later, the
// worker abandons the step in progress and returns ErrLeft at once. When
// ctx ends, or the coordinator says goodbye or is gone, the step in
// progress is abandoned at once too: the coordinator holds the
// authoritative state, so nothing a worker computes is needed once it
// leaves.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	o.defaults()
	leaveReq, leaveNow, stop := watchLeaveSignals(o.LeaveGrace, o.Logger)
	defer stop()
	retry := rejoin{timeout: o.JoinTimeout, since: time.Now()}
	for {
		joined, standby, err := runSession(ctx, o, leaveReq, leaveNow)
		var te *TakeoverError
		if errors.As(err, &te) && !o.Takeover {
			// An engine session's standby copy that is not handed on
			// (this worker rejoins): what it keeps warm for a takeover
			// (a torch spare process) is released now, not when this
			// worker exits.
			te.Copy.Release()
		}
		if errors.Is(err, ErrLeft) || ctx.Err() != nil {
			return err
		}
		var ae *auth.Error
		if errors.As(err, &ae) {
			return fmt.Errorf("joining %s: %w", o.Join, err) // wrong token/job/version: retrying cannot help
		}
		var re *RefusedError
		if errors.As(err, &re) {
			return err // other training data: retrying cannot help
		}
		select {
		case <-leaveReq:
			return ErrLeft
		default:
		}
		if o.Ended != nil && o.Ended() {
			o.Logger.Info("the job has ended; not rejoining", "join", o.Join, "error", err)
			return ErrJobEnded
		}
		if o.Takeover && standby != nil {
			return &TakeoverError{Copy: standby, Cause: err}
		}
		if o.Takeover && te != nil { // an engine session's standby (Torch)
			return te
		}
		if err := retry.ended(time.Now(), joined, o.Join, err); err != nil {
			return err
		}
		o.Logger.Warn("lost the coordinator; rejoining", "join", o.Join, "error", err)
		if o.Locate != nil {
			if addr := o.Locate(); addr != "" && addr != o.Join {
				o.Logger.Info("the coordinator moved", "from", o.Join, "to", addr)
				o.Join = addr
			}
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-leaveReq:
			return ErrLeft
		case <-ctx.Done():
			return fmt.Errorf("rejoining %s: %w", o.Join, ctx.Err())
		}
	}
}

// watchLeaveSignals turns SIGTERM (or SIGUSR1) into a leave request:
// leaveReq is closed at the signal, leaveNow grace later (at once when
// grace is negative). stop ends the watch and gives the signals back to
// their default handling; neither channel is closed after it.
func watchLeaveSignals(grace time.Duration, log hclog.Logger) (leaveReq, leaveNow <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR1)
	req, now, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			log.Info("signal: leaving at the next step boundary", "signal", s.String(), "leave_grace", grace.String())
			close(req)
		case <-done:
			return
		}
		select {
		case <-time.After(max(0, grace)):
			close(now)
		case <-done:
		}
	}()
	return req, now, func() {
		signal.Stop(sigs)
		close(done)
	}
}

// rejoin is RunWorker's deadline for reaching the coordinator: JoinTimeout
// from the worker's start, and again from each loss of a coordinator that
// had accepted it, however long it was connected before. The session that
// lost it is always followed by at least one attempt to rejoin.
type rejoin struct {
	timeout time.Duration
	// since is the worker's start, or (lost) the moment it last lost a
	// coordinator that had accepted it.
	since time.Time
	lost  bool
}

// ended records a session that ended at now with cause; joined says the
// coordinator had accepted the worker in it (admitted it, or queued it for
// an engine session), so the coordinator was lost at now. It returns an
// error wrapping ErrUnreachable and cause when the worker must give up,
// nil when it should try again.
func (r *rejoin) ended(now time.Time, joined bool, join string, cause error) error {
	if joined {
		r.since, r.lost = now, true
		return nil
	}
	waited := now.Sub(r.since)
	if waited < r.timeout {
		return nil
	}
	from := "since the worker started"
	if r.lost {
		from = "since it was lost"
	}
	return fmt.Errorf("coordinator %s %w for %v %s (join timeout %v): %w", join, ErrUnreachable, waited.Round(time.Millisecond), from, r.timeout, cause)
}

var errNeverJoined = errors.New("not admitted")

// session is one admission to a coordinator.
type session struct {
	o WorkerOptions
	p *peer
	// joined is set once the coordinator accepted this worker: admitted
	// it (native), or queued it for admission (engine session). Losing
	// the coordinator after that restarts RunWorker's join deadline.
	joined  bool
	spec    *jobspec.Spec
	wl      workload.Workload
	sampler *data.Sampler
	rep     *trainer.Replica
	ln      net.Listener
	ring    ring
	ringID  int64
	// ringSize is the number of ranks of ring.
	ringSize int
	grads    [][]float32
	reduced  []float32
	// reducedAt is the step whose all-reduce result reduced holds (-1:
	// none). A rank other than the last reports its step before that
	// result has arrived; the commit of a step whose result never came
	// cannot be applied, and the session ends (the worker rejoins).
	reducedAt int64
	// ahead is the step whose update this worker applied as soon as its
	// result was here, before the coordinator's commit (-1: none), at
	// rate aheadLR; backup is the replica as it was before, restored when
	// the commit does not come (a redo of that step) or has another rate.
	ahead   int64
	aheadLR float32
	backup  *trainer.Replica
	// horizon is the job's number of steps, for the learning rate
	// (trainer.LearningRate).
	horizon int64
	// guess is the next step, which this worker computes on its own as
	// soon as its update of the last one is applied ahead, expecting the
	// same logical workers on the same ring (nil: none); it computes on
	// guessRep into guessGrads, so a dropped guess runs on without
	// holding anything the step needs. stale is the last dropped guess,
	// which may still be computing (no new guess starts until it ends).
	guess      *guess
	stale      *guess
	guessRep   *trainer.Replica
	guessGrads [][]float32
	// stash holds the next step's frames when they arrive while this
	// worker still receives the previous step's result; next returns
	// them first.
	stash []frame
	// at is the step this worker's replica is ready for: it holds the
	// updates of every earlier step (-1: unknown until the first step
	// message, for a worker admitted outside a step boundary).
	at int64
	// msgs carries the coordinator's frames from the reader goroutine, so
	// an Abort can reach a step blocked in the all-reduce.
	msgs chan frame
	// quit is closed when the session must end at once, abandoning any
	// step in progress: the leave grace after SIGTERM passed, or ctx
	// ended; quitErr says which.
	quit    chan struct{}
	quitErr error
	// standbyNext is the standby message for the next step message, and
	// standby the committed state kept as the coordinator's standby (nil:
	// this worker is not its standby); standby.go.
	standbyNext *pendingStandby
	standby     *StandbyCopy
}

// frame is one message from the coordinator, or the read error that ended
// the reader.
type frame struct {
	t   wire.Type
	b   []byte
	err error
}

// readControl reads the coordinator's frames into s.msgs until an error.
// Every frame, heartbeats included, must arrive within CoordinatorTimeout.
// The channel is closed when the reader ends, so a consumer that already
// took the error frame does not wait forever.
func (s *session) readControl(stop <-chan struct{}) {
	defer close(s.msgs)
	for {
		t, b, err := s.p.recv()
		select {
		case s.msgs <- frame{t: t, b: b, err: err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// next returns the next frame that is not a heartbeat (stashed frames
// first), or the quit error.
func (s *session) next() (frame, error) {
	if len(s.stash) > 0 {
		f := s.stash[0]
		s.stash = s.stash[1:]
		return f, nil
	}
	for {
		select {
		case <-s.quit:
			return frame{}, s.quitErr
		case f, ok := <-s.msgs:
			if !ok {
				return frame{}, errors.New("reading from the coordinator: the connection is gone")
			}
			if f.err != nil {
				return f, fmt.Errorf("reading from the coordinator: %w", f.err)
			}
			if f.t != typeHeartbeat {
				return f, nil
			}
		}
	}
}

// runSession is one attempt to join the coordinator and work for it. joined
// reports whether the coordinator accepted this worker (see session.joined)
// before the session ended with err.
func runSession(ctx context.Context, o WorkerOptions, leaveReq, leaveNow <-chan struct{}) (joined bool, standby *StandbyCopy, err error) {
	s := &session{o: o}
	err = s.run(ctx, leaveReq, leaveNow)
	return s.joined, s.standby, err
}

// run dials the coordinator, authenticates, is welcomed and admitted, and
// serves the coordinator's messages until the session ends.
func (s *session) run(ctx context.Context, leaveReq, leaveNow <-chan struct{}) error {
	o := s.o
	nc, err := net.DialTimeout("tcp", o.Join, o.IOTimeout)
	if err != nil {
		return fmt.Errorf("%w: dialing %s: %w", errNeverJoined, o.Join, err)
	}
	defer nc.Close()
	if _, err := auth.Client(ctx, nc, auth.Config{JobID: o.JobID, Secret: o.Secret}, "worker"); err != nil {
		return err
	}
	s.p = &peer{c: wire.NewConn(nc, o.IOTimeout, wire.MaxTensor)}
	host := o.RingListen
	if host == "" {
		h, _, _ := net.SplitHostPort(nc.LocalAddr().String())
		host = net.JoinHostPort(h, "0")
	}
	if s.ln, err = net.Listen("tcp", host); err != nil {
		return fmt.Errorf("listening for the all-reduce ring on %s: %w", host, err)
	}
	defer s.ln.Close()
	defer func() {
		if s.ring != nil {
			s.ring.Close()
		}
	}()
	// Until admitted (which waits for a step boundary, however long the
	// step) the worker holds nothing: a leave request or ctx ending drops
	// the connection at once.
	admitted := make(chan struct{})
	var admittedOnce sync.Once
	markAdmitted := func() { admittedOnce.Do(func() { close(admitted) }) }
	defer markAdmitted()
	go func() {
		select {
		case <-leaveReq:
			nc.Close()
		case <-ctx.Done():
			nc.Close()
		case <-admitted:
		}
	}()
	spec, err := s.welcome()
	if err != nil {
		return err
	}
	if spec.Engine == jobspec.EngineTorch {
		return s.engineSession(ctx, spec, nc, leaveReq, leaveNow, markAdmitted)
	}
	if err := s.prepare(spec); err != nil {
		return err
	}
	hn, _ := os.Hostname()
	if err := s.p.send(typeJoin, joinMsg{Version: ProtocolVersion, JobID: o.JobID, Host: hn, PID: os.Getpid(), RingAddr: s.ln.Addr().String(), Node: o.Node,
		Data: s.wl.Data()}, 0, nil); err != nil {
		return fmt.Errorf("%w: sending join: %w", errNeverJoined, err)
	}
	if err := s.admit(); err != nil {
		return err
	}
	s.joined = true
	markAdmitted()
	o.Logger.Info("joined", "coordinator", o.Join, "job_name", s.spec.Name, "ring", s.ln.Addr().String())
	stop := make(chan struct{})
	defer close(stop)
	s.p.c.Timeout = o.CoordinatorTimeout // reads; writes are short
	s.msgs = make(chan frame, 16)
	s.quit = make(chan struct{})
	go func() {
		select {
		case <-leaveNow:
			s.quitErr = ErrLeft
		case <-ctx.Done():
			s.quitErr = ctx.Err()
		case <-stop:
			return
		}
		close(s.quit)
	}()
	go s.readControl(stop)
	go s.heartbeat(stop)
	go func() {
		select {
		case <-leaveReq:
			if err := s.p.send(typeLeave, leaveMsg{Reason: "signal"}, 0, nil); err != nil {
				o.Logger.Warn("asking to leave", "error", err)
			}
		case <-stop:
		}
	}()
	return s.loop(ctx)
}

// welcome reads the job the coordinator welcomes this worker to, with
// this machine's data directory.
func (s *session) welcome() (*jobspec.Spec, error) {
	var w welcomeMsg
	if err := s.p.recvJSON(typeWelcome, &w); err != nil {
		return nil, fmt.Errorf("%w: waiting for the welcome: %w", errNeverJoined, err)
	}
	var spec jobspec.Spec
	if err := json.Unmarshal([]byte(w.Spec), &spec); err != nil {
		return nil, fmt.Errorf("decoding the job spec: %w", err)
	}
	spec.Data.Dir = w.DataDir
	if s.o.DataDir != "" {
		spec.Data.Dir = s.o.DataDir
	}
	if spec.Torch != nil {
		spec.Torch.Module, spec.Torch.ModulePath = w.Module, w.Module
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("the coordinator's job spec: %w", err)
	}
	return &spec, nil
}

// prepare loads the native job's data and builds the replica, before
// asking to be admitted.
func (s *session) prepare(spec *jobspec.Spec) error {
	wl, err := workload.New(spec)
	if err != nil {
		return err
	}
	threads := s.o.Threads
	if threads < 1 {
		threads = max(1, numCPU())
	}
	rep, err := trainer.NewReplica(spec, wl, threads)
	if err != nil {
		return err
	}
	sampler, err := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed)
	if err != nil {
		return err
	}
	horizon, err := spec.Horizon(sampler.StepsPerEpoch(spec.MicroBatch))
	if err != nil {
		return err
	}
	backup, err := trainer.NewReplica(spec, wl, 1)
	if err != nil {
		return err
	}
	s.spec, s.wl, s.rep, s.sampler, s.backup, s.horizon = spec, wl, rep, sampler, backup, horizon
	s.reduced = make([]float32, rep.NumParams())
	s.reducedAt, s.ahead = -1, -1
	return nil
}

// admit waits for the next step boundary, where the coordinator sends the
// parameters and optimizer state of its replica, verified by sha256.
func (s *session) admit() error {
	var m stateMsg
	s.p.c.SetTimeout(0) // admission waits for a step boundary
	t, b, err := s.p.recv()
	s.p.c.Timeout = s.o.IOTimeout
	if err == nil && t == typeRefused {
		var r refusedMsg
		_ = json.Unmarshal(b, &r)
		return &RefusedError{Coordinator: s.o.Join, Reason: r.Reason, File: r.File}
	}
	if err == nil && t != typeState {
		err = fmt.Errorf("expected a %v message, got %v", typeState, t)
	}
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return fmt.Errorf("%w: waiting for admission: %w", errNeverJoined, err)
	}
	if s.rep.NumParams() != m.NumParams {
		return fmt.Errorf("the coordinator's model has %d parameters, this worker builds %d", m.NumParams, s.rep.NumParams())
	}
	total := m.NumParams
	for _, n := range m.OptimLens {
		if n < 0 || n > 1<<30 {
			return fmt.Errorf("optimizer state length %d out of range", n)
		}
		total += n
	}
	state := make([]float32, total)
	if err := s.p.recvFloats(typeState, state); err != nil {
		return fmt.Errorf("receiving the model state: %w", err)
	}
	if got := stateChecksum(state); got != m.StateSHA256 {
		return fmt.Errorf("model state checksum %s, the coordinator sent %s", got, m.StateSHA256)
	}
	s.at = m.Step
	return loadState(s.rep, state, m.OptimNames, m.OptimLens)
}

func (s *session) heartbeat(stop <-chan struct{}) {
	t := time.NewTicker(s.o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := s.p.send(typeHeartbeat, struct{}{}, 0, nil); err != nil {
				return
			}
		}
	}
}

// loop serves the coordinator's messages.
func (s *session) loop(ctx context.Context) error {
	defer func() {
		s.guess.stopSoon()
		s.stale.stopSoon()
	}()
	for {
		f, err := s.next()
		if err != nil {
			return err
		}
		switch f.t {
		case typeStep:
			var m stepMsg
			if err := json.Unmarshal(f.b, &m); err != nil {
				return fmt.Errorf("decoding a step message: %w", err)
			}
			if err := s.step(ctx, &m); err != nil {
				return err
			}
		case typeStandby:
			if err := s.receiveStandby(f.b); err != nil {
				return err
			}
		case typeAbort:
			// Nothing was committed; the redo comes as a new step message.
		case typeBye:
			return s.bye(f.b)
		default:
			return fmt.Errorf("unexpected %v message from the coordinator", f.t)
		}
	}
}

func (s *session) bye(b []byte) error {
	var m byeMsg
	_ = json.Unmarshal(b, &m)
	s.o.Logger.Info("released by the coordinator", "reason", m.Reason)
	return ErrLeft
}

// commit applies the previous step's update when m carries it, and checks
// that the replica is then at m's step. An update applied ahead
// (applyAhead) stands when m commits that step at the same rate (kept
// reports it), and is undone otherwise.
func (s *session) commit(m *stepMsg) (kept bool, err error) {
	c := m.Commit
	if s.ahead >= 0 {
		ahead := s.ahead
		s.ahead = -1
		if c != nil && c.Step == ahead && math.Float32bits(c.LR) == math.Float32bits(s.aheadLR) {
			c, kept = nil, true
			s.at = ahead + 1
		} else if err := s.rep.CopyFrom(s.backup); err != nil {
			return false, fmt.Errorf("step %d: undoing the update of step %d applied ahead: %w", m.Step, ahead, err)
		}
	}
	if c != nil {
		if s.at >= 0 && c.Step != s.at {
			return false, fmt.Errorf("step %d: the coordinator commits step %d, this replica is at step %d", m.Step, c.Step, s.at)
		}
		if s.reducedAt != c.Step {
			return false, fmt.Errorf("step %d: the coordinator commits step %d, whose all-reduce result never reached this worker (it had reported its part): rejoining", m.Step, c.Step)
		}
		s.rep.Apply(s.reduced, c.LR)
		s.at = c.Step + 1
	}
	if s.at >= 0 && m.Step != s.at {
		return false, fmt.Errorf("step %d asked of a replica at step %d (a commit was lost)", m.Step, s.at)
	}
	s.at = m.Step
	return kept, nil
}

// applyAhead applies step's update, whose all-reduce result is in
// s.reduced, at the rate the coordinator will commit it
// (trainer.LearningRate), keeping the replica as it was in s.backup: the
// worker is idle until the next step's message, which would otherwise
// start with this update. commit keeps it or undoes it.
func (s *session) applyAhead(step int64) {
	if s.backup == nil || s.reducedAt != step {
		return
	}
	if err := s.backup.CopyFrom(s.rep); err != nil {
		return // the commit applies it then
	}
	s.ahead, s.aheadLR = step, trainer.LearningRate(s.spec, s.horizon, step)
	s.rep.Apply(s.reduced, s.aheadLR)
}

// step applies the previous step's commit, computes this worker's ESTs,
// joins the all-reduce and answers; the ring's last rank returns the
// reduced gradient with its answer.
func (s *session) step(ctx context.Context, m *stepMsg) error {
	g := s.guess // the step this worker may have started on its own
	s.guess = nil
	adopted := false
	drop := func() { // the guess ends after the logical worker it computes
		if g != nil && !adopted {
			g.stopSoon()
			s.stale, g = g, nil // startGuess waits for it to end
		}
	}
	defer drop()
	kept, err := s.commit(m)
	if err != nil {
		return err
	}
	if err := s.keepStandby(m.Step); err != nil {
		return err
	}
	ests, bufs, err := s.receiveContexts(m.ESTs)
	if err != nil {
		return fmt.Errorf("step %d: %w", m.Step, err)
	}
	if m.TermSelf {
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
	var connectMs float64
	if m.RingID != s.ringID {
		if s.ring != nil {
			s.ring.Close()
			s.ring = nil
		}
		t0 := time.Now()
		r, err := s.o.connectRing(ctx, m.Rank, m.Ring, s.ln, m.RingID)
		if err != nil {
			return s.stepFailed(m, fmt.Errorf("connecting the ring: %w", err))
		}
		s.ring, s.ringID, s.ringSize = r, m.RingID, len(m.Ring)
		connectMs = float64(time.Since(t0).Microseconds()) / 1000
	}
	for len(s.grads) < len(ests) {
		s.grads = append(s.grads, make([]float32, s.rep.NumParams()))
	}
	local := s.grads[:len(ests)]
	var computed <-chan struct{}
	adopted = kept && !m.KillSelf && !m.TermSelf && g.matches(m, s.ringID, bufs)
	if adopted { // the step this worker started on its own
		ests, computed, local = g.ests, g.done, g.local
		s.grads, s.guessGrads = s.guessGrads, s.grads
	} else {
		drop()
		computed = s.compute(s.rep, m.Step, ests, local, m.ESTs, m.KillSelf, nil)
	}
	if over, err := s.awaitCompute(m.Step, computed); over {
		return err
	} else if err != nil {
		return s.stepFailed(m, err)
	}
	if adopted {
		copy(m.ESTs, g.results)
	}
	scale := float32(1) / float32(s.spec.LogicalWorkers)
	done := stepDoneMsg{Step: m.Step, Attempt: m.Attempt, ESTs: m.ESTs, RingConnectMs: connectMs}
	last := m.Rank == s.ringSize-1
	// A rank other than the last reports as soon as its part of the
	// all-reduce is sent: the coordinator needs only the last rank's
	// answer (which carries the result) after the all-reduce, and this
	// rank needs the result only for the next step's commit.
	reported := false
	var report func() error
	if !last {
		report = func() error {
			reported = true
			gatherBuffers(bufs, ests)
			if err := s.p.send(typeStepDone, done, typeBuffers, bufs); err != nil {
				return fmt.Errorf("step %d: reporting: %w", m.Step, err)
			}
			return nil
		}
	}
	s.reducedAt = -1
	if err := s.allReduce(ctx, m.Step, local, m.FirstEST, scale, report); err != nil {
		if errors.Is(err, ErrLeft) || (reported && errors.Is(err, errReporting)) {
			return err
		}
		return s.stepFailed(m, err)
	}
	s.reducedAt = m.Step
	if !reported {
		gatherBuffers(bufs, ests)
		if last {
			done.Grad = true
			bufs = append(bufs, s.reduced...)
		}
		if err := s.p.send(typeStepDone, done, typeBuffers, bufs); err != nil {
			return fmt.Errorf("step %d: reporting: %w", m.Step, err)
		}
	}
	s.applyAhead(m.Step)
	s.startGuess(m, ests)
	return nil
}

// compute runs ests' micro-batches of step on rep in a goroutine, writing
// each gradient to local and its loss, sample hash and advanced cursor to
// results; the channel is closed when it is done, or when stop (if not
// nil) is set, checked before each EST. kill SIGKILLs the process after
// the first EST (fault injection).
func (s *session) compute(rep *trainer.Replica, step int64, ests []*trainer.ESTContext, local [][]float32, results []estState, kill bool, stop *atomic.Bool) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, c := range ests {
			if stop != nil && stop.Load() {
				return
			}
			in := trainer.ESTInput{Workload: s.wl, Sampler: s.sampler, Seed: s.spec.Seed, Step: step,
				MicroBatch: s.spec.MicroBatch, StreamKey: c.ID, Buffers: c.Buffers}
			results[i].Loss, results[i].Hash = rep.ComputeEST(c, in, local[i])
			results[i].Epoch, results[i].Pos = c.Cursor.Epoch, c.Cursor.Pos
			if kill {
				s.o.Logger.Warn("fault injection: SIGKILL myself mid-step", "step", step)
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}()
	return done
}

// errReporting marks a failure to send a step's answer to the
// coordinator: the connection is gone and the session ends.
var errReporting = errors.New("reporting to the coordinator")

// awaitCompute waits for this worker's ESTs of step to be computed (done
// closed) while serving the coordinator's frames. The session ends at once,
// leaving the computation to finish into buffers no one reads again (the
// next session builds its own replica), when it must quit, when the
// coordinator says goodbye, or when its connection is gone. An Abort
// (another worker was lost) waits for the computation, since the redo
// reuses this replica, and is then returned; the frames after it are left
// for the session's loop. over reports that the session ends with err.
func (s *session) awaitCompute(step int64, done <-chan struct{}) (over bool, err error) {
	msgs := s.msgs
	var stopErr error
	for {
		select {
		case <-done:
			return false, stopErr
		case <-s.quit:
			s.o.Logger.Warn("abandoning this worker's part of the step in progress", "step", step, "reason", s.quitErr.Error())
			return true, s.quitErr
		case f, ok := <-msgs:
			switch {
			case !ok:
				return true, errors.New("reading from the coordinator: the connection is gone")
			case f.err != nil:
				return true, fmt.Errorf("reading from the coordinator: %w", f.err)
			case f.t == typeHeartbeat:
			case f.t == typeAbort:
				stopErr = fmt.Errorf("step %d aborted by the coordinator (a worker was lost)", step)
				msgs = nil
			case f.t == typeBye:
				return true, s.bye(f.b)
			default:
				return true, fmt.Errorf("unexpected %v message during step %d", f.t, step)
			}
		}
	}
}

// allReduce runs the ring's all-reduce while serving the coordinator: an
// Abort (another member was lost) or a Bye closes the ring, so a step
// blocked on a dead or cut-off neighbour ends at once instead of after
// the ring's I/O timeout. Any failure leaves the ring closed. When report
// is not nil it is called once this rank's part is sent; after it, the
// next step's frames may arrive before the result, and are stashed. A
// report error (wrapping errReporting) fails the all-reduce. Once it
// fails, the frames that follow are left for the session's loop (the
// redo's step message among them).
func (s *session) allReduce(ctx context.Context, step int64, local [][]float32, first int, scale float32, report func() error) error {
	done := make(chan error, 1)
	r := s.ring
	sent := make(chan struct{}, 1)
	var contributed func()
	if report != nil {
		contributed = func() { sent <- struct{}{} }
	}
	go func() { done <- r.AllReduceNotify(ctx, s.reduced, local, first, scale, contributed) }()
	var stopErr error
	quit, msgs := s.quit, s.msgs
	reported := false
	for {
		select {
		case <-sent:
			reported = true
			if err := report(); err != nil {
				stopErr = fmt.Errorf("%w: %w", errReporting, err)
				r.Close() // AllReduce returns promptly
			}
			continue
		case <-quit:
			stopErr, quit = s.quitErr, nil
			r.Close() // AllReduce returns promptly
		case err := <-done:
			if err == nil && stopErr == nil {
				return nil
			}
			r.Close()
			s.ring, s.ringID = nil, 0
			if stopErr != nil {
				return stopErr
			}
			return fmt.Errorf("all-reduce: %w", err)
		case f, ok := <-msgs:
			switch {
			case !ok:
				stopErr = errors.New("the connection to the coordinator is gone")
			case f.err != nil:
				stopErr = fmt.Errorf("reading from the coordinator: %w", f.err)
			case f.t == typeAbort:
				stopErr = fmt.Errorf("step %d aborted by the coordinator (a worker was lost)", step)
			case f.t == typeBye:
				stopErr = s.bye(f.b)
			case f.t == typeHeartbeat:
				continue
			case reported && (f.t == typeStep || f.t == typeBuffers || f.t == typeStandby):
				s.stash = append(s.stash, f) // the next step, sent on this rank's report
				continue
			default:
				stopErr = fmt.Errorf("unexpected %v message during the all-reduce", f.t)
			}
			msgs = nil
			r.Close() // AllReduce returns promptly
		}
	}
}

// stepFailed reports a failed step attempt to the coordinator, which
// aborts it.
func (s *session) stepFailed(m *stepMsg, err error) error {
	s.o.Logger.Warn("step failed", "step", m.Step, "error", err)
	if serr := s.p.send(typeStepError, stepErrorMsg{Step: m.Step, Attempt: m.Attempt, Error: err.Error()}, 0, nil); serr != nil {
		return fmt.Errorf("step %d: %v; reporting it: %w", m.Step, err, serr)
	}
	return nil
}

// receiveContexts builds the EST contexts a message lists (cursors checked
// against the sampler) and fills their buffers from the buffers frame that
// follows it, in the listed order; bufs is that frame's data, all the
// contexts' buffers concatenated.
func (s *session) receiveContexts(states []estState) (ests []*trainer.ESTContext, bufs []float32, err error) {
	ests = make([]*trainer.ESTContext, len(states))
	nbuf := 0
	for i, e := range states {
		c := &trainer.ESTContext{ID: e.ID, Cursor: data.Cursor{Epoch: e.Epoch, Pos: e.Pos}, Buffers: s.rep.Net.NewBuffers()}
		if err := s.sampler.Check(c.Cursor, c.ID, s.spec.MicroBatch); err != nil {
			return nil, nil, fmt.Errorf("context of EST %d: %w", e.ID, err)
		}
		ests[i] = c
		nbuf += bufferLen(c)
	}
	bufs = make([]float32, nbuf)
	bf, err := s.next()
	if err == nil {
		err = decodeFloats(bf.t, typeBuffers, bf.b, bufs)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("receiving EST buffers: %w", err)
	}
	scatterBuffers(ests, bufs)
	return ests, bufs, nil
}
