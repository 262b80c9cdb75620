package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
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
// leaves. The one exception is a goodbye after the step was committed:
// the result this worker still forwards to the next rank is passed on
// first, for at most IOTimeout (session.allReduce).
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

// errReporting marks a failure to send a step's answer to the
// coordinator: the connection is gone and the session ends.
var errReporting = errors.New("reporting to the coordinator")
