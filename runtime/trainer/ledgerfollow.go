package trainer

import "github.com/easyscale/easyscale-slurm/statedb"

// LedgerReader returns the job's ledger rows of steps from..to inclusive,
// at most limit of them (the first in step order; negative: all), as
// statedb.DB.LedgerPage does: rows that were never recorded are absent,
// corrupt rows are left out and named by a *statedb.CorruptLedgerError
// returned with the intact ones.
type LedgerReader func(from, to int64, limit int) ([]statedb.LedgerEntry, error)

// LedgerFollower is an Engine or an Executor that copies the job's ledger
// to the coordinator's standby (runtime/cluster standby.go), so that a
// standby that takes over with a node-local state directory, whose copy of
// the directory died with the coordinator's node, starts its own with the
// whole ledger and not at the takeover (issue 20; docs/first-node-loss.md).
// The trainer calls FollowLedger once, before the first step, when the run
// has a state directory; read stays valid until the engine is closed.
// The ledger numbers a step by the steps completed with it: the row of the
// engine's step s (0-based) is s+1, recorded after its commit, so a
// standby message sent before step s can carry the rows up to s, those of
// the state it holds. The trainer calls LedgerRecorded with the step right
// after its row is recorded, for an engine whose standby holds a later
// state than its messages' (the torch engine's, which sends a step's
// contexts before its commit), so that it can send the row at once. Such
// an engine also sends, with those contexts, the row the step will be
// recorded with as far as it is known before the commit (row): a
// coordinator lost after the commit and before the record leaves its
// standby holding the step's state, and the standby records that row.
type LedgerFollower interface {
	FollowLedger(read LedgerReader, row PendingRow)
	LedgerRecorded(step int64)
}

// PendingRow returns the ledger row the trainer will record for engine
// step s (0-based; the row's Step is s+1) from the step's report, before
// its commit: everything the trainer records but the digest, which is
// taken after the commit (Unhashed set), WallSeconds up to the call, and
// Redos as the trainer passes it (AppendLedger adds a stored row's count
// when the step replaces one after a resume).
// It is called during Engine.Step, on the trainer's goroutine.
type PendingRow func(s int64, rep StepReport) statedb.LedgerEntry

// followLedger hands the state database's ledger to eng, or to its
// executor (the native engine's), when it follows one, and returns the
// follower (nil: none).
func followLedger(eng Engine, read LedgerReader, row PendingRow) LedgerFollower {
	f, ok := eng.(LedgerFollower)
	if n, native := eng.(*nativeEngine); !ok && native {
		f, ok = n.exec.(LedgerFollower)
	}
	if !ok {
		return nil
	}
	f.FollowLedger(read, row)
	return f
}
