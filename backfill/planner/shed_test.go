package planner

import (
	"slices"
	"testing"
)

func TestShedNodes(t *testing.T) {
	v100 := func(name string) NodeShare { return NodeShare{Name: name, Speed: 1, GPUs: 8} }
	p100 := func(name string) NodeShare { return NodeShare{Name: name, Speed: 2.4 / 3.1, GPUs: 8} }
	t4 := func(name string) NodeShare { return NodeShare{Name: name, Speed: 1 / 3.1, GPUs: 8} }
	cases := []struct {
		name    string
		lw, ref int // the job's logical workers and reference GPUs (DefaultModel)
		nodes   []NodeShare
		min     int
		want    []string
	}{
		{"16 logical workers fit on the V100s: the T4 node adds only its slow all-reduce", 16, 16,
			[]NodeShare{v100("a"), t4("b")}, 1, []string{"b"}},
		{"one type: nothing to shed", 16, 16, []NodeShare{v100("a"), v100("b")}, 1, nil},
		{"the minimum keeps the T4 node", 16, 16, []NodeShare{v100("a"), t4("b")}, 16, nil},
		{"64 logical workers load the T4s too: releasing them slows the job", 64, 16,
			[]NodeShare{v100("a"), t4("b")}, 1, nil},
		{"the slowest first, then the next while the rule allows", 8, 8,
			[]NodeShare{t4("c"), v100("a"), p100("b")}, 1, []string{"c", "b"}},
		{"of two equal nodes, the last by name", 8, 8, []NodeShare{v100("a"), t4("b"), t4("d")}, 1, []string{"d", "b"}},
		{"one node: kept whatever its speed", 8, 8, []NodeShare{t4("a")}, 1, nil},
		{"the batch host is kept, however slow", 8, 8, []NodeShare{{Name: "a", Speed: 1 / 3.1, GPUs: 8, Batch: true}, v100("b")}, 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := DefaultModel(c.lw, c.ref)
			got := ShedNodes(m, c.nodes, c.min)
			if !slices.Equal(got, c.want) {
				t.Fatalf("ShedNodes = %v, want %v", got, c.want)
			}
			// the rule's promise: no slower on what is left
			left := slices.DeleteFunc(slices.Clone(c.nodes), func(n NodeShare) bool { return slices.Contains(got, n.Name) })
			before, _ := m.Throughput(shareCounts(c.nodes))
			after, _ := m.Throughput(shareCounts(left))
			if after < before {
				t.Fatalf("throughput %v after shedding %v, %v before", after, got, before)
			}
		})
	}
}
