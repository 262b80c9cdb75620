package torchengine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// Member is one physical worker of a Group: a Python process behind the
// control protocol (a child of this process, or, later, one behind a Go
// worker on another node).
type Member interface {
	Call(ctx context.Context, typ string, fields map[string]any, payload []byte, out any) ([]byte, error)
	// Kill ends the member at once, so that peers blocked in a collective
	// with it fail instead of waiting for the collective timeout.
	Kill()
}

var _ Member = (*Process)(nil)

// Group drives the physical workers of one torch job through steps and
// reallocations. It keeps the authoritative context of every logical worker
// (the bytes of its buffers and cursor after the last committed step, as the
// processes report them), so a logical worker whose process is lost resumes
// from its last committed context on another process. Gradients never pass
// through Go: the processes reduce them among themselves (easyscale.reduce).
//
// Group is not safe for concurrent use.
type Group struct {
	// Host is the address the processes reach this generation's store on
	// (127.0.0.1 for processes on one node).
	Host string
	// TimeoutSeconds bounds every collective of the processes and the
	// connection setup of each generation's group (default 600; the
	// engine sets the heartbeat timeout). No collective waits for a peer's
	// computation: a step is computed by every member first, then reduced
	// (see Step), and a group forms only once every member has arrived
	// (python/easyscale/rendezvous.py), so the bound covers transfers only.
	// A slow peer is waited for as long as it heartbeats; a hung one is
	// found by its missing heartbeats (see Process) and killed, a lost one
	// cancels the rendezvous of the others at once.
	TimeoutSeconds float64
	// SkipDigest makes Step leave the digest uncomputed (StepResult.Digest
	// ""): the ledger hashes every K steps when hashing costs more than 1 %
	// of a step (trainer.SparseDigester). Only member 0, which holds
	// logical worker 0's buffers, ever computes it.
	SkipDigest bool
	// Standby, when set, receives every logical worker's context as of
	// the start of a step (the state a checkpoint of that step holds),
	// at most once per step: the committed contexts before a step when
	// it has not had them, and each step's new contexts before its commit
	// is asked (so a standby whose process applied the commit has them:
	// standby.go), then with the reduced step's result (its losses and
	// samples; nil with the committed contexts).
	Standby func(step int64, contexts map[int][]byte, reduced *StepResult)
	// standbyAt is the step whose contexts Standby last received.
	standbyAt int64

	world int
	// next is the step the next Step runs (the start of an assignment: a
	// process new to the job starts its training loop there).
	next       int64
	members    []Member
	ranges     [][2]int // [first, end) logical workers per member
	generation int
	// trained is set by the first committed step (or a checkpoint loaded):
	// from then on a member new to the job needs a trained member's
	// replica; before, every member holds the initial one.
	trained  bool
	contexts map[int][]byte // logical worker -> context after the last committed step
	pending  map[int][]byte // contexts reported by the step in progress
}

// NewGroup returns a Group for a job of world logical workers.
func NewGroup(world int) *Group {
	return &Group{Host: "127.0.0.1", TimeoutSeconds: 600, world: world, contexts: map[int][]byte{}}
}

// Assign makes members the job's physical workers, member r holding
// logical workers [sizes[0]+…+sizes[r-1], +sizes[r]): contiguous ranges in
// rank order, as the chain reduction needs. Members new to the job must have
// loaded it; they receive the replica of src (the parameters, optimizer and
// scheduler state of an existing member) unless no member has trained yet.
// Errors name the member and request that failed.
func (g *Group) Assign(ctx context.Context, members []Member, sizes []int, src Member, joining []bool) error {
	if len(members) != len(sizes) || len(members) != len(joining) || len(members) == 0 {
		return fmt.Errorf("assigning %d members with %d sizes and %d joining flags", len(members), len(sizes), len(joining))
	}
	total := 0
	for r, s := range sizes {
		if s < 1 {
			return fmt.Errorf("member %d would hold %d logical workers; every member holds at least one", r, s)
		}
		total += s
	}
	if total != g.world {
		return fmt.Errorf("sizes %v hold %d logical workers, the job has %d", sizes, total, g.world)
	}
	if src != nil {
		replica, err := src.Call(ctx, "replica_get", nil, nil, nil)
		if err != nil {
			return fmt.Errorf("copying the replica for joining members: %w", err)
		}
		for r, m := range members {
			if joining[r] {
				if _, err := m.Call(ctx, "replica_set", nil, replica, nil); err != nil {
					return fmt.Errorf("member %d: loading the replica: %w", r, err)
				}
			}
		}
	}
	g.generation++
	var listen struct {
		Port int `json:"port"`
	}
	if len(members) > 1 {
		if _, err := members[0].Call(ctx, "listen", map[string]any{"host": g.Host, "timeout_s": g.TimeoutSeconds}, nil, &listen); err != nil {
			return fmt.Errorf("member 0: hosting the store of generation %d: %w", g.generation, err)
		}
	}
	ranges := make([][2]int, len(members))
	first := 0
	for r, s := range sizes {
		ranges[r] = [2]int{first, first + s}
		first += s
	}
	// Every member joins the process group at once: the group forms when all
	// have arrived. A member that fails (lost, hung, or refused) cancels the
	// generation on the others, which would otherwise wait for it.
	errs := make(chan error, len(members))
	for r, m := range members {
		fields, payload := g.groupRequest(r, len(members), listen.Port, ranges[r])
		go func() {
			if _, err := m.Call(ctx, "group", fields, payload, nil); err != nil {
				if errors.Is(err, ErrHung) {
					m.Kill()
				}
				errs <- &MemberError{Rank: r, Err: fmt.Errorf("joining generation %d: %w", g.generation, err)}
				return
			}
			errs <- nil
		}()
	}
	var err error
	for range members {
		e := <-errs
		if e != nil && err == nil {
			g.cancel(ctx, members, e)
		}
		err = errors.Join(err, e)
	}
	if err != nil {
		return err
	}
	g.members, g.ranges = members, ranges
	return nil
}

// cancel tells every member but the failed one that this generation's
// group will not form (answered at once, even during the rendezvous).
func (g *Group) cancel(ctx context.Context, members []Member, failed error) {
	var me *MemberError
	errors.As(failed, &me)
	for r, m := range members {
		if me != nil && me.Rank == r {
			continue
		}
		go func() { _, _ = m.Call(ctx, "cancel", map[string]any{"generation": g.generation}, nil, nil) }()
	}
}

func (g *Group) groupRequest(rank, size, port int, lws [2]int) (map[string]any, []byte) {
	list := make([]int, 0, lws[1]-lws[0])
	fresh := []int{}
	parts := map[int][]byte{}
	for lw := lws[0]; lw < lws[1]; lw++ {
		list = append(list, lw)
		if c, ok := g.contexts[lw]; ok {
			parts[lw] = c
		} else {
			fresh = append(fresh, lw)
		}
	}
	index, payload := pack(parts)
	return map[string]any{
		"generation": g.generation, "rank": rank, "size": size, "host": g.Host, "port": port,
		"timeout_s": g.TimeoutSeconds, "logical_workers": list, "fresh": fresh, "contexts": index, "step": g.next,
	}, payload
}

// Contexts returns a copy of every logical worker's context after the last
// committed step (logical worker -> the bytes its process reported).
func (g *Group) Contexts() map[int][]byte {
	out := make(map[int][]byte, len(g.contexts))
	for lw, c := range g.contexts {
		out[lw] = c
	}
	return out
}

// SetContexts replaces the contexts (a resumed checkpoint's); they reach the
// processes at the next Assign.
func (g *Group) SetContexts(contexts map[int][]byte) {
	g.contexts = make(map[int][]byte, len(contexts))
	for lw, c := range contexts {
		g.contexts[lw] = c
	}
}

// StepResult is what one step produced.
type StepResult struct {
	Losses  map[int]float64 // loss per logical worker
	Samples map[int]string  // hash of the sample indices per logical worker (the ledger's samples_hash)
	Digest  string          // sha256 of parameters and logical worker 0's buffers after the step; "" when skipped
	// HashSeconds is how long member 0 took to compute Digest (0 when skipped).
	HashSeconds float64
	// Tensors are the digests of each tensor Digest covers (the first 8
	// bytes of its data's sha256, in hex, as the native engine's), so that
	// `easyscale verify` names the tensors two runs differ in; nil when
	// Digest is "".
	Tensors []statedb.TensorDigest
	// Leaving lists the members that received SIGTERM and ask to be
	// released now that the step is committed.
	Leaving []int
}

// Step runs step on every member and commits it, in three phases: every
// member computes its logical workers' gradients ("step": no collective, so
// a slow member is waited for as long as it heartbeats, however long its
// step takes), then, once all have, they reduce them among themselves
// ("reduce": the chain, whose collectives wait only for transfers, bounded
// by TimeoutSeconds), then each applies the result ("commit"). A member
// lost while the others compute is never waited for in a collective: the
// reduce is not started. On error nothing is
// committed anywhere it matters: members that computed are told to abort,
// the contexts stay those of the last committed step, and the caller may
// Assign again (with the lost member left out) and redo the step.
//
// faults injects failures (fault injection for tests and --kill-at /
// --term-at): member rank -> "kill" (SIGKILL itself once its step has
// started) or "term" (SIGTERM itself: it leaves after the step). When ctx
// ends the step is abandoned at once, without waiting for any member: the
// contexts stay those of the last committed step, and the members are
// fit only to be checkpointed (Local.Checkpoint) and killed.
func (g *Group) Step(ctx context.Context, step int64, faults map[int]string) (*StepResult, error) {
	type stepped struct {
		Losses   map[string]float64 `json:"losses"`
		Samples  map[string]string  `json:"samples"`
		Contexts [][2]int           `json:"contexts"`
		Leaving  bool               `json:"leaving"`
	}
	res := &StepResult{Losses: map[int]float64{}, Samples: map[int]string{}}
	if g.Standby != nil && g.standbyAt != step && len(g.contexts) == g.world {
		g.Standby(step, g.contexts, nil)
		g.standbyAt = step
	}
	g.pending = map[int][]byte{}
	outs := make([]stepped, len(g.members))
	payloads := make([][]byte, len(g.members))
	errs := make([]error, len(g.members))
	done := make(chan int, len(g.members))
	for r, m := range g.members {
		fields := map[string]any{"step": step}
		if f, ok := faults[r]; ok {
			fields["fault"] = f
		}
		go func() {
			payloads[r], errs[r] = m.Call(ctx, "step", fields, nil, &outs[r])
			if errors.Is(errs[r], ErrHung) {
				m.Kill() // it is stuck: no later request could reach it
			}
			done <- r
		}()
	}
	for range g.members {
		<-done
	}
	if err := ctx.Err(); err != nil {
		g.pending = nil
		return nil, fmt.Errorf("step %d abandoned: %w", step, err)
	}
	if err := g.failed("step", step, errs); err != nil {
		return nil, err
	}
	for r, m := range g.members {
		go func() {
			_, errs[r] = m.Call(ctx, "reduce", map[string]any{"step": step}, nil, nil)
			if errors.Is(errs[r], ErrHung) {
				m.Kill()
			}
			done <- r
		}()
	}
	for range g.members {
		<-done
	}
	if err := ctx.Err(); err != nil {
		g.pending = nil
		return nil, fmt.Errorf("step %d abandoned: %w", step, err)
	}
	if err := g.failed("reduce", step, errs); err != nil {
		return nil, err
	}
	for r := range g.members {
		parts, err := unpack(outs[r].Contexts, payloads[r])
		if err != nil {
			g.abort(ctx)
			return nil, fmt.Errorf("member %d: step %d: %w", r, step, err)
		}
		for lw, c := range parts {
			if lw < g.ranges[r][0] || lw >= g.ranges[r][1] {
				g.abort(ctx)
				return nil, fmt.Errorf("member %d: step %d: reported the context of logical worker %d, which it does not hold", r, step, lw)
			}
			g.pending[lw] = c
		}
		for k, v := range outs[r].Losses {
			if lw, err := strconv.Atoi(k); err == nil {
				res.Losses[lw] = v
			}
		}
		for k, v := range outs[r].Samples {
			if lw, err := strconv.Atoi(k); err == nil {
				res.Samples[lw] = v
			}
		}
		if outs[r].Leaving {
			res.Leaving = append(res.Leaving, r)
		}
	}
	if len(g.pending) != g.world {
		g.abort(ctx)
		return nil, fmt.Errorf("step %d: contexts of %d logical workers reported, want %d", step, len(g.pending), g.world)
	}
	var digests = make([]digestReply, len(g.members))
	// The commit is the training loop's own code (clipping, the optimizer
	// and scheduler steps, its logging) up to its next step: once asked,
	// it is waited for CommitGrace past a cancellation (SIGTERM), so the
	// step is committed everywhere or, past the grace, abandoned.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(CommitGrace, cancel) })
	defer stop()
	if g.Standby != nil {
		g.Standby(step+1, g.pending, res)
		g.standbyAt = step + 1
	}
	loss := meanLoss(res.Losses, g.world)
	for r, m := range g.members {
		go func() {
			fields := map[string]any{"step": step, "digest": r == 0 && !g.SkipDigest, "loss": loss}
			_, errs[r] = m.Call(cctx, "commit", fields, nil, &digests[r])
			done <- r
		}()
	}
	for range g.members {
		<-done
	}
	if ctx.Err() != nil && slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, context.Canceled) }) {
		g.pending = nil
		return nil, fmt.Errorf("step %d abandoned during its commit: %w", step, ctx.Err())
	}
	// Members that committed are at step+1 now, so the step's contexts are the
	// committed ones even when another member was lost during the commit: the
	// caller reassigns the survivors and goes on with the next step.
	g.contexts, g.pending = g.pending, nil
	g.trained = true
	g.next = step + 1
	res.Digest, res.HashSeconds, res.Tensors = digests[0].Digest, digests[0].HashS, digests[0].tensors()
	var lost memberErrors
	for r, err := range errs {
		if err != nil {
			lost.add(&MemberError{Rank: r, Committed: true, Err: fmt.Errorf("commit %d: %w", step, err)})
		}
	}
	return res, lost.err()
}

// CommitGrace is how long a commit already asked for is waited for after
// the step's context ends (SIGTERM): the training loop's code after its
// reduction (clipping, optimizer, scheduler, logging) usually takes
// milliseconds, and the run must exit within 2 s of SIGTERM.
const CommitGrace = time.Second

// meanLoss is the step's loss as the ledger records it: every logical
// worker's loss rounded to float32, summed in logical-worker order, / n
// (python/easyscale/loop.py mean_loss; what batch.loss holds).
func meanLoss(losses map[int]float64, n int) float64 {
	var sum float64
	for lw := range n {
		sum += float64(float32(losses[lw]))
	}
	return sum / float64(n)
}

// Digest asks member 0, which holds logical worker 0, for the digest of the
// committed replica (parameters and logical worker 0's buffers) and the
// seconds hashing took: what commit reports when asked, taken again after
// member 0 was lost inside a commit and the survivors were reassigned.
func (g *Group) Digest(ctx context.Context) (string, float64, []statedb.TensorDigest, error) {
	if len(g.members) == 0 {
		return "", 0, nil, errors.New("digest: no member")
	}
	var out digestReply
	if _, err := g.members[0].Call(ctx, "digest", nil, nil, &out); err != nil {
		return "", 0, nil, &MemberError{Rank: 0, Committed: true, Err: fmt.Errorf("digest: %w", err)}
	}
	return out.Digest, out.HashS, out.tensors(), nil
}

// digestReply is a commit's or digest request's answer: the digest, the
// seconds hashing took and each tensor's digest as [name, digest] pairs.
type digestReply struct {
	Digest  string      `json:"digest"`
	HashS   float64     `json:"hash_s"`
	Tensors [][2]string `json:"tensors"`
}

func (d digestReply) tensors() []statedb.TensorDigest {
	if len(d.Tensors) == 0 {
		return nil
	}
	out := make([]statedb.TensorDigest, len(d.Tensors))
	for i, t := range d.Tensors {
		out[i] = statedb.TensorDigest{Name: t[0], Digest: t[1]}
	}
	return out
}

// failed joins the members' errors of one phase; when any failed it tells
// the others to abort the step.
func (g *Group) failed(phase string, step int64, errs []error) error {
	var all memberErrors
	for r, err := range errs {
		if err != nil {
			all.add(&MemberError{Rank: r, Err: fmt.Errorf("%s %d: %w", phase, step, err)})
		}
	}
	if len(all.list) > 0 {
		g.abort(context.Background())
	}
	return all.err()
}

func (g *Group) abort(ctx context.Context) {
	for _, m := range g.members {
		_, _ = m.Call(ctx, "abort", nil, nil, nil) // a lost member cannot answer: that is expected
	}
	g.pending = nil
}

// MemberError is a failure of one member (rank in the current assignment).
// Committed says the step was committed on the other members (the member
// was lost during the commit): the step need not be redone.
type MemberError struct {
	Rank      int
	Committed bool
	Err       error
}

func (e *MemberError) Error() string { return fmt.Sprintf("member %d: %v", e.Rank, e.Err) }
func (e *MemberError) Unwrap() error { return e.Err }

// memberErrors are the failures of several members in one phase, in rank
// order. errors.As and errors.Is see each (Unwrap); Error prints a
// message several members share once, naming them all ("members 0, 1:
// commit 19: ... past the job's 20 steps"), where errors.Join printed it
// once per member.
// (A struct, not a slice: hclog prints a slice value element by element.)
type memberErrors struct{ list []*MemberError }

// add appends one member's failure.
func (m *memberErrors) add(e *MemberError) { m.list = append(m.list, e) }

// err is m as an error: nil when empty, the one MemberError when alone.
func (m *memberErrors) err() error {
	switch len(m.list) {
	case 0:
		return nil
	case 1:
		return m.list[0]
	}
	return m
}

func (m *memberErrors) Error() string {
	var order []string
	ranks := map[string][]string{}
	for _, e := range m.list {
		msg := e.Err.Error()
		if _, seen := ranks[msg]; !seen {
			order = append(order, msg)
		}
		ranks[msg] = append(ranks[msg], strconv.Itoa(e.Rank))
	}
	lines := make([]string, len(order))
	for i, msg := range order {
		who := "member " + ranks[msg][0]
		if len(ranks[msg]) > 1 {
			who = "members " + strings.Join(ranks[msg], ", ")
		}
		lines[i] = who + ": " + msg
	}
	return strings.Join(lines, "\n")
}

func (m *memberErrors) Unwrap() []error {
	out := make([]error, len(m.list))
	for i, e := range m.list {
		out[i] = e
	}
	return out
}

// pack concatenates per-logical-worker blobs (python/easyscale/state.py pack).
func pack(parts map[int][]byte) ([][2]int, []byte) {
	lws := make([]int, 0, len(parts))
	for lw := range parts {
		lws = append(lws, lw)
	}
	sort.Ints(lws)
	index := make([][2]int, 0, len(lws))
	var payload []byte
	for _, lw := range lws {
		index = append(index, [2]int{lw, len(parts[lw])})
		payload = append(payload, parts[lw]...)
	}
	return index, payload
}

// unpack splits a payload made by pack, checking the index covers it exactly.
func unpack(index [][2]int, payload []byte) (map[int][]byte, error) {
	out := make(map[int][]byte, len(index))
	at := 0
	for _, e := range index {
		lw, n := e[0], e[1]
		if n < 0 || at+n > len(payload) {
			return nil, fmt.Errorf("context index entry %v runs past the %d-byte payload", e, len(payload))
		}
		if _, dup := out[lw]; dup {
			return nil, fmt.Errorf("context index names logical worker %d twice", lw)
		}
		out[lw] = payload[at : at+n : at+n]
		at += n
	}
	if at != len(payload) {
		return nil, fmt.Errorf("context index covers %d bytes of a %d-byte payload", at, len(payload))
	}
	return out, nil
}
