package torchengine

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nlpodyssey/safetensors"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// A standby's copy is a checkpoint its own Python process (rank 1, not
// holding logical worker 0) writes of the step it committed, with the
// contexts the coordinator streamed to it as relayStandby frames: a run
// resumed from that copy trains on to the digests of the run that was not
// interrupted. The copy's ledger holds a row of every step up to its own:
// when the coordinator is lost after the commit and before it sends (or
// records) the row of the step the copy is of, the row is the pending one
// it sent with that step's contexts, unhashed.
func TestAStandbyCopyResumesToTheUninterruptedDigests(t *testing.T) {
	for _, rowLost := range []bool{false, true} {
		name := "the row of its step sent"
		if rowLost {
			name = "the coordinator lost before the row of its step"
		}
		t.Run(name, func(t *testing.T) { standbyCopyResumes(t, rowLost) })
	}
}

func standbyCopyResumes(t *testing.T, rowLost bool) {
	const cut, end = 5, 8
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	sb := &standbyContexts{}
	var sent []int64
	// The ledger the trainer records after each step (row s+1 of step s,
	// its digest), streamed with the frames as Engine.sendStandby does,
	// and the pending row of each step (its mean loss, unhashed).
	digests := map[int64]string{}
	losses := map[int64]float64{}
	var feed cluster.LedgerFeed
	feed.Follow(func(from, to int64, limit int) ([]statedb.LedgerEntry, error) {
		var rows []statedb.LedgerEntry
		for s := from; s <= to && (limit < 0 || len(rows) < limit); s++ {
			if d, ok := digests[s-1]; ok {
				rows = append(rows, statedb.LedgerEntry{Step: s, Digest: d, Loss: losses[s-1], Time: time.Unix(1764000000, s)})
			}
		}
		return rows, nil
	})
	l.group.Standby = func(step int64, contexts map[int][]byte, reduced *StepResult) {
		var pending *cluster.LedgerRow
		if reduced != nil {
			rep := stepReport(reduced, 4)
			losses[step-1] = float64(rep.Losses[0]+rep.Losses[1]+rep.Losses[2]+rep.Losses[3]) / 4
			row := cluster.NewLedgerRow(statedb.LedgerEntry{Step: step, Unhashed: true, Loss: losses[step-1], Workers: 2,
				Time: time.Unix(1764000000, step)})
			pending = &row
		}
		b, ok, rowsErr, err := nextStandbyFrame(&feed, sb, step, contexts, reduced != nil, pending)
		if rowsErr != nil {
			t.Fatal(rowsErr)
		}
		if !ok {
			return
		}
		if err == nil {
			err = sb.keep(b)
		}
		if err != nil {
			t.Errorf("standby frame of step %d: %v", step, err)
		}
		if contexts != nil {
			sent = append(sent, step)
		}
	}
	for step := range int64(end) {
		res, err := l.Step(ctx, step, split(4, 2), nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		lost := rowLost && step == cut-1
		if !lost {
			digests[step] = res.Digest
			l.group.Standby(step+1, nil, nil) // row step+1 recorded: Engine.LedgerRecorded
		}
		if step != cut-1 {
			continue
		}
		// The coordinator is lost here: the standby's process writes its copy.
		sess := &cluster.EngineSession{Spec: &jobspec.Spec{Name: "toy", LogicalWorkers: 4}}
		cp := sb.copyFrom(ctx, l.Processes()[1], nil, sess, 30*time.Second, hclog.NewNullLogger())
		if cp == nil {
			t.Fatalf("no copy after step %d (standby frames of steps %v, kept %v)", step, sent, sb.steps)
		}
		if cp.Step != cut || len(cp.Contexts) != 4 {
			t.Fatalf("copy of step %d with %d contexts, want step %d and 4", cp.Step, len(cp.Contexts), cut)
		}
		for _, c := range cp.Contexts {
			if want := l.group.Contexts()[c.EST]; !bytes.Equal(c.Blob, want) {
				t.Fatalf("the copy's context of logical worker %d differs from the coordinator's", c.EST)
			}
		}
		if len(sb.steps) > 2 || len(sb.pending) > 2 {
			t.Fatalf("the standby keeps %d steps' contexts and %d pending rows, want the last 2", len(sb.steps), len(sb.pending))
		}
		rows := cp.Ledger.Through(cp.Step)
		if int64(len(rows)) != cp.Step {
			t.Fatalf("the copy of step %d holds %d ledger rows, want the %d of steps 1..%d", cp.Step, len(rows), cp.Step, cp.Step)
		}
		for i, r := range rows {
			s := int64(i)
			if r.Step != s+1 || r.Loss != losses[s] || losses[s] == 0 {
				t.Fatalf("the copy's ledger row %d: step %d loss %v, want step %d loss %v", i, r.Step, r.Loss, i+1, losses[s])
			}
			if lost && s == step {
				if !r.Unhashed || r.Digest != "" || r.Workers != 2 {
					t.Fatalf("the copy's row of step %d, which the coordinator never recorded: %+v, want the pending row (unhashed, 2 workers)", r.Step, r)
				}
				continue
			}
			if r.Digest != digests[s] {
				t.Fatalf("the copy's ledger row %d: step %d digest %s, want step %d digest %s", i, r.Step, r.Digest, i+1, digests[s])
			}
		}
		digests[step] = res.Digest
		resumed(t, cp, cut, end, digests)
	}
	t.Logf("standby frames of steps %v", sent)
}

// resumed trains a new Local from the copy cp (step from) to end and
// compares its digests with those of the run that was not interrupted,
// which are still to come into want: it checks them once that run is done.
func resumed(t *testing.T, cp *cluster.StandbyCopy, from, end int64, want map[int64]string) {
	t.Helper()
	if meta, err := checkpointMeta(cp.File); err != nil || meta["easyscale.digest"] != "" {
		t.Fatalf("the copy's metadata %v (%v): a process without logical worker 0's buffers must not write a digest", meta, err)
	}
	l2, ctx := newLocal(t)
	if err := l2.Resize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	contexts := map[int][]byte{}
	for _, c := range cp.Contexts {
		contexts[c.EST] = c.Blob
	}
	l2.Restore(cp.File, contexts)
	got := map[int64]string{}
	for step := from; step < end; step++ {
		res, err := l2.Step(ctx, step, split(4, 2), nil)
		if err != nil {
			t.Fatalf("resumed step %d: %v", step, err)
		}
		got[step] = res.Digest
	}
	t.Cleanup(func() {
		for step := from; step < end; step++ {
			if got[step] != want[step] || want[step] == "" {
				t.Errorf("step %d: digest %s resumed from the standby's copy, %s uninterrupted", step, got[step], want[step])
			}
		}
	})
}

// checkpointMeta reads a checkpoint file's metadata.
func checkpointMeta(file []byte) (map[string]string, error) {
	_, md, err := safetensors.ReadMetadata(file)
	if err != nil {
		return nil, err
	}
	return md.Metadata(), nil
}

// keep parses frames from the network: any bytes are kept or refused
// with an error, never a panic, and at most two steps are kept.
func FuzzStandbyFrame(f *testing.F) {
	good, _ := encodeRelay(map[string]any{"type": "standby", "step": 3, "contexts": [][2]int{{0, 2}, {1, 1}}}, []byte{1, 2, 3})
	f.Add(good)
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	bad, _ := encodeRelay(map[string]any{"type": "standby", "step": 3, "contexts": [][2]int{{0, 9}}}, []byte{1})
	f.Add(bad)
	rows, _, _ := standbyFrame(4, nil, []cluster.LedgerRow{{Step: 3, Digest: "sha256:00", TimeNS: 1}}, nil)
	f.Add(rows)
	withPending, _, _ := standbyFrame(4, map[int][]byte{0: {1}}, nil, &cluster.LedgerRow{Step: 4, Unhashed: true, TimeNS: 1})
	f.Add(withPending)
	badPending, _ := encodeRelay(map[string]any{"type": "standby", "step": 4, "contexts": [][2]int{{0, 1}},
		"pending": map[string]any{"step": 4, "digest": "x"}}, []byte{1})
	f.Add(badPending)
	badRows, _ := encodeRelay(map[string]any{"type": "standby", "step": 1, "ledger": []any{map[string]any{"step": "x"}}}, nil)
	f.Add(badRows)
	f.Fuzz(func(t *testing.T, b []byte) {
		sb := &standbyContexts{}
		for range 3 {
			_ = sb.keep(b)
		}
		if len(sb.steps) > 2 || len(sb.contexts) != len(sb.steps) || len(sb.pending) > len(sb.steps) {
			t.Fatalf("kept steps %v, %d context sets and %d pending rows", sb.steps, len(sb.contexts), len(sb.pending))
		}
		for step, row := range sb.pending {
			if _, ok := sb.contexts[step]; !ok || row.Step != step || row.Validate() != nil {
				t.Fatalf("kept the pending row %+v of step %d with contexts %v", row, step, ok)
			}
		}
	})
}

// A standby's spare process (spare.go) becomes the first process of the
// engine it coordinates with after a takeover, so that engine starts no
// Python process: unless the spare was started otherwise (then it is
// stopped), or its numerics differ from the standby's own process (then a
// fresh process takes its place).
func TestATakeoverEngineAdoptsTheStandbysSpare(t *testing.T) {
	cases := []struct {
		name         string
		env          []string // the spare's extra environment
		otherCanary  bool     // the standby's own process reported another canary digest
		adopted      bool     // adoptSpare took it
		sameProcess  bool     // the engine's first process is the spare's
		spareStopped bool
	}{
		{name: "started as the engine starts its first", adopted: true, sameProcess: true},
		{name: "another environment", env: []string{"EASYSCALE_TEST_OTHER=1"}, spareStopped: true},
		{name: "other numerics than the standby's own process", otherCanary: true, adopted: true, spareStopped: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, ctx := newLocal(t)
			start := l.start
			start.Env = append(append([]string(nil), start.Env...), tc.env...)
			var want *Loaded
			if tc.otherCanary {
				want = &Loaded{Canary: "other"}
			}
			sp := startSpare(ctx, start, l.cfg, want)
			t.Cleanup(func() { _ = sp.Close() })
			adopted := l.adoptSpare(ctx, sp, hclog.NewNullLogger())
			if adopted != tc.adopted {
				t.Fatalf("adopted %v, want %v", adopted, tc.adopted)
			}
			if !adopted {
				_ = sp.Close()
			}
			if err := l.Resize(ctx, 1); err != nil {
				t.Fatal(err)
			}
			<-sp.done
			if sp.res.err != nil {
				t.Fatalf("the spare failed: %v", sp.res.err)
			}
			same := l.Processes()[0] == sp.res.p
			if same != tc.sameProcess {
				t.Fatalf("the engine's first process is the spare's: %v, want %v", same, tc.sameProcess)
			}
			select {
			case <-sp.res.p.done:
				if !tc.spareStopped {
					t.Fatal("the spare's process exited")
				}
			case <-time.After(10 * time.Second):
				if tc.spareStopped {
					t.Fatal("the spare's process still runs 10 s after it was refused")
				}
			}
			if _, err := l.Step(ctx, 0, split(4, 1), nil); err != nil {
				t.Fatalf("a step on the adopted process: %v", err)
			}
		})
	}
}

// After a resume from the checkpoint of step 5 the ledger still holds the
// earlier run's rows 6..10 until the steps are recorded again: the frame
// with the committed contexts, labelled 5 (before the resumed run's first
// step), carries the rows up to 5, the row of the state the standby then
// holds; the frame with the contexts labelled 6 (sent after that step's
// reduce, before its commit) none beyond 5, and the re-recorded row 6
// reaches the standby right after it is recorded (Engine.LedgerRecorded),
// replacing nothing stale.
func TestAStandbyFrameCarriesNoRowNotYetRecordedInThisRun(t *testing.T) {
	digest := map[int64]string{}
	for s := int64(1); s <= 10; s++ {
		digest[s] = "sha256:00" // the earlier run's rows
	}
	var feed cluster.LedgerFeed
	feed.Follow(func(from, to int64, limit int) ([]statedb.LedgerEntry, error) {
		var rows []statedb.LedgerEntry
		for s := max(from, 1); s <= to && s <= 10; s++ {
			rows = append(rows, statedb.LedgerEntry{Step: s, Digest: digest[s], Time: time.Unix(1764000000, s)})
		}
		return rows, nil
	})
	sb := &standbyContexts{}
	send := func(step int64, contexts map[int][]byte, reduced bool) {
		b, ok, rowsErr, err := nextStandbyFrame(&feed, sb, step, contexts, reduced, nil)
		if rowsErr != nil || err != nil {
			t.Fatalf("frame of step %d: %v, %v", step, rowsErr, err)
		}
		if ok {
			if err := sb.keep(b); err != nil {
				t.Fatalf("keeping the frame of step %d: %v", step, err)
			}
		}
	}
	send(5, map[int][]byte{0: {1}}, false) // the committed contexts, before the resumed run's first step
	if n := sb.ledger.Count(10); n != 5 {
		t.Fatalf("the frame with the committed contexts of step 5 brought %d rows, want the 5 up to the resumed checkpoint", n)
	}
	send(6, map[int][]byte{0: {2}}, true) // after the resumed run's first reduce
	if n := sb.ledger.Count(10); n != 5 {
		t.Fatalf("after the frame with the contexts of step 6 the standby holds %d rows, want the 5 up to the resumed checkpoint", n)
	}
	digest[6] = "sha256:01" // step 6 recorded again by this run
	send(6, nil, false)
	rows := sb.ledger.Through(10)
	if len(rows) != 6 || rows[5].Digest != "sha256:01" {
		t.Fatalf("after row 6 was recorded the standby holds %d rows, row 6 %+v; want 6, the new row", len(rows), rows[len(rows)-1])
	}
}

// A frame's ledger row the state database would refuse is left out (it
// would cost the takeover its whole import), and so is a pending row that
// is invalid or of another step: the frame's contexts are kept either way.
func TestAStandbyLeavesOutRowsTheStateDatabaseWouldRefuse(t *testing.T) {
	tests := []struct {
		name    string
		rows    []cluster.LedgerRow
		pending any
		rowsIn  int  // ledger rows kept
		kept    bool // the pending row kept
	}{
		{"valid rows and pending row", []cluster.LedgerRow{{Step: 3, Digest: "sha256:00", TimeNS: 1}},
			&cluster.LedgerRow{Step: 4, Unhashed: true, TimeNS: 2}, 1, true},
		{"an unhashed row with a digest", []cluster.LedgerRow{{Step: 2, Digest: "sha256:00", TimeNS: 1}, {Step: 3, Unhashed: true, Digest: "sha256:00", TimeNS: 1}},
			nil, 1, false},
		{"a row with no digest not marked unhashed", []cluster.LedgerRow{{Step: 3, TimeNS: 1}}, nil, 0, false},
		{"a pending row of another step", nil, &cluster.LedgerRow{Step: 9, Unhashed: true, TimeNS: 2}, 0, false},
		{"an invalid pending row", nil, &cluster.LedgerRow{Step: 4, Workers: -1, Unhashed: true, TimeNS: 2}, 0, false},
		{"a pending row that is not a row", nil, "row", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			header := map[string]any{"type": "standby", "step": 4, "contexts": [][2]int{{0, 1}}}
			if len(tc.rows) > 0 {
				header["ledger"] = tc.rows
			}
			if tc.pending != nil {
				header["pending"] = tc.pending
			}
			b, err := encodeRelay(header, []byte{7})
			if err != nil {
				t.Fatal(err)
			}
			sb := &standbyContexts{}
			if err := sb.keep(b); err != nil {
				t.Fatalf("keep: %v, want the frame kept", err)
			}
			_, kept := sb.pending[4]
			if len(sb.contexts[4]) != 1 || sb.ledger.Count(10) != tc.rowsIn || kept != tc.kept {
				t.Fatalf("kept %d contexts, %d ledger rows, pending row %v; want 1, %d, %v", len(sb.contexts[4]), sb.ledger.Count(10), kept, tc.rowsIn, tc.kept)
			}
		})
	}
}
