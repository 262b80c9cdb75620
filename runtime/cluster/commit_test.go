package cluster

import (
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// TestWorkerAppliesEachCommitOnceAndChecksTheStep drives session.commit, the
// worker's half of protocol 3's piggy-backed commit: step S's message
// carries step S-1's commit, a redo of S carries none, and a step that does
// not follow the replica's state is refused instead of computed on the
// wrong parameters.
func TestWorkerAppliesEachCommitOnceAndChecksTheStep(t *testing.T) {
	spec, wl := setup(t)
	type msg struct {
		step   int64
		commit int64 // -1: none
	}
	cases := []struct {
		name    string
		at      int64 // the replica's step after admission (-1: unknown)
		msgs    []msg
		applied int    // commits applied
		wantErr string // "" for none
	}{
		{"steps in order", 5, []msg{{5, -1}, {6, 5}, {7, 6}}, 2, ""},
		{"a redo carries no commit", 5, []msg{{5, -1}, {6, 5}, {6, -1}, {7, 6}}, 2, ""},
		{"admitted outside a boundary", -1, []msg{{9, 8}, {10, 9}}, 2, ""},
		{"a commit applied twice", 5, []msg{{6, 5}, {6, 5}}, 1, "commits step 5, this replica is at step 6"},
		{"a lost commit", 5, []msg{{5, -1}, {6, -1}}, 0, "step 6 asked of a replica at step 5"},
		{"a step ahead of the state", 3, []msg{{5, -1}}, 0, "step 5 asked of a replica at step 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := trainer.NewReplica(spec, wl, 1)
			if err != nil {
				t.Fatal(err)
			}
			s := &session{rep: rep, at: tc.at, reduced: make([]float32, rep.NumParams())}
			for i := range s.reduced {
				s.reduced[i] = 1
			}
			before := append([]float32(nil), rep.Params[0].T.Data...)
			var got error
			applied := 0
			for _, m := range tc.msgs {
				sm := &stepMsg{Step: m.step}
				if m.commit >= 0 {
					sm.Commit = &commitMsg{Step: m.commit, LR: 0.5}
				}
				if got = s.commit(sm); got != nil {
					break
				}
				if sm.Commit != nil {
					applied++
				}
			}
			switch {
			case tc.wantErr == "" && got != nil:
				t.Fatalf("unexpected error: %v", got)
			case tc.wantErr != "" && (got == nil || !strings.Contains(got.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", got, tc.wantErr)
			case applied != tc.applied:
				t.Fatalf("%d commits applied, want %d", applied, tc.applied)
			}
			changed := rep.Params[0].T.Data[0] != before[0]
			if changed != (tc.applied > 0) {
				t.Fatalf("parameters changed: %v, with %d commits applied", changed, tc.applied)
			}
		})
	}
}
