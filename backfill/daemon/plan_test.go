package daemon

import (
	"slices"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// TestAskedGPUTypesReadsEveryGPURequest: the types a d2 job may be grown
// onto are every type its owner named in any GPU request field, in both
// Slurm series' spellings (a second tester's finding: a type asked per job
// beside an untyped count per node was missed).
func TestAskedGPUTypesReadsEveryGPURequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  slurmcli.Job
		want []string
	}{
		{"none asked", slurmcli.Job{TRESPerNode: "gres:gpu:2"}, nil},
		{"per node, 22.05", slurmcli.Job{TRESPerNode: "gres:gpu:v100:2"}, []string{"v100"}},
		{"per node, 24.11", slurmcli.Job{TRESPerNode: "gres/gpu:v100:2"}, []string{"v100"}},
		{"without a count", slurmcli.Job{TRESPerNode: "gres:gpu:t4"}, []string{"t4"}},
		{"an untyped count per node, the type per job", slurmcli.Job{TRESPerNode: "gres:gpu:1", TRESPerJob: "gres:gpu:v100:1"}, []string{"v100"}},
		{"the type per task", slurmcli.Job{TRESPerNode: "gres:gpu:1", TRESPerTask: "gres:gpu:v100:1"}, []string{"v100"}},
		{"the type per socket", slurmcli.Job{TRESPerSocket: "gres:gpu:t4:1"}, []string{"t4"}},
		{"two types", slurmcli.Job{TRESPerNode: "gres:gpu:v100:1,gres:gpu:t4:1"}, []string{"t4", "v100"}},
		{"a field that does not parse names none", slurmcli.Job{TRESPerNode: "gres:gpu:v100:x", TRESPerJob: "gres:gpu:t4:1"}, []string{"t4"}},
		{"other GRES are not GPUs", slurmcli.Job{TRESPerNode: "gres:shard:v100:2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := askedGPUTypes(tc.job); !slices.Equal(got, tc.want) {
				t.Fatalf("askedGPUTypes = %q, want %q", got, tc.want)
			}
		})
	}
}
