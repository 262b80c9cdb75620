package simulator

import (
	"slices"
	"testing"

	"gonum.org/v1/plot/plotter"
)

func TestStepPoints(t *testing.T) {
	tests := []struct {
		name   string
		series []Sample
		end    int64
		want   plotter.XYs
	}{
		{
			name:   "an allocation that stays flat for ten hours then drops is drawn flat then straight down",
			series: []Sample{{T: 0, Allocated: 8}, {T: 36000, Allocated: 0}},
			end:    36000,
			want:   plotter.XYs{{X: 0, Y: 8}, {X: 10, Y: 8}, {X: 10, Y: 0}},
		},
		{
			name:   "the last value holds until the end",
			series: []Sample{{T: 3600, Allocated: 2}, {T: 7200, Allocated: 4}},
			end:    10800,
			want:   plotter.XYs{{X: 0, Y: 2}, {X: 1, Y: 2}, {X: 1, Y: 4}, {X: 2, Y: 4}},
		},
		{name: "no samples give no points"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alloc, lent := stepPoints(tc.series, tc.end)
			if !slices.Equal(alloc, tc.want) || len(lent) != len(alloc) {
				t.Errorf("allocation points %v (%d lent points), want %v", alloc, len(lent), tc.want)
			}
			for i := 1; i < len(alloc); i++ {
				if alloc[i].X != alloc[i-1].X && alloc[i].Y != alloc[i-1].Y {
					t.Errorf("segment %v → %v is a slope, not a step", alloc[i-1], alloc[i])
				}
			}
		})
	}
}
