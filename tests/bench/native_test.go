package main

import (
	"strings"
	"testing"
)

func TestParseBenchMetrics(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     map[string]map[string]float64
	}{
		{name: "every value unit pair of a benchmark line is kept, the GOMAXPROCS suffix dropped",
			in:   "goos: linux\nBenchmarkStep/est-2   10  56448744 ns/op  38000000 min-cpu-ns/step  40000000 min-ns/step\nPASS\n",
			want: map[string]map[string]float64{"BenchmarkStep/est": {"ns/op": 56448744, "min-cpu-ns/step": 38e6, "min-ns/step": 40e6}}},
		{name: "with GOMAXPROCS 1 there is no suffix, and a dash not followed by a number stays",
			in:   "BenchmarkStepCharLM/est   10  2e8 ns/op\nBenchmarkGemm/nn-big   3  12 ns/op\n",
			want: map[string]map[string]float64{"BenchmarkStepCharLM/est": {"ns/op": 2e8}, "BenchmarkGemm/nn-big": {"ns/op": 12}}},
		{name: "lines that are not results are skipped",
			in: "BenchmarkStep/est\nok  	pkg	1.2s\n", want: map[string]map[string]float64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseBenchMetrics(strings.NewReader(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for name, units := range c.want {
				for u, v := range units {
					if got[name][u] != v {
						t.Errorf("%s %s: got %v, want %v (all: %v)", name, u, got[name][u], v, got)
					}
				}
			}
		})
	}
}

func TestParseBenchRunsKeepsEveryCountRun(t *testing.T) {
	in := "BenchmarkStepSwitch   40  1 ns/op  300 est-min-cpu-ns/step\nBenchmarkStepSwitch   40  1 ns/op  200 est-min-cpu-ns/step\n"
	runs, err := parseBenchRuns(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := runs["BenchmarkStepSwitch"]
	if len(got) != 2 || got[0]["est-min-cpu-ns/step"] != 300 || got[1]["est-min-cpu-ns/step"] != 200 {
		t.Fatalf("runs %v, want the two lines in order", runs)
	}
}

func TestNativeRatiosTakeTheLargerModelRatio(t *testing.T) {
	native := stepTimes{cpu: map[string]float64{"lenet": 30, "charlm": 100}, wall: map[string]float64{"lenet": 40, "charlm": 120}}
	torch := stepTimes{cpu: map[string]float64{"lenet": 20, "charlm": 400}, wall: map[string]float64{"lenet": 20, "charlm": 400}}
	figs, err := nativeRatios(native, torch)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range figs {
		got[f.Name] = f.Value
	}
	for name, want := range map[string]float64{"native_vs_torch_step_ratio_lenet": 1.5, "native_vs_torch_step_ratio_charlm": 0.25,
		"native_vs_torch_step_ratio": 1.5, "native_vs_torch_step_wall_ratio_lenet": 2} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if _, err := nativeRatios(native, stepTimes{cpu: map[string]float64{}, wall: map[string]float64{}}); err == nil {
		t.Error("missing torch step times gave no error")
	}
}
