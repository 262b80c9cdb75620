package simulator

import "testing"

func TestNodeWeightsRankGPUTypesBySpeed(t *testing.T) {
	speeds := map[string]float64{"v100": 3.1, "p100": 2.4, "t4": 1, "k80": 1}
	tests := []struct {
		w    NodeWeights
		want map[float64]int
	}{
		{WeightsFastestFirst, map[float64]int{3.1: 1, 2.4: 2, 1: 3}},
		{WeightsSlowestFirst, map[float64]int{3.1: 3, 2.4: 2, 1: 1}},
		{WeightsEqual, map[float64]int{3.1: 1, 2.4: 1, 1: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.w.String(), func(t *testing.T) {
			for speed, want := range tc.want {
				if got := tc.w.weight(speed, speeds); got != want {
					t.Errorf("weight of a node at speed %v = %d, want %d", speed, got, want)
				}
			}
			if w, err := ParseNodeWeights(tc.w.String()); err != nil || w != tc.w {
				t.Errorf("ParseNodeWeights(%q) = %v, %v", tc.w.String(), w, err)
			}
		})
	}
	if _, err := ParseNodeWeights("fast"); err == nil {
		t.Error(`ParseNodeWeights("fast") accepted an unknown name`)
	}
}

// TestNodeWeightsDecideWhereARigidJobStarts: an untyped 4-GPU job on a
// cluster of one V100 and one T4 node starts on the V100s with faster
// types weighted first and on the T4s with slower types first; with equal
// weights Slurm's node order and free GPUs decide (the T4 node is listed
// first here).
func TestNodeWeightsDecideWhereARigidJobStarts(t *testing.T) {
	jobs := readJobs(t, "A,0,100,4,,,1,4,4,4,d2\n")
	for _, tc := range []struct {
		w    NodeWeights
		want string
	}{{WeightsFastestFirst, "v100"}, {WeightsSlowestFirst, "t4"}, {WeightsEqual, "t4"}} {
		t.Run(tc.w.String(), func(t *testing.T) {
			res, err := Run(jobs, Config{GPUs: []GPUGroup{{"t4", 8}, {"v100", 8}}, GPUsPerNode: 8,
				Speeds: map[string]float64{"v100": 3.1, "t4": 1}, Policy: Rigid, NodeWeights: tc.w})
			if err != nil {
				t.Fatal(err)
			}
			if a := startOf(t, res, "A"); a.StartTypes != tc.want {
				t.Errorf("A started on %q, want %q", a.StartTypes, tc.want)
			}
		})
	}
}
