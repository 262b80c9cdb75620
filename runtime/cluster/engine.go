package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// Engine sessions: the workers of a job whose engine computes outside this
// package (engine = "torch": Python processes, runtime/torchengine) join the
// way native workers do — the same listener, token, HMAC handshake,
// welcome, join message and data comparison — and then hand the
// connection to the engine, which speaks its own frames on it.
//
//	worker                               coordinator (Listener)
//	  auth.Client ───────────────────────► auth.Server
//	              ◄─────────────────────── welcome{spec}
//	  join{data, engine} ─────────────────► data.Compare, Check(engine)
//	              ◄─────────────────────── queued  (or refused{reason, file})
//	  engine frames ◄─────────────────────► engine frames (Joiner.Conn)

// EngineSession is an authenticated, welcomed connection to the coordinator
// of a job of another engine, handed to WorkerOptions.Torch.
type EngineSession struct {
	// Conn is the control connection; after Join the engine owns it.
	Conn *wire.Conn
	// Spec is the job, its data.dir this machine's (--data-dir wins).
	Spec *jobspec.Spec
	// LocalAddr is the host of this end of the connection: the address
	// the coordinator and the other workers reach this machine on.
	LocalAddr string
	// Threads is --threads (0: the job's own setting).
	Threads int
	// LeaveReq is closed by SIGTERM (leave at the next step boundary);
	// LeaveNow LeaveGrace later (leave at once).
	LeaveReq, LeaveNow <-chan struct{}
	// Heartbeat is how often to send heartbeats; CoordinatorTimeout
	// declares the coordinator lost when nothing arrives for that long.
	Heartbeat, CoordinatorTimeout time.Duration
	Logger                        hclog.Logger

	join func(files data.Manifest, engine any) error
}

// Join asks to be admitted, reporting the files the worker loaded and
// engine (JSON, checked by the coordinator's ListenerOptions.Check). It
// returns a *RefusedError when the coordinator refuses this worker
// (other data or numerics: do not retry), nil when the worker is queued
// for admission at the next step boundary.
func (s *EngineSession) Join(files data.Manifest, engine any) error { return s.join(files, engine) }

// engineSession hands a welcomed torch connection to o.Torch.
func (s *session) engineSession(ctx context.Context, spec *jobspec.Spec, nc net.Conn, leaveReq, leaveNow <-chan struct{}, admitted func()) error {
	if s.o.Torch == nil {
		return &RefusedError{Coordinator: s.o.Join, Reason: fmt.Sprintf("job %q has engine %q, which this worker cannot run", spec.Name, spec.Engine)}
	}
	// The engine session watches leaveReq and ctx itself.
	admitted()
	host, _, _ := net.SplitHostPort(nc.LocalAddr().String())
	es := &EngineSession{Conn: s.p.c, Spec: spec, LocalAddr: host, Threads: s.o.Threads, LeaveReq: leaveReq, LeaveNow: leaveNow,
		Heartbeat: s.o.Heartbeat, CoordinatorTimeout: s.o.CoordinatorTimeout, Logger: s.o.Logger}
	es.join = func(files data.Manifest, engine any) error {
		raw, err := json.Marshal(engine)
		if err != nil {
			return fmt.Errorf("encoding the join: %w", err)
		}
		hn, _ := os.Hostname()
		if err := s.p.send(typeJoin, joinMsg{Version: ProtocolVersion, JobID: s.o.JobID, Host: hn, PID: os.Getpid(), RingAddr: host,
			Node: s.o.Node, Data: files, Engine: raw}, 0, nil); err != nil {
			return fmt.Errorf("%w: sending join: %w", errNeverJoined, err)
		}
		t, b, err := s.p.recv()
		if err != nil {
			return fmt.Errorf("%w: waiting for the coordinator's checks: %w", errNeverJoined, err)
		}
		switch t {
		case typeQueued:
			s.joined = true
			return nil
		case typeRefused:
			var r refusedMsg
			_ = json.Unmarshal(b, &r)
			return &RefusedError{Coordinator: s.o.Join, Reason: r.Reason, File: r.File}
		}
		return fmt.Errorf("%w: expected a %v message, got %v", errNeverJoined, typeQueued, t)
	}
	return s.o.Torch(ctx, es)
}

// gate is the admission check every joiner passes: handshake, welcome,
// join message, training data, and the engine's own check.
type gate struct {
	spec                   *jobspec.Spec
	data                   data.Manifest
	jobID                  string
	secret                 auth.Secret
	ioTimeout, joinTimeout time.Duration
	log                    hclog.Logger
	// check, when set, vets the join's engine report; an error refuses
	// the joiner with its message.
	check func(engine json.RawMessage) error
}

// greet runs the admission checks on a new connection. It returns the
// connection and the join message of a joiner that passed them; a
// refused joiner is told why (typeRefused) and its connection closed.
func (g *gate) greet(ctx context.Context, nc net.Conn) (*peer, joinMsg, error) {
	var join joinMsg
	if _, err := auth.Server(ctx, nc, auth.Config{JobID: g.jobID, Secret: g.secret}); err != nil {
		nc.Close()
		return nil, join, err
	}
	p := &peer{c: wire.NewConn(nc, g.ioTimeout, wire.MaxTensor)}
	remote := nc.RemoteAddr().String()
	if err := p.send(typeWelcome, welcomeMsg{Spec: g.spec.Canonical(), DataDir: g.spec.Data.Dir, Module: modulePath(g.spec)}, 0, nil); err != nil {
		nc.Close()
		return nil, join, fmt.Errorf("welcoming %s: %w", remote, err)
	}
	p.c.Timeout = g.joinTimeout // the joiner loads its data now
	err := p.recvJSON(typeJoin, &join)
	p.c.Timeout = g.ioTimeout
	if err != nil {
		nc.Close()
		return nil, join, fmt.Errorf("reading the join of %s: %w", remote, err)
	}
	if join.Version != ProtocolVersion || join.JobID != g.jobID {
		nc.Close()
		return nil, join, fmt.Errorf("joiner %s speaks protocol %d for job %q, this coordinator %d for %q", remote, join.Version, join.JobID, ProtocolVersion, g.jobID)
	}
	if err := g.data.Compare(join.Data); err != nil {
		var file string
		if dm := (*data.DataMismatchError)(nil); errors.As(err, &dm) {
			file = dm.File
		}
		g.log.Warn("refused a joiner: its training data differ", "peer", remote, "node", join.Host, "pid", join.PID, "file", file, "error", err)
		_ = p.send(typeRefused, refusedMsg{Reason: err.Error(), File: file}, 0, nil)
		nc.Close()
		return nil, join, err
	}
	if g.check != nil {
		if err := g.check(join.Engine); err != nil {
			g.log.Warn("refused a joiner", "peer", remote, "node", join.Host, "pid", join.PID, "error", err)
			_ = p.send(typeRefused, refusedMsg{Reason: err.Error()}, 0, nil)
			nc.Close()
			return nil, join, err
		}
	}
	return p, join, nil
}

// Joiner is a worker of an engine session that passed the admission
// checks, queued for admission at a step boundary.
type Joiner struct {
	// Conn is the control connection (read and write timeouts: the
	// listener's IOTimeout; the engine may change them).
	Conn *wire.Conn
	// Node is the worker's hostname and PID its process id (logs).
	Node string
	PID  int
	// SlurmNode is the worker's Slurm node (WorkerOptions.Node; "" off
	// Slurm): the engine picks its standby on another node than its own.
	SlurmNode string
	// Addr is the worker's address as this machine sees it (HOST:PORT).
	Addr string
	// LocalAddr is the host the worker reaches the coordinator from: the
	// address its collectives listen on.
	LocalAddr string
	// Engine is the join's engine report (already passed Check).
	Engine json.RawMessage
}

// ListenerOptions configure a Listener.
type ListenerOptions struct {
	Spec *jobspec.Spec
	// Data is the digest of the job's training data (the engine's
	// Data(); empty for a job that reads no files); joiners whose data
	// differ are refused naming the file.
	Data data.Manifest
	// StateDir holds the token and job-id files unless TokenDir is set.
	StateDir, TokenDir string
	// Listen is the control address (default 127.0.0.1:0).
	Listen string
	// IOTimeout bounds network I/O without progress (default 10 s);
	// JoinTimeout bounds a joiner's preparation (default 60 s).
	IOTimeout, JoinTimeout time.Duration
	// Check vets a join's engine report (e.g. torchengine.Admit on the
	// Python process's numerics); an error refuses the joiner with it.
	Check  func(engine json.RawMessage) error
	Logger hclog.Logger
}

// Listener accepts the workers of an engine session (a torch job's
// `easyscale worker --join`): it writes the token, authenticates joiners,
// welcomes them, checks their data and engine report, and queues those
// that pass on Joiners.
type Listener struct {
	g        gate
	refusals *refusalLog
	dir      string
	ln       net.Listener
	ctx      context.Context
	cancel   context.CancelFunc
	joiners  chan *Joiner
}

// NewListener writes the job's token and id files into the token
// directory, listens on o.Listen and starts accepting joiners. Errors name
// the address or the file.
func NewListener(o ListenerOptions) (*Listener, error) {
	listenDefaults(&o.Listen, &o.IOTimeout, &o.JoinTimeout, &o.Logger)
	if o.TokenDir == "" {
		o.TokenDir = o.StateDir
	}
	l := &Listener{dir: o.TokenDir, joiners: make(chan *Joiner, 64)}
	l.g = gate{spec: o.Spec, data: o.Data, jobID: jobIDOf(o.Spec), ioTimeout: o.IOTimeout, joinTimeout: o.JoinTimeout,
		log: o.Logger.Named("coordinator").With("job_id", o.Spec.ShortID()), check: o.Check}
	l.refusals = newRefusalLog(l.g.log)
	secret, err := ensureToken(o.TokenDir, l.g.jobID)
	if err != nil {
		return nil, err
	}
	l.g.secret = secret
	if l.ln, err = net.Listen("tcp", o.Listen); err != nil {
		return nil, fmt.Errorf("listening for workers on %s (--listen): %w", o.Listen, err)
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.accept()
	l.g.log.Info("listening", "addr", l.Addr(), "token", l.TokenPath())
	return l, nil
}

func (l *Listener) accept() {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			p, join, err := l.g.greet(l.ctx, nc)
			if err != nil {
				l.refusals.refused("refused a joiner", "peer", nc.RemoteAddr().String(), "error", err)
				return
			}
			if err := p.send(typeQueued, struct{}{}, 0, nil); err != nil {
				l.g.log.Warn("queueing a joiner", "peer", nc.RemoteAddr().String(), "error", err)
				nc.Close()
				return
			}
			j := &Joiner{Conn: p.c, Node: join.Host, PID: join.PID, SlurmNode: join.Node, Addr: nc.RemoteAddr().String(), LocalAddr: join.RingAddr, Engine: join.Engine}
			l.g.log.Info("worker waiting for admission", "peer", j.Addr, "node", j.Node, "pid", j.PID)
			select {
			case l.joiners <- j:
			case <-l.ctx.Done():
				nc.Close()
			}
		}()
	}
}

// Joiners delivers the workers that passed the checks, in the order they did.
func (l *Listener) Joiners() <-chan *Joiner { return l.joiners }

// Addr returns the control address workers join.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// TokenPath returns the path of the job's token file.
func (l *Listener) TokenPath() string { return filepath.Join(l.dir, TokenFile) }

// JobID returns the id workers authenticate as.
func (l *Listener) JobID() string { return l.g.jobID }

// Refused returns how many connections the listener has refused (failed
// authentication, another job or protocol version, other data or
// numerics), including those its rate-limited log left out.
func (l *Listener) Refused() uint64 { return l.refusals.Total() }

// Close stops accepting; joiners not yet taken from Joiners are closed.
func (l *Listener) Close() error {
	l.cancel()
	err := l.ln.Close()
	l.refusals.close()
	for {
		select {
		case j := <-l.joiners:
			j.Conn.Close()
		default:
			return err
		}
	}
}

func modulePath(s *jobspec.Spec) string {
	if s.Torch == nil {
		return ""
	}
	return s.Torch.ModulePath
}
