package planner

import (
	"math"
	"reflect"
	"testing"
)

// TestFasterGPUsSpeedAJobUpByTheConfiguredRatio checks the synchronisation
// term scales with the GPU's speed: on k GPUs of one type of speed s a job
// runs s times as fast as on k reference GPUs, whatever k. Before the sync
// term scaled, a 32-GPU job on V100 (3.1× a T4) ran only 2.18× as fast.
func TestFasterGPUsSpeedAJobUpByTheConfiguredRatio(t *testing.T) {
	speeds := map[string]float64{"t4": 1.0, "v100": 3.1}
	tests := []struct {
		name       string
		lw, ref, k int
		slow, fast string
		wantRatio  float64
		modelGamma float64
	}{
		{name: "a 32-GPU job on V100 runs 3.1x its T4 rate", lw: 32, ref: 32, k: 32, slow: "t4", fast: "v100", wantRatio: 3.1, modelGamma: 1},
		{name: "a 2-GPU job on V100 runs 3.1x its T4 rate", lw: 4, ref: 2, k: 2, slow: "t4", fast: "v100", wantRatio: 3.1, modelGamma: 1},
		{name: "a job grown past its reference size keeps the ratio", lw: 64, ref: 16, k: 48, slow: "t4", fast: "v100", wantRatio: 3.1, modelGamma: 1},
		{name: "with overlapping compute and sync (gamma 2) the ratio holds", lw: 32, ref: 32, k: 32, slow: "t4", fast: "v100", wantRatio: 3.1, modelGamma: 2},
		{name: "one GPU (no sync) keeps the ratio", lw: 8, ref: 1, k: 1, slow: "t4", fast: "v100", wantRatio: 3.1, modelGamma: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := DefaultModel(tc.lw, tc.ref)
			m.Gamma = tc.modelGamma
			slow, _ := m.Throughput([]SpeedCount{{Speed: speeds[tc.slow], N: tc.k}})
			fast, _ := m.Throughput([]SpeedCount{{Speed: speeds[tc.fast], N: tc.k}})
			if got := fast / slow; math.Abs(got-tc.wantRatio) > 1e-9 {
				t.Errorf("%d GPUs: %s throughput %.4f / %s %.4f = %.4f×, want %.4f×", tc.k, tc.fast, fast, tc.slow, slow, got, tc.wantRatio)
			}
		})
	}
}

// TestMixedTypesSynchroniseAtTheSlowestSpeed checks that on a mix of types
// the all-reduce runs at the slowest GPU's speed: one fast GPU added to
// slow ones shortens compute but not synchronisation.
func TestMixedTypesSynchroniseAtTheSlowestSpeed(t *testing.T) {
	m := DefaultModel(4, 2) // C_ref = 2
	got, _ := m.Throughput([]SpeedCount{{Speed: 2, N: 1}, {Speed: 1, N: 2}})
	// 4 ESTs on speeds {2, 1, 1}: loads 2, 1, 1, bottleneck 1; sync on 3
	// GPUs (0.10 + 0.005)·2 / 1 = 0.21 (at speed 2 it would be 0.105); the
	// reference step on 2 GPUs is 2 + 0.10·2 = 2.2.
	want := 2 * 2.2 / 1.21
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("throughput on {2, 1, 1} = %.6f, want %.6f", got, want)
	}
}

func TestAddSpeedCountMergesEqualSpeeds(t *testing.T) {
	tests := []struct {
		name  string
		sc    []SpeedCount
		speed float64
		n     int
		want  []SpeedCount
	}{
		{"into nothing", nil, 3.1, 8, []SpeedCount{{3.1, 8}}},
		{"into its speed", []SpeedCount{{1, 4}, {3.1, 8}}, 3.1, 2, []SpeedCount{{1, 4}, {3.1, 10}}},
		{"a new speed goes last", []SpeedCount{{3.1, 8}}, 1, 4, []SpeedCount{{3.1, 8}, {1, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AddSpeedCount(tc.sc, tc.speed, tc.n); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("AddSpeedCount(%v, %v, %d) = %v, want %v", tc.sc, tc.speed, tc.n, got, tc.want)
			}
		})
	}
}
