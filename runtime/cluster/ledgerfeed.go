package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// The standby's copy of the ledger (issue 20; docs/first-node-loss.md). A
// standby that takes over where the state directory is node-local finds
// none of the job there: the coordinator's copy died with its node. So the
// coordinator sends its standby the ledger's rows along with the standby
// messages (LedgerFeed), the standby keeps them (StandbyCopy.Ledger), and
// the takeover imports them (statedb.DB.ImportLedger) into the directory
// it creates. A new standby first gets the rows recorded before it, at
// most MaxLedgerRowsPerMessage with each standby message.

// MaxLedgerRowsPerMessage bounds the ledger rows sent with one standby
// message, so that a standby designated late in a long run (a requeued or
// resumed job, a new standby after a loss) catches up over several steps
// without one step message of megabytes: about 200-600 bytes a row, more
// with per-tensor digests.
const MaxLedgerRowsPerMessage = 512

// LedgerRow is a ledger row on the wire (statedb.LedgerEntry): the loss as
// its IEEE-754 bits, so NaN and -0 arrive exact, and the time in Unix
// nanoseconds, both as JSON strings, so that a reader decoding numbers as
// float64 (the torch relay's frame headers) loses no bit.
type LedgerRow struct {
	Step          int64                  `json:"step"`
	Digest        string                 `json:"digest,omitempty"`
	Unhashed      bool                   `json:"unhashed,omitempty"`
	TensorDigests []statedb.TensorDigest `json:"tensor_digests,omitempty"`
	LossBits      uint64                 `json:"loss_bits,string"`
	WallSeconds   float64                `json:"wall_s"`
	Workers       int                    `json:"workers"`
	Placement     string                 `json:"placement"`
	SamplesHash   string                 `json:"samples_hash,omitempty"`
	Redos         int                    `json:"redos,omitempty"`
	TimeNS        int64                  `json:"time_ns,string"`
}

// NewLedgerRow is ledger row e on the wire.
func NewLedgerRow(e statedb.LedgerEntry) LedgerRow {
	return LedgerRow{Step: e.Step, Digest: e.Digest, Unhashed: e.Unhashed, TensorDigests: e.TensorDigests,
		LossBits: math.Float64bits(e.Loss), WallSeconds: e.WallSeconds, Workers: e.Workers, Placement: e.Placement,
		SamplesHash: e.SamplesHash, Redos: e.Redos, TimeNS: e.Time.UnixNano()}
}

// Entry is the row as the state database takes it.
func (r LedgerRow) Entry() statedb.LedgerEntry {
	return statedb.LedgerEntry{Step: r.Step, Digest: r.Digest, Unhashed: r.Unhashed, TensorDigests: r.TensorDigests,
		Loss: math.Float64frombits(r.LossBits), WallSeconds: r.WallSeconds, Workers: r.Workers, Placement: r.Placement,
		SamplesHash: r.SamplesHash, Redo: r.Redos > 0, Redos: r.Redos, Time: time.Unix(0, r.TimeNS)}
}

// LedgerFeed chooses the ledger rows that go to the standby with each
// standby message: the rows it has not been sent, oldest first, at most
// MaxLedgerRowsPerMessage. A different standby starts again from step 0.
// The zero value (no reader: the run has no state directory) sends none.
type LedgerFeed struct {
	read trainer.LedgerReader
	// to is the standby the rows went to (a comparable identity: the
	// member or the remote worker), next the first step it was not sent.
	to   any
	next int64
}

// Follow sets the ledger to read (trainer.LedgerFollower).
func (f *LedgerFeed) Follow(read trainer.LedgerReader) { f.read = read }

// Rows returns the rows of steps up to step that standby was not sent, at
// most MaxLedgerRowsPerMessage, and counts them as sent: up to the last
// row read, so a step whose row is not recorded yet goes with a later
// message, and a stretch of steps without rows (a ledger that starts at a
// takeover) is passed over. A standby message of step s holds the
// contexts after s steps, whose rows are those of steps 1..s (the ledger
// numbers a step by the steps completed with it). Corrupt rows are passed
// over and reported in err with the intact rows; any other read error
// sends nothing (the next message tries again).
func (f *LedgerFeed) Rows(standby any, step int64) ([]LedgerRow, error) {
	if f.read == nil {
		return nil, nil
	}
	if f.to != standby {
		f.to, f.next = standby, 0
	}
	if f.next > step {
		return nil, nil
	}
	rows, err := f.read(f.next, step, MaxLedgerRowsPerMessage)
	var corrupt *statedb.CorruptLedgerError
	switch {
	case errors.As(err, &corrupt):
		for _, s := range corrupt.Steps {
			f.next = max(f.next, s+1)
		}
		err = fmt.Errorf("ledger rows for the standby: %w", err)
	case err != nil:
		return nil, fmt.Errorf("reading ledger steps %d..%d for the standby: %w", f.next, step, err)
	}
	if len(rows) == 0 {
		return nil, err
	}
	out := make([]LedgerRow, len(rows))
	for i, e := range rows {
		out[i] = NewLedgerRow(e)
	}
	f.next = max(f.next, rows[len(rows)-1].Step+1)
	return out, err
}

// StandbyLedger is a standby's copy of the coordinator's ledger, in step
// order: the rows the coordinator sent it, a row of a step sent again
// replacing the one kept (the coordinator sends from step 1 again when it
// designates this worker anew). It holds every row sent for the run's life:
// a few hundred bytes a step, more with per-tensor digests.
type StandbyLedger struct {
	rows []statedb.LedgerEntry
}

// Add keeps rows (each batch in step order, as LedgerFeed sends them).
func (l *StandbyLedger) Add(rows []LedgerRow) {
	for _, r := range rows {
		e := r.Entry()
		n := len(l.rows)
		if n == 0 || l.rows[n-1].Step < e.Step {
			l.rows = append(l.rows, e)
			continue
		}
		i, found := slices.BinarySearchFunc(l.rows, e.Step, func(x statedb.LedgerEntry, s int64) int { return cmp.Compare(x.Step, s) })
		if found {
			l.rows[i] = e
		} else {
			l.rows = slices.Insert(l.rows, i, e)
		}
	}
}

// Count is the number of kept rows of steps up to step.
func (l *StandbyLedger) Count(step int64) int {
	if l == nil {
		return 0
	}
	n, _ := slices.BinarySearchFunc(l.rows, step+1, func(x statedb.LedgerEntry, s int64) int { return cmp.Compare(x.Step, s) })
	return n
}

// AddMissing keeps e when no row of its step is kept, and reports whether
// it did: a standby's row of a step the coordinator never sent, which a
// row sent later would not replace.
func (l *StandbyLedger) AddMissing(e statedb.LedgerEntry) bool {
	i, found := slices.BinarySearchFunc(l.rows, e.Step, func(x statedb.LedgerEntry, s int64) int { return cmp.Compare(x.Step, s) })
	if found {
		return false
	}
	l.rows = slices.Insert(l.rows, i, e)
	return true
}

// Copy is a copy of the kept rows of steps up to step (a standby's copy
// that outlives the worker that keeps adding rows); nil for nil.
func (l *StandbyLedger) Copy(step int64) *StandbyLedger {
	if l == nil {
		return nil
	}
	return &StandbyLedger{rows: l.Through(step)}
}

// Through returns the kept rows of steps up to step (a copy of the slice;
// the entries share their tensor digests): a copy of step s holds the
// state after steps 1..s.
func (l *StandbyLedger) Through(step int64) []statedb.LedgerEntry {
	if l == nil {
		return nil
	}
	return append([]statedb.LedgerEntry(nil), l.rows[:l.Count(step)]...)
}
