package trainer

import (
	"context"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// pendingRows is the native engine made to follow the ledger as the torch
// engine does: during each step it asks the trainer for the row the step
// will be recorded with (PendingRow), as the torch engine does before the
// commit, and keeps it.
type pendingRows struct {
	Engine
	row      PendingRow
	pending  map[int64]statedb.LedgerEntry
	recorded []int64
}

var _ LedgerFollower = (*pendingRows)(nil)

func (e *pendingRows) FollowLedger(_ LedgerReader, row PendingRow) { e.row = row }
func (e *pendingRows) LedgerRecorded(step int64)                   { e.recorded = append(e.recorded, step) }

func (e *pendingRows) Step(ctx context.Context, step int64, plan placement.Plan) (StepReport, error) {
	rep, err := e.Engine.Step(ctx, step, plan)
	if err == nil && e.row != nil {
		e.pending[step+1] = e.row(step, rep)
	}
	return rep, err
}

// The row a follower is handed before a step's commit is the row the
// trainer then records for it, but the digest (unhashed) and the times:
// a standby that takes over with that step's state records it in place of
// the row the lost coordinator never sent.
func TestThePendingRowIsTheRecordedRowWithoutItsDigest(t *testing.T) {
	dir := t.TempDir()
	var eng *pendingRows
	run(t, mnistSmall, "0:2,4:3", func(o *Options) {
		o.StateDir = dir
		native, err := NativeEngine(*o)
		if err != nil {
			t.Fatal(err)
		}
		eng = &pendingRows{Engine: native, pending: map[int64]statedb.LedgerEntry{}}
		o.Engine = eng
	})
	rows := ledgerOf(t, dir)
	if len(rows) != testSteps || len(eng.pending) != testSteps || len(eng.recorded) != testSteps {
		t.Fatalf("%d rows recorded, %d pending rows handed out, %d LedgerRecorded calls; want %d each", len(rows), len(eng.pending), len(eng.recorded), testSteps)
	}
	workers := map[int]bool{}
	for i, r := range rows {
		p, ok := eng.pending[r.Step]
		if !ok || eng.recorded[i] != r.Step {
			t.Fatalf("step %d: pending row handed out %v, LedgerRecorded with step %d", r.Step, ok, eng.recorded[i])
		}
		if !p.Unhashed || p.Digest != "" || r.Unhashed || r.Digest == "" {
			t.Fatalf("step %d: pending row unhashed %v digest %q, recorded unhashed %v digest %q; want the pending one unhashed and the recorded one hashed",
				r.Step, p.Unhashed, p.Digest, r.Unhashed, r.Digest)
		}
		if p.Step != r.Step || p.Loss != r.Loss || p.Workers != r.Workers || p.Placement != r.Placement ||
			p.SamplesHash != r.SamplesHash || p.Redos != r.Redos || p.Loss == 0 || p.SamplesHash == "" {
			t.Fatalf("step %d: pending row %+v, recorded %+v", r.Step, p, r)
		}
		if p.WallSeconds <= 0 || p.WallSeconds > r.WallSeconds {
			t.Fatalf("step %d: pending row's wall %v s, recorded %v s; want more than 0 and at most the recorded", r.Step, p.WallSeconds, r.WallSeconds)
		}
		workers[r.Workers] = true
	}
	if !workers[2] || !workers[3] {
		t.Fatalf("the rows ran on %v workers, want both allocations of the schedule (2 and 3)", workers)
	}
}
