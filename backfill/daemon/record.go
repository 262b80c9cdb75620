package daemon

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// Recording is one cycle as `easyscale-backfilld --once --record FILE`
// writes it: the planner snapshot the cycle read from Slurm and the
// decisions it applied. backfill/testdata/replay holds recordings that
// simulator.Replay runs through the simulator's path, expecting the same
// decisions.
type Recording struct {
	// Scenario says what the cluster held (free text).
	Scenario string           `json:"scenario"`
	Snapshot planner.Snapshot `json:"snapshot"`
	Actions  planner.Actions  `json:"actions"`
}

// WriteRecording writes r's snapshot and decisions as indented JSON to
// path (mode 0644, replacing it). The snapshot holds job ids, users and
// node names, no comment or path.
func WriteRecording(path, scenario string, r Report) error {
	b, err := json.MarshalIndent(Recording{Scenario: scenario, Snapshot: r.Snapshot, Actions: r.Planned}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the cycle's recording: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the cycle's recording (--record): %w", err)
	}
	return nil
}
