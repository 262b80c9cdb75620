package torchengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// A torch job's standby (issue 20 item 1; runtime/cluster standby.go for
// the native engine, docs/first-node-loss.md). The committed replica is in
// every Python process; what only the coordinator holds is every logical
// worker's context (Group.contexts). With Options.Standby the engine sends
// them to one remote worker, the lowest-ranked on another Slurm node than
// its own, as a relayStandby frame: before a step when that worker has not
// had the committed contexts of its start, and after each step's reduce,
// before its commit is asked, the contexts the commit makes the committed
// ones (labelled with the next step). The worker's relay keeps the last
// two. When the coordinator's connection is lost, the relay asks its own
// Python process for the checkpoint of the step the process committed
// (its control thread answers during a step; it refuses any other step)
// and returns a *cluster.TakeoverError carrying the file and the contexts
// labelled with that step, before the process is closed. The caller (runtime/cli
// takeover.go) saves them as the checkpoint of that step and coordinates;
// a fresh engine resumes from it as from any checkpoint.

// sendStandby sends contexts, those of the start of step, to the standby
// (Group.Standby): the lowest-ranked remote worker on another Slurm node
// than this engine's. Nothing is sent when there is none; a failed send
// is the worker's loss, which the step finds.
//
// Each frame carries the ledger rows the standby was not sent
// (cluster.LedgerFeed). A frame with the committed contexts (reduced nil:
// before a step, to a standby that has not had them, e.g. after a resume
// or a new standby's designation) carries the rows up to step, whose row
// is recorded. A frame with a reduced step's contexts (reduced: that
// step's result), sent after step-1's reduce and before its commit,
// carries the rows up to step-1 only: the trainer has not recorded row
// step yet (after a resume the ledger still holds the earlier run's row
// there, which must not be sent). It carries instead the row step will
// be recorded with, but its digest (trainer.PendingRow): the coordinator
// may be lost after the commit and before it records the row, and the
// standby's process then holds the state of a step whose row the
// coordinator never wrote (a clean-clone CI run, 2026-12-03: row 16 was
// nowhere). contexts nil sends only the rows up to step, and nothing when
// there are none (LedgerRecorded: right after row step is recorded).
func (e *Engine) sendStandby(step int64, contexts map[int][]byte, reduced *StepResult) {
	var standby *remote
	for _, s := range e.local.procs {
		if s.remote != nil && s.remote.slurmNode != "" && s.remote.slurmNode != e.opts.Node && !s.remote.exited() {
			standby = s.remote
			break
		}
	}
	if standby == nil {
		return
	}
	var pending *cluster.LedgerRow
	if reduced != nil && contexts != nil && e.pendingRow != nil {
		row := cluster.NewLedgerRow(e.pendingRow(step-1, stepReport(reduced, e.opts.Spec.LogicalWorkers)))
		pending = &row
	}
	b, ok, rowsErr, err := nextStandbyFrame(&e.ledger, standby, step, contexts, reduced != nil, pending)
	if rowsErr != nil {
		e.log.Warn("the standby's copy of the ledger", "step", step, "error", rowsErr)
	}
	if !ok {
		return
	}
	if err == nil {
		err = standby.write(relayStandby, b)
	}
	if err != nil {
		e.log.Warn("sending the standby its contexts", "step", step, "node", standby.slurmNode, "error", err)
	}
}

// nextStandbyFrame is the frame sendStandby sends standby (see there): with
// a reduced step's contexts, the rows up to step-1 feed has not sent it
// and the pending row of step (nil: none); otherwise the rows up to step
// (with the committed contexts, if any). ok is false when there is
// nothing to send; rowsErr is a failed read of the ledger (the frame then
// has the rows read, if any).
func nextStandbyFrame(feed *cluster.LedgerFeed, standby any, step int64, contexts map[int][]byte, reduced bool, pending *cluster.LedgerRow) (b []byte, ok bool, rowsErr, err error) {
	through := step
	if contexts != nil && reduced {
		through = step - 1
	} else {
		pending = nil
	}
	rows, rowsErr := feed.Rows(standby, through)
	b, ok, err = standbyFrame(step, contexts, rows, pending)
	return b, ok, rowsErr, err
}

// standbyFrame is the relayStandby frame of step with contexts (nil: none),
// ledger rows and the pending row of step (nil: none; only with contexts);
// ok is false when it would carry neither contexts nor rows.
func standbyFrame(step int64, contexts map[int][]byte, rows []cluster.LedgerRow, pending *cluster.LedgerRow) (b []byte, ok bool, err error) {
	if contexts == nil && len(rows) == 0 {
		return nil, false, nil
	}
	header := map[string]any{"type": "standby", "step": step}
	if len(rows) > 0 {
		header["ledger"] = rows
	}
	var payload []byte
	if contexts != nil {
		var index [][2]int
		index, payload = pack(contexts)
		header["contexts"] = index
		if pending != nil {
			header["pending"] = pending
		}
	}
	b, err = encodeRelay(header, payload)
	return b, true, err
}

// standbyContexts is what a worker's relay keeps as the standby: the
// contexts of the start of the last two steps it was sent, with the
// pending ledger rows of those steps.
type standbyContexts struct {
	steps    []int64 // newest last
	contexts map[int64]map[int][]byte
	// pending is the row each kept step will be recorded with, as the
	// coordinator sent it with its contexts (trainer.PendingRow).
	pending map[int64]statedb.LedgerEntry
	// onFirst, when set, is called once, on the first frame kept: this
	// worker is the standby (RunWorker starts its spare there).
	onFirst func()
	first   sync.Once
	// ledger is the coordinator's ledger rows as this standby was sent
	// them (cluster.LedgerFeed).
	ledger cluster.StandbyLedger
	// mu guards steps, contexts, pending and ledger: the relay's reader may still
	// keep a frame while copyFrom reads them (relay returns on the first
	// end without waiting for its reader).
	mu sync.Mutex
}

// keep decodes a relayStandby frame and keeps its ledger rows and its
// contexts with their pending row, dropping all but the newest two steps'
// (a frame without contexts carries only ledger rows).
func (s *standbyContexts) keep(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := decodeRelay(b)
	if err != nil {
		return fmt.Errorf("standby frame: %w", err)
	}
	step, ok := f.header["step"].(float64)
	if !ok || step < 0 {
		return fmt.Errorf("standby frame without a step: %v", f.header["step"])
	}
	if raw, ok := f.header["ledger"]; ok {
		var rows []cluster.LedgerRow
		b, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(b, &rows)
		}
		if err != nil {
			return fmt.Errorf("standby frame of step %d: its ledger rows: %w", int64(step), err)
		}
		// A row the state database would refuse would cost the takeover
		// its whole import (statedb.DB.ImportLedger): it is left out,
		// and the trainer reports the gap.
		s.ledger.Add(slices.DeleteFunc(rows, func(r cluster.LedgerRow) bool { return r.Entry().Validate() != nil }))
	}
	if _, ok := f.header["contexts"]; !ok {
		return nil
	}
	raw, _ := f.header["contexts"].([]any)
	index := make([][2]int, 0, len(raw))
	for _, e := range raw {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return fmt.Errorf("standby frame of step %d: context index entry %v is not [logical worker, length]", int64(step), e)
		}
		lw, ok1 := pair[0].(float64)
		n, ok2 := pair[1].(float64)
		if !ok1 || !ok2 {
			return fmt.Errorf("standby frame of step %d: context index entry %v is not numbers", int64(step), e)
		}
		index = append(index, [2]int{int(lw), int(n)})
	}
	parts, err := unpack(index, f.payload)
	if err != nil {
		return fmt.Errorf("standby frame of step %d: %w", int64(step), err)
	}
	k := int64(step)
	// A pending row that cannot be read, or is of another step, is left
	// out, not the frame: the contexts are what a takeover needs.
	pending, _ := decodePendingRow(f.header["pending"], k)
	if s.contexts == nil {
		s.contexts, s.pending = map[int64]map[int][]byte{}, map[int64]statedb.LedgerEntry{}
	}
	if _, seen := s.contexts[k]; !seen {
		s.steps = append(s.steps, k)
	}
	s.contexts[k] = parts
	delete(s.pending, k)
	if pending != nil {
		s.pending[k] = *pending
	}
	for len(s.steps) > 2 {
		delete(s.contexts, s.steps[0])
		delete(s.pending, s.steps[0])
		s.steps = s.steps[1:]
	}
	if s.onFirst != nil {
		s.first.Do(s.onFirst)
	}
	return nil
}

// decodePendingRow decodes a frame's pending row (raw nil: none), which must be
// of the frame's step and valid as a ledger row.
func decodePendingRow(raw any, step int64) (*statedb.LedgerEntry, error) {
	if raw == nil {
		return nil, nil
	}
	var row cluster.LedgerRow
	b, err := json.Marshal(raw)
	if err == nil {
		err = json.Unmarshal(b, &row)
	}
	if err != nil {
		return nil, fmt.Errorf("its pending ledger row: %w", err)
	}
	if row.Step != step {
		return nil, fmt.Errorf("its pending ledger row is of step %d", row.Step)
	}
	e := row.Entry()
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("its pending ledger row: %w", err)
	}
	return &e, nil
}

// copyFrom asks p, this worker's Python process, for the checkpoint of
// the newest kept step it committed and returns it with that step's
// contexts as a standby copy (nil when none was kept, or the process
// committed neither step, or cannot answer within timeout). When the
// coordinator was lost before it sent that step's ledger row, the copy's
// ledger holds the pending row instead (unhashed: its digest was to be
// taken after the commit).
func (s *standbyContexts) copyFrom(ctx context.Context, p *Process, files data.Manifest, sess *cluster.EngineSession, timeout time.Duration, log hclog.Logger) *cluster.StandbyCopy {
	world := sess.Spec.LogicalWorkers
	s.mu.Lock()
	steps := slices.Clone(s.steps)
	kept := maps.Clone(s.contexts)
	s.mu.Unlock()
	var errs error
	for i := len(steps) - 1; i >= 0; i-- {
		step := steps[i]
		contexts := kept[step]
		if len(contexts) != world {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		file, err := p.Call(cctx, "checkpoint", map[string]any{"step": step}, nil, nil)
		cancel()
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		lws := make([]int, 0, world)
		for lw := range contexts {
			lws = append(lws, lw)
		}
		sort.Ints(lws)
		s.mu.Lock()
		ledger := s.ledger.Copy(step) // the reader may still add rows
		pending, hasPending := s.pending[step]
		s.mu.Unlock()
		if hasPending && ledger.AddMissing(pending) {
			log.Warn("the coordinator was lost before it recorded the ledger row of the step its standby holds: the row is the one the step was to be recorded with, unhashed",
				"step", step)
		}
		cp := &cluster.StandbyCopy{Spec: sess.Spec, Data: files, Step: step, File: file, Ledger: ledger}
		for _, lw := range lws {
			cp.Contexts = append(cp.Contexts, statedb.ESTContext{EST: lw, Blob: contexts[lw]})
		}
		return cp
	}
	if len(steps) > 0 {
		log.Warn("lost the coordinator as its standby but its python process wrote no checkpoint of a step it holds the contexts of",
			"steps", steps, "error", errs)
	}
	return nil
}
