package cluster

import (
	"fmt"
	"math"
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

func ledgerRow(e statedb.LedgerEntry) LedgerRow {
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

// Rows returns the rows of steps up to step that standby was not sent, and
// counts them as sent: up to the last row returned, so a step whose row is
// not recorded yet (the torch engine sends contexts before the trainer
// records the step) goes with a later message. A standby message of step
// s holds the contexts after s steps, whose rows are those of steps 1..s
// (the ledger numbers a step by the steps completed with it).
// A read error sends nothing and is returned (the standby's copy then
// lacks those rows; the next message tries again).
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
	to := min(step, f.next+MaxLedgerRowsPerMessage-1)
	rows, err := f.read(f.next, to)
	if err != nil {
		return nil, fmt.Errorf("reading ledger steps %d..%d for the standby: %w", f.next, to, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]LedgerRow, len(rows))
	for i, e := range rows {
		out[i] = ledgerRow(e)
	}
	f.next = rows[len(rows)-1].Step + 1
	return out, nil
}

// StandbyLedger is a standby's copy of the coordinator's ledger, in step
// order: the rows the coordinator sent it, a later row of a step replacing
// the earlier and every row after it (the coordinator re-sends from step 0
// when it designates this worker again).
type StandbyLedger struct {
	rows []statedb.LedgerEntry
}

// Add keeps rows (in step order, as LedgerFeed sends them).
func (l *StandbyLedger) Add(rows []LedgerRow) {
	if len(rows) == 0 {
		return
	}
	first := rows[0].Step
	i := len(l.rows)
	for i > 0 && l.rows[i-1].Step >= first {
		i--
	}
	l.rows = l.rows[:i]
	for _, r := range rows {
		l.rows = append(l.rows, r.Entry())
	}
}

// Through returns the kept rows of steps up to step (a copy of the slice;
// the entries share their tensor digests): a copy of step s holds the
// state after steps 1..s.
func (l *StandbyLedger) Through(step int64) []statedb.LedgerEntry {
	if l == nil {
		return nil
	}
	n := 0
	for n < len(l.rows) && l.rows[n].Step <= step {
		n++
	}
	return append([]statedb.LedgerEntry(nil), l.rows[:n]...)
}
