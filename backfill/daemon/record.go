package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// Recording is one cycle as `easyscale-backfilld --once --record FILE`
// writes it: the planner snapshot the cycle read from Slurm and the
// planner's decisions on it, and the shrink-to-admit and start-small
// questions the cycle put to the planner with its answers.
// backfill/testdata/replay holds recordings that simulator.Replay,
// ReplayAdmit and ReplayStartSmall run through the simulator's path,
// expecting the same decisions.
type Recording struct {
	// Scenario says what the cluster held (free text).
	Scenario string           `json:"scenario"`
	Snapshot planner.Snapshot `json:"snapshot"`
	// Actions are planner.Plan's decisions on Snapshot, the grows
	// included that the cycle withheld because it changed allocations.
	Actions planner.Actions `json:"actions"`
	// Admit and StartSmall are nil when the cycle asked no such question.
	Admit      *AdmitRecording      `json:"admit,omitempty"`
	StartSmall *StartSmallRecording `json:"start_small,omitempty"`
}

// AdmitRecording is a cycle's shrink-to-admit question
// (planner.AdmitOnNodes) and the answer, nil for no admission.
type AdmitRecording struct {
	Input    planner.NodeAdmitInput `json:"input"`
	Decision *planner.NodeAdmission `json:"decision"`
}

// StartSmallRecording is a cycle's start-small question
// (planner.StartSmallOnNodes) and the answer, nil for none.
type StartSmallRecording struct {
	Input    planner.NodeStartSmallInput `json:"input"`
	Decision *planner.NodeStartSmall     `json:"decision"`
}

// NewRecording returns the recording of cycle report r.
func NewRecording(scenario string, r Report) Recording {
	rec := Recording{Scenario: scenario, Snapshot: r.Snapshot, Actions: r.Planned}
	if len(r.Withheld) > 0 {
		rec.Actions.Grows = append(slices.Clone(r.Planned.Grows), r.Withheld...)
	}
	if r.AdmitAsked != nil {
		rec.Admit = &AdmitRecording{Input: *r.AdmitAsked, Decision: r.AdmitDecided}
	}
	if r.StartSmallAsked != nil {
		rec.StartSmall = &StartSmallRecording{Input: *r.StartSmallAsked, Decision: r.StartSmallDecided}
	}
	return rec
}

// WriteRecording writes r's recording ([NewRecording]) as indented JSON to
// path (mode 0644, replacing it). It holds job ids, users, partitions and
// node names, no comment or path.
func WriteRecording(path, scenario string, r Report) error {
	b, err := json.MarshalIndent(NewRecording(scenario, r), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the cycle's recording: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the cycle's recording (--record): %w", err)
	}
	return nil
}
