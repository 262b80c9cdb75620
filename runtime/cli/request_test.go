package cli

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
)

// TestTheStatusCommentsRequestTakesTheJobFilesSpeedsUnlessTheSubmissionGaveSome
// checks what the runtime writes back into the job comment on Slurm: the
// submission's speeds (EASYSCALE_SPEEDS, from easyscale-sbatch --speeds)
// win, the job file's [speeds] fill in, and the logical workers come from
// the job file when the submission has none.
func TestTheStatusCommentsRequestTakesTheJobFilesSpeedsUnlessTheSubmissionGaveSome(t *testing.T) {
	spec := &jobspec.Spec{LogicalWorkers: 8, Speeds: map[string]float64{"t4": 0.4, "v100": 1}}
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"the job file's speeds when the submission has none", map[string]string{elastic.EnvElastic: "1-4"},
			"es step=1/10 workers=2/8 d1 req=1-4 speeds=t4:0.4,v100:1"},
		{"the submission's speeds win", map[string]string{elastic.EnvElastic: "1-4", elastic.EnvSpeeds: "a100:1.2"},
			"es step=1/10 workers=2/8 d1 req=1-4 speeds=a100:1.2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{elastic.EnvElastic, elastic.EnvLogicalWorkers, elastic.EnvDeterminism, elastic.EnvSpeeds} {
				t.Setenv(k, tc.env[k])
			}
			s := &slurmRun{log: hclog.NewNullLogger()}
			req := s.request(spec)
			got := elastic.Comment{Request: req, Progress: &elastic.Progress{Step: 1, TotalSteps: 10, Workers: 2}}.String()
			if got != tc.want {
				t.Fatalf("status comment %q, want %q", got, tc.want)
			}
		})
	}
}
