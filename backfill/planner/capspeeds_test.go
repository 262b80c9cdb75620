package planner

import (
	"maps"
	"math"
	"testing"
)

func TestCapSpeeds(t *testing.T) {
	site := map[string]float64{"v100": 3.1, "t4": 1}
	tests := []struct {
		name      string
		own, want map[string]float64
	}{
		{"nothing declared", nil, nil},
		{"within the table: as declared", map[string]float64{"v100": 2, "t4": 0.5}, map[string]float64{"v100": 2, "t4": 0.5}},
		{"the table itself", site, site},
		{"an inflated scale comes down to the table, the ratio kept", map[string]float64{"v100": 100, "t4": 0.01},
			map[string]float64{"v100": 3.1, "t4": 0.00031}},
		{"one type above the table scales every type", map[string]float64{"v100": 1, "t4": 2}, map[string]float64{"v100": 0.5, "t4": 1}},
		{"a type the site does not list counts 1.0", map[string]float64{"a100": 4, "t4": 1}, map[string]float64{"a100": 1, "t4": 0.25}},
		{"a humble declaration is not raised", map[string]float64{"v100": 0.5}, map[string]float64{"v100": 0.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CapSpeeds(tc.own, site)
			if !maps.EqualFunc(got, tc.want, func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*max(a, b) }) {
				t.Errorf("CapSpeeds(%v) = %v, want %v", tc.own, got, tc.want)
			}
			for typ, v := range got {
				ref, ok := site[typ]
				if !ok {
					ref = 1
				}
				if v > ref*(1+1e-12) {
					t.Errorf("type %s at %v, above the table's %v", typ, v, ref)
				}
			}
		})
	}
}
