package simulator

import (
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// TestAJobRunsAtItsOwnSpeeds checks the trace's optional speeds column: a
// job that lists its speed on a type runs at it instead of the cluster's
// speed table, on any GPU count (the synchronisation term scales too), and
// a job that does not list the type runs at the table's speed.
func TestAJobRunsAtItsOwnSpeeds(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,speeds\n"
	tests := []struct {
		name    string
		row     string
		wantJCT int64
	}{
		{"a 1-GPU job at the table's t4 speed 0.5 takes twice its duration", "a,0,1000,1,,,1,1,\n", 2000},
		{"a 1-GPU job saying t4:1 takes its duration", "a,0,1000,1,,,1,1,t4:1\n", 1000},
		{"a 4-GPU job saying t4:2 takes half its duration", "a,0,1000,4,,,1,4,t4:2\n", 500},
		{"a job listing only another type runs at the table's t4 speed", "a,0,1000,4,,,1,4,v100:3\n", 2000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := trace.Read(strings.NewReader(head + tc.row))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []Policy{Rigid, Elastic} {
				res, err := Run(jobs, Config{GPUs: []GPUGroup{{"t4", 4}}, GPUsPerNode: 4, Policy: p, Speeds: map[string]float64{"t4": 0.5}})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.PerJob) != 1 || res.PerJob[0].End-res.PerJob[0].Submit != tc.wantJCT {
					t.Errorf("%s: per job %+v, want JCT %d s", p, res.PerJob, tc.wantJCT)
				}
			}
		})
	}
}
