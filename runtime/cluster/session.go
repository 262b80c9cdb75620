package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

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
	// standbyLedger is the ledger rows the coordinator sent this worker
	// as its standby (ledgerfeed.go).
	standbyLedger StandbyLedger
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
			switch kind, err := classify(f, ok); kind {
			case frameLost:
				return f, err
			case frameHeartbeat:
			default:
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
