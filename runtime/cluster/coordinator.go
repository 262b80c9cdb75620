package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/renameio/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// Token and job-id files a coordinator writes into its state directory;
// `easyscale worker --token-file DIR/token` reads both.
const (
	TokenFile = "token"
	JobIDFile = "job-id"
)

// Fault is a fault-injection point: the worker of rank Rank at step Step.
type Fault struct {
	Step int64
	Rank int
}

// CoordinatorOptions configure a Coordinator.
type CoordinatorOptions struct {
	Spec *jobspec.Spec
	// Data is the digest of the job's training data (the workload's
	// Data()); a joiner whose data differ is refused, naming the file.
	// It must not be empty.
	Data data.Manifest
	// StateDir holds the token and job-id files (the job's state
	// directory) unless TokenDir is set; it must exist.
	StateDir string
	// TokenDir, when set, holds the token and job-id files instead (the
	// Slurm rendezvous directory every node sees).
	TokenDir string
	// Listen is the control address workers join (default 127.0.0.1:0:
	// loopback only; give a cluster-facing address explicitly).
	Listen string
	// HeartbeatTimeout declares a silent worker lost (default 5 s);
	// IOTimeout bounds network I/O without progress (default 10 s);
	// JoinTimeout bounds waiting for launched workers (default 60 s).
	HeartbeatTimeout, IOTimeout, JoinTimeout time.Duration
	// MinWorkers, when positive, lets Resize go on with the workers that
	// joined within JoinTimeout when they are at least MinWorkers and
	// fewer than asked (an elastic job's minimum: the others are admitted
	// at step boundaries when they come). 0: Resize needs all it asks for,
	// except with a Launcher, when no launched worker is left on its way or
	// JoinTimeout passes (see Resize): it then goes on with at least one.
	MinWorkers int
	// Launcher starts local worker processes for Resize; nil means
	// workers join from outside (e.g. started by srun).
	Launcher *ProcLauncher
	// KillAt and TermAt inject faults: SIGKILL, or SIGTERM, the worker of
	// that rank when it reaches that step.
	KillAt, TermAt []Fault
	// Standby streams the committed state to a standby worker on another
	// node with every step (standby.go), which can take over when this
	// coordinator's node is lost; Node is this coordinator's Slurm node
	// (SLURMD_NODENAME), which the standby must not share.
	Standby bool
	Node    string
	Logger  hclog.Logger
}

// Coordinator is the trainer.Executor whose physical workers are processes
// joined over TCP. See the package comment for the protocol.
type Coordinator struct {
	o      CoordinatorOptions
	log    hclog.Logger
	jobID  string
	secret auth.Secret
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc

	joiners chan *member
	members []*member
	// fullLogged says the coordinator logged that joiners wait because
	// every logical worker has a worker (reset when one is admitted).
	fullLogged bool
	// events carries members' answers and deaths to collect.
	events chan memberEvent
	// ringID names the members' current all-reduce ring; ringValid is
	// false when the next step must build a new one (membership changed,
	// or the last ring failed).
	ringID    int64
	ringValid bool
	// pending is the last step's commit, which travels in the next step
	// message to every member whose stale flag is set.
	pending *commitMsg
	fired   map[Fault]bool
	// failures counts consecutive failed attempts of one step;
	// lastStepError is the last error a worker reported for one.
	failures      int
	lastStepError string
	// attempt numbers step messages (see stepMsg.Attempt).
	attempt int64
	// lostAt is when the last lost worker was detected, until the ring is
	// rebuilt on the survivors (crash_recovery_ms); redoSent is when the
	// step message asking for that rebuild went out.
	lostAt, redoSent time.Time
	// refusals counts refused connections and logs them at a bounded rate.
	refusals *refusalLog
	// abandoned is set when a Step or Resize gave up on its context
	// (SIGTERM of the coordinator): the workers may still be computing or
	// starting, so Close releases them without waiting.
	abandoned bool
	// ledger chooses the ledger rows sent with the standby messages.
	ledger LedgerFeed
}

var (
	_ trainer.Executor       = (*Coordinator)(nil)
	_ trainer.LedgerFollower = (*Coordinator)(nil)
)

// FollowLedger makes the standby messages carry the job's ledger rows
// (trainer.LedgerFollower; ledgerfeed.go). The pending row is not needed:
// a standby message holds the state of a step whose row is recorded.
func (c *Coordinator) FollowLedger(read trainer.LedgerReader, _ trainer.PendingRow) {
	c.ledger.Follow(read)
}

// LedgerRecorded does nothing: the standby message of each step carries
// the rows up to the step before, and the standby's copy is of that step
// (trainer.LedgerFollower).
func (c *Coordinator) LedgerRecorded(int64) {}

// member is one admitted worker.
type member struct {
	p        *peer
	join     joinMsg
	addr     string
	lastSeen atomic.Int64 // unix nanoseconds of the last message
	leaving  atomic.Bool
	dead     atomic.Bool
	gone     chan struct{}
	// stale is set when the coordinator committed a step this member has
	// not been told of yet (see Coordinator.pending). Only the trainer's
	// goroutine touches it.
	stale bool
}

// result is a worker's answer to a step.
type result struct {
	t    wire.Type
	done stepDoneMsg
	bufs []byte
	err  string
}

// memberEvent is an answer (or the death, when dead) of member m.
type memberEvent struct {
	m    *member
	res  result
	dead bool
}

// listenDefaults fills the options NewCoordinator and NewListener share:
// listen address 127.0.0.1:0 (any free port), I/O timeout 10 s, join
// timeout 60 s, and a logger that discards.
func listenDefaults(listen *string, io, join *time.Duration, logger *hclog.Logger) {
	if *listen == "" {
		*listen = "127.0.0.1:0"
	}
	if *io == 0 {
		*io = 10 * time.Second
	}
	if *join == 0 {
		*join = 60 * time.Second
	}
	if *logger == nil {
		*logger = hclog.NewNullLogger()
	}
}

// NewCoordinator writes the job's token and id files (0600) into
// o.StateDir, listens on o.Listen and starts accepting joiners.
func NewCoordinator(o CoordinatorOptions) (*Coordinator, error) {
	listenDefaults(&o.Listen, &o.IOTimeout, &o.JoinTimeout, &o.Logger)
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = 5 * time.Second
	}
	if len(o.Data) == 0 {
		return nil, errors.New("starting the coordinator: CoordinatorOptions.Data is empty: pass the workload's Data(), so joiners with other training data are refused")
	}
	c := &Coordinator{o: o, log: o.Logger.Named("coordinator").With("job_id", o.Spec.ShortID()), jobID: jobIDOf(o.Spec), joiners: make(chan *member, 64), events: make(chan memberEvent, 256), fired: map[Fault]bool{}}
	c.refusals = newRefusalLog(c.log)
	if o.TokenDir == "" {
		o.TokenDir = o.StateDir
		c.o.TokenDir = o.StateDir
	}
	secret, err := ensureToken(o.TokenDir, c.jobID)
	if err != nil {
		return nil, err
	}
	c.secret = secret
	if c.ln, err = net.Listen("tcp", o.Listen); err != nil {
		return nil, fmt.Errorf("listening for workers on %s (--listen): %w", o.Listen, err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.accept()
	c.log.Info("listening", "addr", c.ln.Addr().String(), "token", filepath.Join(o.TokenDir, TokenFile))
	return c, nil
}

// jobIDOf is the id workers authenticate against: the job's spec digest.
func jobIDOf(s *jobspec.Spec) string {
	return s.Name + "/" + strings.TrimPrefix(s.ID(), "sha256:")[:16]
}

// ensureToken loads the job's secret from dir, or creates it (mode 0600),
// and writes the job id next to it.
func ensureToken(dir, jobID string) (auth.Secret, error) {
	idPath := filepath.Join(dir, JobIDFile)
	if b, err := os.ReadFile(idPath); err == nil {
		if old := strings.TrimSpace(string(b)); old != jobID {
			return auth.Secret{}, fmt.Errorf("%s belongs to job %s, not %s: use another --state directory", dir, old, jobID)
		}
	}
	path := filepath.Join(dir, TokenFile)
	s, err := auth.LoadSecret(path)
	if errors.Is(err, os.ErrNotExist) {
		s, err = auth.NewSecret(path)
	}
	if err != nil {
		return auth.Secret{}, fmt.Errorf("job token %s: %w", path, err)
	}
	// through an exclusive temporary file renamed over the name: a link
	// planted at either is never followed
	if err := renameio.WriteFile(filepath.Join(dir, JobIDFile), []byte(jobID+"\n"), 0o600); err != nil {
		return auth.Secret{}, fmt.Errorf("writing the job id file: %w", err)
	}
	return s, nil
}

// Addr returns the control address workers join.
func (c *Coordinator) Addr() string { return c.ln.Addr().String() }

// TokenPath returns the path of the job's token file.
func (c *Coordinator) TokenPath() string { return filepath.Join(c.o.TokenDir, TokenFile) }

// Refused returns how many connections the coordinator has refused (failed
// authentication, another job or protocol version, other training data),
// including those its rate-limited log left out.
func (c *Coordinator) Refused() uint64 { return c.refusals.Total() }

// accept authenticates joiners and queues them for admission at the next
// step boundary. A joiner with a wrong token, job or version is refused,
// counted and logged at a bounded rate (refusalLog); the job goes on.
func (c *Coordinator) accept() {
	g := &gate{spec: c.o.Spec, data: c.o.Data, jobID: c.jobID, secret: c.secret, ioTimeout: c.o.IOTimeout, joinTimeout: c.o.JoinTimeout, log: c.log}
	for {
		nc, err := c.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			p, join, err := g.greet(c.ctx, nc)
			if err != nil {
				c.refusals.refused("refused a joiner", "peer", nc.RemoteAddr().String(), "error", err)
				return
			}
			m := &member{p: p, join: join, gone: make(chan struct{}), addr: nc.RemoteAddr().String()}
			c.log.Info("worker waiting for admission", "peer", m.addr, "node", m.join.Host, "pid", m.join.PID)
			select {
			case c.joiners <- m:
			case <-c.ctx.Done():
				nc.Close()
			}
		}()
	}
}

// admit sends the state of src to m and makes it the last rank.
func (c *Coordinator) admit(m *member, src *trainer.Replica, step int64) error {
	t0 := time.Now()
	state, names, lens := packState(src)
	msg := stateMsg{Step: step, NumParams: src.NumParams(), OptimNames: names, OptimLens: lens, StateSHA256: stateChecksum(state)}
	if err := m.p.send(typeState, msg, typeState, state); err != nil {
		m.p.c.Close()
		return fmt.Errorf("admitting worker %s: %w", m.addr, err)
	}
	m.lastSeen.Store(time.Now().UnixNano())
	go c.read(m)
	go c.beat(m)
	c.members = append(c.members, m)
	c.fullLogged = false
	if l := c.o.Launcher; l != nil {
		l.Admitted(m.join.Host, m.join.PID)
	}
	c.invalidateRing()
	c.log.Info("admitted", "rank", len(c.members)-1, "node", m.join.Host, "pid", m.join.PID, "step", step,
		"join_ms", float64(time.Since(t0).Microseconds())/1000, "state_bytes", 4*len(state))
	return nil
}

// read is a member's receive loop: it records heartbeats and leave
// requests and passes answers and its death to collect.
func (c *Coordinator) read(m *member) {
	defer close(m.gone)
	died := func() {
		m.dead.Store(true)
		select {
		case c.events <- memberEvent{m: m, dead: true}:
		default: // collect also polls m.dead
		}
	}
	for {
		t, b, err := m.p.recv()
		if err != nil {
			died()
			return
		}
		m.lastSeen.Store(time.Now().UnixNano())
		switch t {
		case typeHeartbeat:
		case typeLeave:
			m.leaving.Store(true)
			c.log.Info("worker asks to leave", "pid", m.join.PID, "node", m.join.Host)
		case typeStepDone:
			r := result{t: t}
			if err := json.Unmarshal(b, &r.done); err != nil {
				died()
				return
			}
			bt, bb, err := m.p.recv()
			if err != nil || bt != typeBuffers {
				died()
				return
			}
			r.bufs = bb
			c.events <- memberEvent{m: m, res: r}
		case typeStepError:
			var e stepErrorMsg
			_ = json.Unmarshal(b, &e)
			c.events <- memberEvent{m: m, res: result{t: t, err: e.Error, done: stepDoneMsg{Step: e.Step, Attempt: e.Attempt}}}
		default:
			c.log.Warn("unexpected message from a worker", "type", t.String(), "pid", m.join.PID)
			m.p.c.Close()
			died()
			return
		}
	}
}

// beat sends m a heartbeat every second until it is gone, so a worker
// notices a lost coordinator (or a cut link) even between steps.
func (c *Coordinator) beat(m *member) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.gone:
			return
		case <-t.C:
			if err := m.p.send(typeHeartbeat, struct{}{}, 0, nil); err != nil {
				return
			}
		}
	}
}

// invalidateRing makes the next step build a new all-reduce ring on the
// members (membership changed, or the ring failed). The members close the
// old one themselves: on the new ring id, on an Abort, or on a link error.
func (c *Coordinator) invalidateRing() { c.ringValid = false }

func (c *Coordinator) Workers() int { return len(c.members) }

// Boundary releases members that asked to leave or died and admits
// waiting joiners (copies of src), at the boundary before step, while
// fewer workers than the job's logical workers are members: a joiner
// beyond them (a replacement extra job Slurm started before the one it
// replaces left) waits, unadmitted, for the boundary that releases a
// member, since a worker with no logical worker would fail the placement.
// It reports whether membership changed.
func (c *Coordinator) Boundary(src *trainer.Replica, step int64) (bool, error) {
	changed := c.removeGone(step)
	for {
		if c.full(step) {
			if changed {
				c.invalidateRing()
			}
			return changed, nil
		}
		select {
		case m := <-c.joiners:
			if err := c.admit(m, src, step); err != nil {
				c.log.Warn("admission failed", "error", err)
				continue
			}
			changed = true
		default:
			if changed {
				c.invalidateRing()
			}
			return changed, nil
		}
	}
}

// full reports whether every logical worker has a member, with joiners
// waiting; it logs the first such boundary after an admission.
func (c *Coordinator) full(step int64) bool {
	if len(c.members) < c.o.Spec.LogicalWorkers || len(c.joiners) == 0 {
		return false
	}
	if !c.fullLogged {
		c.fullLogged = true
		c.log.Info("workers wait for admission: each of the job's logical workers has a worker; they are admitted when one leaves",
			"step", step, "waiting", len(c.joiners), "world_size", len(c.members), "logical_workers", c.o.Spec.LogicalWorkers)
	}
	return true
}

// removeGone drops dead members and releases those that asked to leave.
func (c *Coordinator) removeGone(step int64) bool {
	changed := false
	kept := c.members[:0]
	for rank, m := range c.members {
		switch {
		case m.dead.Load() && m.leaving.Load():
			c.log.Info("released a worker that left before the step boundary (its leave grace passed)", "rank", rank, "pid", m.join.PID, "node", m.join.Host, "step", step)
			m.p.c.Close()
			c.released(m)
			changed = true
		case m.dead.Load():
			c.log.Warn("removing a lost worker", "rank", rank, "pid", m.join.PID, "node", m.join.Host)
			m.p.c.Close()
			changed = true
		case m.leaving.Load():
			if err := m.p.send(typeBye, byeMsg{Reason: "left on request"}, 0, nil); err != nil {
				c.log.Warn("saying goodbye", "pid", m.join.PID, "error", err)
			}
			c.released(m)
			c.log.Info("released a worker", "rank", rank, "pid", m.join.PID, "step", step)
			changed = true
		default:
			kept = append(kept, m)
		}
	}
	c.members = kept
	if changed {
		c.invalidateRing()
	}
	return changed
}

// Resize implements trainer.Executor: it launches or releases local
// worker processes until n are admitted, or until ctx ends. Joiners are
// admitted as they come, for at most JoinTimeout. With a local launcher it
// stops waiting as soon as no worker is left on its way (a launched
// process that exited before admission is started again, a bounded number
// of times, so this is when those tries are spent too) and goes on with
// the members it has when they are at least max(1, MinWorkers). When
// JoinTimeout passes first (a stopped or hung worker) it goes on the same
// way with a local launcher or a MinWorkers, and fails with fewer members
// (or, without either, with fewer than n). Members that ask to leave
// meanwhile count until the step boundary that releases them.
func (c *Coordinator) Resize(ctx context.Context, n int, src *trainer.Replica) error {
	if _, err := c.Boundary(src, -1); err != nil {
		return err
	}
	for len(c.members) > n {
		last := c.members[len(c.members)-1]
		if err := last.p.send(typeBye, byeMsg{Reason: "allocation shrank"}, 0, nil); err != nil {
			c.log.Warn("releasing a worker", "pid", last.join.PID, "error", err)
		}
		c.released(last)
		c.members = c.members[:len(c.members)-1]
		c.invalidateRing()
	}
	if len(c.members) < n && c.o.Launcher != nil {
		coming, _ := c.onTheWay()
		if err := c.o.Launcher.Start(n-len(c.members)-coming, c.Addr(), c.TokenPath(), n); err != nil {
			return err
		}
	}
	outcome, err := c.waitForJoiners(ctx, n, src, -1)
	if err != nil {
		return fmt.Errorf("waiting for %d of %d workers to join: %w", n-len(c.members), n, err)
	}
	least := max(1, c.o.MinWorkers)
	switch {
	case outcome == joinedAll:
		return nil
	case outcome == noneComing && len(c.members) >= least:
		c.log.Warn("starting on the workers that joined: no other worker is on its way (the launched ones that exited before admission left on request or were started again as often as allowed)",
			"world_size", len(c.members), "asked", n, "min_workers", c.o.MinWorkers)
		return nil
	case outcome == noneComing:
		return fmt.Errorf("only %d of %d workers joined, fewer than the job's minimum of %d, and none is on its way (the launched ones exited before admission; worker logs in %s)", len(c.members), n, least, c.o.Launcher.LogDir)
	case len(c.members) >= least && (c.o.Launcher != nil || c.o.MinWorkers > 0):
		// Like a launched worker that exited (noneComing): a stopped or
		// hung one must not fail a job that can run; it is admitted at a
		// step boundary if it comes (a local one that never does is
		// stopped at Close). Workers started by hand, with no minimum,
		// must all come (MinWorkers).
		c.log.Warn("starting on the workers that joined; the others are admitted at a step boundary when they come",
			"world_size", len(c.members), "asked", n, "min_workers", c.o.MinWorkers, "join_timeout", c.o.JoinTimeout.String())
		return nil
	case c.o.MinWorkers > 0:
		return fmt.Errorf("only %d of %d workers joined within %v, fewer than the job's minimum of %d", len(c.members), n, c.o.JoinTimeout, c.o.MinWorkers)
	}
	return fmt.Errorf("only %d of %d workers joined within %v", len(c.members), n, c.o.JoinTimeout)
}

// Step implements trainer.Executor. It sends each member its share of the
// step (sendStep), all-reduces grad over the ring, a new one when members
// changed (reduce), waits for every answer (collect), then either fails
// the step (failStep) or takes the members' cursors, buffers and losses
// into ests and out (gather). When ctx ends before every answer is in, the
// workers are told to abort, the ring is closed, and Step returns at once
// an error wrapping ctx.Err(); ests are left as they were.
func (c *Coordinator) Step(ctx context.Context, step int64, plan placement.Plan, ests []*trainer.ESTContext, grad []float32, out *trainer.StepOutput) error {
	if c.abandoned {
		return fmt.Errorf("step %d: the coordinator abandoned a step; only Close is allowed", step)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("step %d not started: %w", step, err)
	}
	if len(plan) != len(c.members) {
		return fmt.Errorf("placement for %d workers, %d members", len(plan), len(c.members))
	}
	c.attempt++
	var ringMembers []ringMember // the ring to build; nil: keep the members' current one
	if !c.ringValid {
		ringMembers = c.nextRing()
		c.ringValid = true
		if !c.lostAt.IsZero() {
			c.redoSent = time.Now()
		}
	}
	c.sendStep(step, plan, ests, ringMembers)
	results, lost, detected := c.collect(ctx, step)
	if results == nil { // ctx ended
		c.abandonStep(step)
		return fmt.Errorf("step %d abandoned: %w", step, ctx.Err())
	}
	if len(lost) > 0 || len(results) < len(c.members) {
		return c.failStep(step, lost, detected)
	}
	c.failures = 0
	if err := gather(step, plan, ests, results, grad, out); err != nil {
		return err
	}
	c.logRecovery(step, results)
	return nil
}

// logRecovery logs crash_recovery_ms once the first step after a lost
// worker has succeeded: from the loss's detection to the survivors' new
// ring, that is until the redo's step message was sent plus the longest
// time a survivor then took to connect the ring.
func (c *Coordinator) logRecovery(step int64, results map[int]result) {
	if c.lostAt.IsZero() || c.redoSent.IsZero() {
		return
	}
	var connect float64
	for _, r := range results {
		connect = max(connect, r.done.RingConnectMs)
	}
	ms := float64(c.redoSent.Sub(c.lostAt).Microseconds())/1000 + connect
	c.log.Info("training again after lost workers", "step", step, "crash_recovery_ms", fmt.Sprintf("%.3f", ms))
	c.lostAt, c.redoSent = time.Time{}, time.Time{}
}

// nextRing starts a new ring generation over the members, in rank order.
func (c *Coordinator) nextRing() []ringMember {
	c.ringID++
	ms := make([]ringMember, len(c.members))
	for r, m := range c.members {
		ms[r] = ringMember{Rank: r, Addr: m.join.RingAddr}
	}
	return ms
}

// sendStep sends each member its step message (the last step's commit
// when the member has not had it, its ESTs' cursors, the ring to build
// from members when not nil, the faults due) and its ESTs' buffers. The
// messages go out concurrently: on loopback a TCP write runs the
// receiver's side of the stack too, so one after the other would start
// the last rank later than the first by P-1 writes, and the ring waits for
// the last. A member it cannot reach is marked dead (collect reports it).
func (c *Coordinator) sendStep(step int64, plan placement.Plan, ests []*trainer.ESTContext, members []ringMember) {
	var wg sync.WaitGroup
	standby, lost := c.standbyRank()
	var sbMsg standbyMsg
	var sbBufs []float32
	if standby >= 0 {
		sbMsg, sbBufs = standbyState(step, ests, len(c.members), lost)
		rows, err := c.ledger.Rows(c.members[standby], step)
		if err != nil {
			c.log.Warn("the standby's copy of the ledger", "step", step, "error", err)
		}
		sbMsg.Ledger = rows
	}
	for r, m := range c.members {
		rg := plan[r]
		msg := stepMsg{Step: step, Attempt: c.attempt, Rank: r, RingID: c.ringID, Ring: members, FirstEST: rg.First}
		if m.stale {
			msg.Commit = c.pending
		}
		for e := rg.First; e < rg.First+rg.Count; e++ {
			msg.ESTs = append(msg.ESTs, estState{ID: e, Epoch: ests[e].Cursor.Epoch, Pos: ests[e].Cursor.Pos})
		}
		msg.KillSelf = c.fire(c.o.KillAt, step, r)
		msg.TermSelf = c.fire(c.o.TermAt, step, r)
		bufs := make([]float32, 0)
		for e := rg.First; e < rg.First+rg.Count; e++ {
			for _, b := range ests[e].Buffers {
				bufs = append(bufs, b.T.Data...)
			}
		}
		m.stale = false
		wg.Go(func() {
			if r == standby {
				if err := m.p.send(typeStandby, sbMsg, typeBuffers, sbBufs); err != nil {
					m.dead.Store(true)
					return
				}
			}
			if err := m.p.send(typeStep, msg, typeBuffers, bufs); err != nil {
				m.dead.Store(true)
			}
		})
	}
	wg.Wait()
}

// failStep ends a step that lost workers or that a worker reported
// failed (its ring broke): the survivors are told to abort, the ring is
// rebuilt for the redo, the lost removed. It returns a trainer.LostError
// (the trainer redoes the step on the survivors), or a plain error after
// more than 3 failures in a row that lost no worker.
func (c *Coordinator) failStep(step int64, lost []int, detected time.Time) error {
	c.invalidateRing()
	for r, m := range c.members {
		if !m.dead.Load() {
			if err := m.p.send(typeAbort, abortMsg{Step: step}, 0, nil); err != nil {
				m.dead.Store(true)
				lost = append(lost, r)
			}
		}
	}
	c.failures++
	if len(lost) == 0 && c.failures > 3 {
		return fmt.Errorf("step %d failed %d times without a lost worker: %s", step, c.failures, c.lastStepError)
	}
	c.removeGone(step)
	if !detected.IsZero() {
		c.lostAt = detected
	}
	return &trainer.LostError{Step: step, Ranks: lost, Err: orErr(c.lastStepError, "a worker failed"), DetectedAt: detected}
}

// gather takes each rank's answer into its ESTs (plan): their buffers and
// cursors into ests, their losses and sample hashes into out, and the
// reduced gradient the last rank returns into grad. An answer for other
// ESTs, buffers of the wrong size, or a last rank without the gradient is
// an error.
func gather(step int64, plan placement.Plan, ests []*trainer.ESTContext, results map[int]result, grad []float32, out *trainer.StepOutput) error {
	last := len(plan) - 1
	for r, res := range results {
		rg := plan[r]
		if len(res.done.ESTs) != rg.Count {
			return fmt.Errorf("step %d: rank %d returned %d ESTs, holds %d", step, r, len(res.done.ESTs), rg.Count)
		}
		if res.done.Grad != (r == last) {
			return fmt.Errorf("step %d: rank %d of %d returned the gradient: %v (only the last rank does)", step, r, len(plan), res.done.Grad)
		}
		sub := ests[rg.First : rg.First+rg.Count]
		nb := 0
		for _, e := range sub {
			nb += bufferLen(e)
		}
		if res.done.Grad {
			nb += len(grad)
		}
		bufs := make([]float32, nb)
		if err := decodeFloats(typeBuffers, typeBuffers, res.bufs, bufs); err != nil {
			return fmt.Errorf("step %d: buffers from rank %d: %w", step, r, err)
		}
		if res.done.Grad {
			copy(grad, bufs[nb-len(grad):])
			bufs = bufs[:nb-len(grad)]
		}
		scatterBuffers(sub, bufs)
		for i, e := range res.done.ESTs {
			if e.ID != rg.First+i {
				return fmt.Errorf("step %d: rank %d returned EST %d in place of %d", step, r, e.ID, rg.First+i)
			}
			sub[i].Cursor.Epoch, sub[i].Cursor.Pos = e.Epoch, e.Pos
			out.Losses[e.ID], out.Samples[e.ID] = e.Loss, e.Hash
		}
	}
	return nil
}

// abandonStep closes the ring and tells every member to abort step, as
// when a worker is lost, and marks the coordinator abandoned.
func (c *Coordinator) abandonStep(step int64) {
	c.abandoned = true
	c.invalidateRing()
	for _, m := range c.members {
		if !m.dead.Load() {
			if err := m.p.send(typeAbort, abortMsg{Step: step}, 0, nil); err != nil {
				m.dead.Store(true)
			}
		}
	}
	c.log.Warn("abandoned the step in progress", "step", step, "world_size", len(c.members))
}

func orErr(msg, fallback string) error {
	if msg != "" {
		return errors.New(msg)
	}
	return errors.New(fallback)
}

// fire reports whether a fault is due for (step, rank), once.
func (c *Coordinator) fire(faults []Fault, step int64, rank int) bool {
	for _, f := range faults {
		if f.Step == step && f.Rank == rank && !c.fired[f] {
			c.fired[f] = true
			return true
		}
	}
	return false
}

// collect waits for every member's answer to step, or until ctx ends. A
// member that dies or stays silent past the heartbeat timeout is lost; once
// one is lost the survivors are told to abort, which closes their ring so
// no all-reduce waits on the lost member. A member's step error is kept in
// c.lastStepError. It returns the answers by rank, the lost ranks and when
// the first loss was detected; results is nil when ctx ended first.
func (c *Coordinator) collect(ctx context.Context, step int64) (results map[int]result, lost []int, detected time.Time) {
	results = map[int]result{}
	rankOf := make(map[*member]int, len(c.members))
	for r, m := range c.members {
		rankOf[m] = r
	}
	answered := map[int]bool{}
	c.lastStepError = ""
	markLost := func(r int) {
		answered[r] = true
		lost = append(lost, r)
		if detected.IsZero() {
			detected = time.Now()
		}
		c.invalidateRing()
		// Survivors may be blocked on the lost member's ring link: abort
		// them now rather than after their ring I/O timeout.
		for o, m := range c.members {
			if !answered[o] && !m.dead.Load() {
				if err := m.p.send(typeAbort, abortMsg{Step: step}, 0, nil); err != nil {
					m.dead.Store(true)
				}
			}
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(answered) < len(c.members) {
		select {
		case <-ctx.Done():
			return nil, lost, detected
		case ev := <-c.events:
			r, ok := rankOf[ev.m]
			if !ok || answered[r] {
				continue // a member no longer in the job, or a late duplicate
			}
			switch {
			case ev.dead:
				markLost(r)
			case ev.res.done.Step != step || ev.res.done.Attempt != c.attempt:
				continue // an answer to an aborted earlier attempt
			case ev.res.t == typeStepDone:
				answered[r] = true
				results[r] = ev.res
			default:
				answered[r] = true
				c.lastStepError = fmt.Sprintf("rank %d: %s", r, ev.res.err)
				c.log.Warn("worker reports a failed step", "rank", r, "step", step, "error", ev.res.err)
			}
		case <-tick.C:
			now := time.Now().UnixNano()
			for r, m := range c.members {
				if answered[r] {
					continue
				}
				if silent := time.Duration(now - m.lastSeen.Load()); m.dead.Load() || silent > c.o.HeartbeatTimeout {
					if !m.dead.Load() {
						c.log.Warn("worker silent past the heartbeat timeout", "rank", r, "silent", silent.String())
						m.dead.Store(true)
						m.p.c.Close()
					}
					markLost(r)
				}
			}
		}
	}
	return results, lost, detected
}

// Commit implements trainer.Executor. The workers apply the update when
// the next step's message, which carries it, reaches them: a separate
// message would cost a round of wake-ups per step for nothing, since a
// worker's replica is read only by its next step. Members admitted before
// then receive the coordinator's replica, which already holds the update.
func (c *Coordinator) Commit(step int64, _ []float32, lr float32) error {
	c.pending = &commitMsg{Step: step, LR: lr}
	for _, m := range c.members {
		m.stale = true
	}
	return nil
}

// Close implements trainer.Executor: it releases every worker and stops
// listening. The launched processes it released get up to 5 s to exit;
// those that were not members (a joiner never admitted, a worker still
// rejoining) hold nothing and are killed at once (ProcLauncher.Wait).
// After an abandoned step it waits for nothing: the workers are told
// goodbye (they leave as soon as they read it) and the processes it
// launched are killed, since they hold no state the checkpoint lacks.
func (c *Coordinator) Close() error {
	reason := "job finished"
	if c.abandoned {
		reason = "job stopped mid-step (signal); the last completed step is checkpointed"
	}
	for _, m := range c.members {
		m.p.send(typeBye, byeMsg{Reason: reason}, 0, nil)
		c.released(m)
	}
	for _, m := range c.members {
		if !c.abandoned {
			select {
			case <-m.gone:
			case <-time.After(2 * time.Second):
			}
		}
		m.p.c.Close()
	}
	c.members = nil
	c.invalidateRing()
	c.cancel()
	c.ln.Close()
	c.refusals.close()
	c.dropJoiners()
	if c.o.Launcher != nil {
		wait := 5 * time.Second
		if c.abandoned {
			wait = 0
		}
		c.o.Launcher.Wait(wait)
	}
	return nil
}

// dropJoiners closes the connections of the workers still waiting for
// admission, so they learn at once that this coordinator has ended (and
// ask WorkerOptions.Ended whether the job has) instead of waiting for a
// step boundary that never comes.
func (c *Coordinator) dropJoiners() {
	for {
		select {
		case m := <-c.joiners:
			m.p.c.Close()
		default:
			return
		}
	}
}

// JobID returns the id workers authenticate as.
func (c *Coordinator) JobID() string { return c.jobID }
