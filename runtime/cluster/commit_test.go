package cluster

import (
	"math"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

// TestWorkerAppliesEachCommitOnceAndChecksTheStep drives session.commit, the
// worker's half of protocol 3's piggy-backed commit: step S's message
// carries step S-1's commit, a redo of S carries none, and a step that does
// not follow the replica's state is refused instead of computed on the
// wrong parameters, as is the commit of a step whose all-reduce result
// never reached the worker (a rank other than the last reports before it).
// After each step the worker applies its update ahead of the commit
// (applyAhead), as it does in a session: whatever the messages, its
// replica must end as if each accepted commit had been applied once, at
// the commit's rate.
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
		lost    int64  // the step whose first all-reduce result does not arrive (-1: none)
		applied int    // commits applied
		wantErr string // "" for none
		otherLR bool   // the coordinator commits at half the schedule's rate
	}{
		{"steps in order", 5, []msg{{5, -1}, {6, 5}, {7, 6}}, -1, 2, "", false},
		{"a redo carries no commit", 5, []msg{{5, -1}, {6, 5}, {6, -1}, {7, 6}}, -1, 2, "", false},
		{"admitted outside a boundary", -1, []msg{{9, -1}, {10, 9}}, -1, 1, "", false},
		{"a commit of a step not computed here", -1, []msg{{9, 8}}, -1, 0, "commits step 8, whose all-reduce result never reached this worker", false},
		{"a commit whose result did not arrive", 5, []msg{{5, -1}, {6, 5}}, 5, 0, "commits step 5, whose all-reduce result never reached this worker", false},
		{"a redo after a result that did not arrive", 5, []msg{{5, -1}, {5, -1}, {6, 5}}, 5, 1, "", false},
		{"a commit applied twice", 5, []msg{{5, -1}, {6, 5}, {6, 5}}, -1, 1, "commits step 5, this replica is at step 6", false},
		{"a lost commit", 5, []msg{{5, -1}, {6, -1}}, -1, 0, "step 6 asked of a replica at step 5", false},
		{"a step ahead of the state", 3, []msg{{5, -1}}, -1, 0, "step 5 asked of a replica at step 3", false},
		{"a commit at another rate than the one applied ahead", 5, []msg{{5, -1}, {6, 5}, {7, 6}}, -1, 2, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			replica := func() *trainer.Replica {
				rep, err := trainer.NewReplica(spec, wl, 1)
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			const horizon = 100
			s := &session{spec: spec, rep: replica(), backup: replica(), horizon: horizon, at: tc.at,
				reduced: make([]float32, replica().NumParams()), reducedAt: -1, ahead: -1}
			for i := range s.reduced {
				s.reduced[i] = float32(i%5) - 2
			}
			ref := replica() // applies each accepted commit once
			var got error
			applied := 0
			for _, m := range tc.msgs {
				sm := &stepMsg{Step: m.step}
				if m.commit >= 0 {
					lr := trainer.LearningRate(spec, horizon, m.commit)
					if tc.otherLR {
						lr /= 2
					}
					sm.Commit = &commitMsg{Step: m.commit, LR: lr}
				}
				if _, got = s.commit(sm); got != nil {
					break
				}
				if sm.Commit != nil {
					applied++
					ref.Apply(s.reduced, sm.Commit.LR)
				}
				// The step is computed and all-reduced: its result arrives
				// unless the case says it does not; its update is applied
				// ahead.
				s.reducedAt = -1
				if m.step != tc.lost {
					s.reducedAt = m.step
				} else {
					tc.lost = -1
				}
				s.applyAhead(m.step)
			}
			switch {
			case tc.wantErr == "" && got != nil:
				t.Fatalf("unexpected error: %v", got)
			case tc.wantErr != "" && (got == nil || !strings.Contains(got.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", got, tc.wantErr)
			case applied != tc.applied:
				t.Fatalf("%d commits applied, want %d", applied, tc.applied)
			}
			committed := s.rep // the replica without the update applied ahead of a commit still to come
			if s.ahead >= 0 {
				committed = s.backup
			}
			for i, p := range committed.Params {
				for j, v := range p.T.Data {
					if w := ref.Params[i].T.Data[j]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("%s[%d] = %v, applying the %d accepted commits once gives %v", p.Name, j, v, applied, w)
					}
				}
			}
		})
	}
}
