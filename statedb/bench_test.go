package statedb

import (
	"testing"
	"time"
)

// BenchmarkAppendLedger measures one step's ledger row: one immediate
// transaction (read the step's old row, insert) committed under WAL with
// synchronous=NORMAL.
func BenchmarkAppendLedger(b *testing.B) {
	db := openTest(b, Options{})
	e := entry(0, "bench")
	e.Time = time.Unix(0, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e.Step = int64(i)
		if err := db.AppendLedger(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveCheckpoint measures a 1 MiB checkpoint: write, fsync,
// rename, directory fsync and the synchronous=FULL record.
func BenchmarkSaveCheckpoint(b *testing.B) {
	db := openTest(b, Options{})
	ts := stepTensors(1, 1<<18)
	ctxs := helperContexts(1)
	b.SetBytes(4 << 18)
	b.ResetTimer()
	for i := range b.N {
		if err := db.SaveCheckpoint(int64(i), ts, ctxs, nil); err != nil {
			b.Fatal(err)
		}
	}
}
