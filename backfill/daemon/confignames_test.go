package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// A configuration naming a partition or node sinfo does not list, or
// managing no node at all, runs and does nothing; the daemon says which
// key names what (a tester's `--once --dry-run` passed silently with
// partitions = ["nosuch"] and nodes = ["n9"]).
func TestConfigNamesSlurmDoesNotListAreReported(t *testing.T) {
	for _, c := range []struct {
		name, toml string
		want       []string // substrings of the problems, in order; nil: none
	}{
		{name: "the defaults match the fake cluster", toml: ""},
		{name: "a partition that does not exist", toml: "partitions = [\"normal\", \"nosuch\"]\n",
			want: []string{`partitions names partition "nosuch", which sinfo does not list (it lists low, normal)`}},
		{name: "an extra partition that does not exist", toml: "[extra]\npartition = \"scavenge\"\n",
			want: []string{`extra.partition names partition "scavenge"`}},
		{name: "a node that does not exist, and then none is managed", toml: "nodes = [\"n9\"]\n",
			want: []string{`nodes names node "n9", which sinfo does not list`, "no node is managed"}},
		{name: "GPU types none of the nodes has", toml: "gpu_types = [\"a100\"]\n[speeds]\na100 = 5.0\n",
			want: []string{"no node is managed"}},
		// helper 98's: a speed spelt in another case than the nodes' GRES
		// type passed silently and the default speed applied
		{name: "a speed whose GPU type matches the nodes' but for its case", toml: "[speeds]\nV100 = 4.0\nt4 = 1.0\n",
			want: []string{`speeds.V100 names no node's GPU type, but nodes have "v100": Slurm's GRES types are case-sensitive`}},
		{name: "not when the nodes' spelling is set too", toml: "[speeds]\nV100 = 4.0\nv100 = 4.0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			td := newTestDaemon(t, c.toml)
			v, err := td.snap.Snapshot(context.Background(), td.now)
			if err != nil {
				t.Fatal(err)
			}
			got := td.configMismatches(v)
			if len(got) != len(c.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d is %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// Each problem is logged once while it stays, not every cycle.
func TestConfigMismatchesAreLoggedOnceWhileTheyStay(t *testing.T) {
	td := newTestDaemon(t, "partitions = [\"normal\", \"nosuch\"]\n")
	var logs strings.Builder
	td.log = hclog.New(&hclog.LoggerOptions{Output: &logs})
	for range 3 {
		td.cycle(t)
	}
	if got := strings.Count(logs.String(), `partition \"nosuch\"`); got != 1 {
		t.Errorf("logged %d times over 3 cycles, want once:\n%s", got, logs.String())
	}
}
