package planner

import (
	"math"
	"strings"
	"testing"
)

func TestHoldForFaster(t *testing.T) {
	m := DefaultModel(4, 4)
	t4 := []SpeedCount{{Speed: 1 / 3.1, N: 4}}
	v100 := []SpeedCount{{Speed: 1, N: 4}}
	work := 10000.0
	onT4 := RunTime(m, t4, work)
	onV100 := RunTime(m, v100, work)
	for _, tc := range []struct {
		name      string
		anyWait   float64 // seconds until the job fits on any type (on T4s)
		options   []HoldOption
		wantOK    bool
		wantTypes string
	}{
		{"a short wait for V100s beats the T4s", 0, []HoldOption{{Types: []string{"v100"}, Wait: 300, Speeds: v100}}, true, "v100"},
		{"a wait that ends it later than the T4s is not taken", 0, []HoldOption{{Types: []string{"v100"}, Wait: onT4 - onV100 + 1, Speeds: v100}}, false, ""},
		{"within the margin it starts on any type", 0, []HoldOption{{Types: []string{"v100"}, Wait: (onT4 - onV100) * 0.95, Speeds: v100}}, false, ""},
		{"the option that ends first wins", 0, []HoldOption{
			{Types: []string{"v100"}, Wait: 20000, Speeds: v100},
			{Types: []string{"v100", "p100"}, Wait: 100, Speeds: []SpeedCount{{Speed: 0.77, N: 4}}},
		}, true, "v100,p100"},
		{"Slurm's first start on any type is itself a wait", 20000, []HoldOption{{Types: []string{"v100"}, Wait: 25000, Speeds: v100}}, true, "v100"},
		{"a later fast start that ends later is not taken", 0, []HoldOption{{Types: []string{"v100"}, Wait: 25000, Speeds: v100}}, false, ""},
		{"no option", 0, nil, false, ""},
		{"an option without a usable GPU is skipped", 0, []HoldOption{{Types: []string{"v100"}, Wait: 0, Speeds: nil}}, false, ""},
		{"a NaN or negative wait is skipped", 0, []HoldOption{{Types: []string{"v100"}, Wait: math.NaN(), Speeds: v100}, {Types: []string{"v100"}, Wait: -1, Speeds: v100}}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := HoldForFaster(HoldRequest{Model: m, Work: work, Any: HoldOption{Wait: tc.anyWait, Speeds: t4}, Options: tc.options})
			if got := strings.Join(o.Types, ","); ok != tc.wantOK || got != tc.wantTypes {
				t.Fatalf("HoldForFaster = %q, %v; want %q, %v (run time on T4 %.0f s, on V100 %.0f s)", got, ok, tc.wantTypes, tc.wantOK, onT4, onV100)
			}
		})
	}
}
