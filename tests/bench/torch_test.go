package main

import (
	"strings"
	"testing"
)

func TestParseFigures(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []figure
		err      string
	}{
		{name: "name value unit lines become figures, blank lines are skipped",
			in:   "torch_est_overhead_pct_lenet 1.25 %\n\ntorch_step_ms_p2 38.6 ms\n",
			want: []figure{{"torch_est_overhead_pct_lenet", 1.25, "%"}, {"torch_step_ms_p2", 38.6, "ms"}}},
		{name: "a negative value is a figure", in: "torch_est_overhead_pct -0.4 %", want: []figure{{"torch_est_overhead_pct", -0.4, "%"}}},
		{name: "a line of another shape is an error naming it", in: "ok 1 %\nTraceback (most recent call last):", err: `line 2 "Traceback (most recent call last):"`},
		{name: "a value that is not a number is an error", in: "x one %", err: `line 1 "x one %": value`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseFigures(strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("figure %d: got %v, want %v", i, got[i], c.want[i])
				}
			}
		})
	}
}
