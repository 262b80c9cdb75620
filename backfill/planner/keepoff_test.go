package planner

import (
	"fmt"
	"slices"
	"testing"
)

// The paper's cluster by whole nodes of 8 (4 V100, 2 P100, 2 T4 nodes) at
// the issue's speeds 3.1 / 2.4 / 1: a job may be kept off a pinned type
// only when the rest can hold it and its pace there is at least
// NearlyAsWell of its best.
func TestKeepOff(t *testing.T) {
	paper := []TypeOffer{{"v100", 4, 3.1}, {"p100", 2, 2.4}, {"t4", 2, 1}}
	for _, tc := range []struct {
		name string
		q    KeepOffRequest
		want []string
	}{
		{"no job waits pinned", KeepOffRequest{Need: 1, Types: paper}, nil},
		{"a V100-pinned job waits: P100 serves a 2-node job at 2.4/3.1 = 0.77 of its best",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"v100"}}, []string{"v100"}},
		{"a P100-pinned job waits: V100 is faster still",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"p100"}}, []string{"p100"}},
		{"a T4-pinned job waits and the job fits on V100 and P100",
			KeepOffRequest{Need: 6, Types: paper, Pinned: []string{"t4"}}, []string{"t4"}},
		{"a V100-pinned job waits but the job needs more nodes than P100 and T4 hold",
			KeepOffRequest{Need: 5, Types: paper, Pinned: []string{"v100"}}, nil},
		{"a V100-pinned job waits and P100 alone cannot hold 3 nodes: its pace would be T4's 1/3.1",
			KeepOffRequest{Need: 3, Types: paper, Pinned: []string{"v100"}}, nil},
		{"a stricter fraction refuses P100 at 0.77",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"v100"}, NearlyAsWell: 0.8}, nil},
		{"a d1 job: the fastest single type that holds it",
			KeepOffRequest{Need: 2, OneType: true, Types: paper, Pinned: []string{"v100"}}, []string{"v100"}},
		{"a d1 job of 3 nodes: only V100 holds it in one type",
			KeepOffRequest{Need: 3, OneType: true, Types: paper, Pinned: []string{"v100"}}, nil},
		{"the job's own speeds: slow on P100", KeepOffRequest{Need: 2, Types: []TypeOffer{{"v100", 4, 3.1}, {"p100", 2, 1.5}, {"t4", 2, 1}},
			Pinned: []string{"v100"}}, nil},
		{"every type it may use is pinned", KeepOffRequest{Need: 1, Types: paper, Pinned: []string{"v100", "p100", "t4"}}, nil},
		{"two pinned types, repeated; T4 alone is too slow",
			KeepOffRequest{Need: 1, Types: paper, Pinned: []string{"v100", "p100", "v100"}}, nil},
		{"two pinned types, the job slow everywhere but T4",
			KeepOffRequest{Need: 1, Types: []TypeOffer{{"v100", 4, 1}, {"p100", 2, 1}, {"t4", 2, 1}}, Pinned: []string{"v100", "p100", "v100"}},
			[]string{"p100", "v100"}},
		{"a pinned type the job may not use", KeepOffRequest{Need: 1, Types: paper[1:], Pinned: []string{"v100"}}, nil},
		{"a job of one type", KeepOffRequest{Need: 1, Types: paper[:1], Pinned: []string{"v100"}}, nil},
		{"no capacity elsewhere", KeepOffRequest{Need: 1, Types: []TypeOffer{{"v100", 4, 3.1}, {"p100", 0, 2.4}}, Pinned: []string{"v100"}}, nil},
		{"a malformed request", KeepOffRequest{Need: 0, Types: paper, Pinned: []string{"v100"}}, nil},
		{"the job would leave the V100s (30 min) before the pinned job could start there (1 h)",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"v100"}, PinnedStart: map[string]float64{"v100": 3600},
				Run: map[string]float64{"v100": 1800, "p100": 1800, "t4": 1800}}, nil},
		{"it would end exactly when the pinned job could start",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"v100"}, PinnedStart: map[string]float64{"v100": 3600},
				Run: map[string]float64{"v100": 3600}}, nil},
		{"it would still run when the pinned job could start",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"v100"}, PinnedStart: map[string]float64{"v100": 3600},
				Run: map[string]float64{"v100": 3601}}, []string{"v100"}},
		{"the pinned job's start is not known",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"v100"}, Run: map[string]float64{"v100": 1800}}, []string{"v100"}},
		{"the job's run there is not known",
			KeepOffRequest{Need: 2, Types: paper, Pinned: []string{"v100"}, PinnedStart: map[string]float64{"v100": 3600},
				Run: map[string]float64{"p100": 1800}}, []string{"v100"}},
		{"of two pinned types, it leaves one in time and is kept off the other",
			KeepOffRequest{Need: 1, Types: []TypeOffer{{"v100", 4, 1}, {"p100", 2, 1}, {"t4", 2, 1}}, Pinned: []string{"v100", "p100"},
				PinnedStart: map[string]float64{"v100": 600, "p100": 7200}, Run: map[string]float64{"v100": 3600, "p100": 3600, "t4": 3600}},
			[]string{"v100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeepOff(tc.q); !slices.Equal(got, tc.want) {
				t.Errorf("KeepOff = %q, want %q", got, tc.want)
			}
		})
	}
}

// A d2 job asking 2 nodes on the issue's cluster (V100 3.1, P100 2.4, T4
// 1) while a job pinned to V100 waits: P100 serves it at 0.77 of its best,
// so it is kept off V100, for at most its run time.
func ExampleKeepOff() {
	types := KeepOff(KeepOffRequest{Need: 2, Pinned: []string{"v100"},
		Types: []TypeOffer{{Type: "v100", Capacity: 4, Speed: 3.1}, {Type: "p100", Capacity: 2, Speed: 2.4}, {Type: "t4", Capacity: 2, Speed: 1}}})
	fmt.Println(types, KeepOffExpired(3000, 3600), KeepOffExpired(3601, 3600))
	// Output: [v100] false true
}
