package statedb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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

// BenchmarkCheckLedger measures the resume-time check of every ledger row
// against its checksum, on a ledger of 10,000 steps with 10 per-tensor
// digests each (a row of ~700 bytes).
func BenchmarkCheckLedger(b *testing.B) {
	db := openTest(b, Options{})
	e := entry(0, "bench")
	e.TensorDigests = nil
	for k := range 10 {
		e.TensorDigests = append(e.TensorDigests, TensorDigest{Name: fmt.Sprintf("layer%d.weight", k), Digest: "9f86d081884c7d659a2feaa0c55ad015"})
	}
	err := db.immediate(context.Background(), func(tx *sql.Tx) error {
		tds, _ := json.Marshal(e.TensorDigests)
		for i := range 10000 {
			e.Step = int64(i)
			if err := appendLedgerTx(tx, e, string(tds)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		bad, err := db.CheckLedger()
		if err != nil || len(bad) != 0 {
			b.Fatalf("CheckLedger = %v, %v", bad, err)
		}
	}
}
