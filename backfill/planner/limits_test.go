package planner

import "testing"

func TestGPUBounds(t *testing.T) {
	tests := []struct {
		name  string
		shape ElasticShape
		want  ElasticBounds
	}{
		{"the cap is the node range's maximum times the GPUs per node",
			ElasticShape{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 64, BaseGPUs: 4, BaseNodes: 1},
			ElasticBounds{GPUsPerNode: 4, LogicalWorkers: 64, MinGPUs: 4, MaxGPUs: 16}},
		{"the cap is at most the logical workers: every GPU needs one",
			ElasticShape{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 6, BaseGPUs: 2, BaseNodes: 1},
			ElasticBounds{GPUsPerNode: 2, LogicalWorkers: 6, MinGPUs: 2, MaxGPUs: 6}},
		{"a job that declared no logical workers runs one per own GPU and is not grown",
			ElasticShape{MinNodes: 1, MaxNodes: 4, BaseGPUs: 2, BaseNodes: 2},
			ElasticBounds{GPUsPerNode: 1, LogicalWorkers: 2, MinGPUs: 1, MaxGPUs: 2}},
		{"the cap never falls below the job's own allocation",
			ElasticShape{MinNodes: 1, MaxNodes: 2, LogicalWorkers: 3, BaseGPUs: 4, BaseNodes: 1},
			ElasticBounds{GPUsPerNode: 4, LogicalWorkers: 3, MinGPUs: 4, MaxGPUs: 4}},
		{"the minimum is the request's minimum nodes times the GPUs per node",
			ElasticShape{MinNodes: 2, MaxNodes: 3, LogicalWorkers: 24, BaseGPUs: 12, BaseNodes: 3},
			ElasticBounds{GPUsPerNode: 4, LogicalWorkers: 24, MinGPUs: 8, MaxGPUs: 12}},
		{"GPUs per node round down and are at least one",
			ElasticShape{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 8, BaseGPUs: 1, BaseNodes: 2},
			ElasticBounds{GPUsPerNode: 1, LogicalWorkers: 8, MinGPUs: 1, MaxGPUs: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := GPUBounds(tc.shape); got != tc.want {
				t.Errorf("GPUBounds(%+v) = %+v, want %+v", tc.shape, got, tc.want)
			}
		})
	}
}

// TestGPUBoundsHoldTheirInvariants: for every small shape, the bounds are
// ordered, the cap never exceeds the logical workers unless the job's own
// allocation does, and never the node range's maximum in GPUs.
func TestGPUBoundsHoldTheirInvariants(t *testing.T) {
	for minN := 1; minN <= 3; minN++ {
		for maxN := minN; maxN <= 5; maxN++ {
			for lw := 0; lw <= 12; lw++ {
				for nodes := 1; nodes <= maxN; nodes++ {
					for per := 1; per <= 4; per++ {
						s := ElasticShape{MinNodes: minN, MaxNodes: maxN, LogicalWorkers: lw, BaseGPUs: nodes * per, BaseNodes: nodes}
						b := GPUBounds(s)
						if b.MinGPUs < 1 || b.MinGPUs > b.MaxGPUs || b.MaxGPUs < s.BaseGPUs {
							t.Fatalf("%+v: bounds %+v out of order", s, b)
						}
						if b.MaxGPUs > max(s.BaseGPUs, b.LogicalWorkers) || b.MaxGPUs > max(s.BaseGPUs, maxN*per) {
							t.Fatalf("%+v: cap %d above the logical workers %d or the range's %d GPUs", s, b.MaxGPUs, b.LogicalWorkers, maxN*per)
						}
					}
				}
			}
		}
	}
}
