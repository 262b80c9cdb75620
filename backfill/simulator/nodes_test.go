package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

func TestReadNodes(t *testing.T) {
	tests := []struct {
		name, in string
		want     []NodeSpec
		errHas   string
	}{
		{"openb layout, 0-GPU nodes left out", "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,0,\nn1,96000,786432,8,G2\nn2,64000,262144,2,T4\nn3,1,1,1,V100M16\n",
			[]NodeSpec{{"g2", 8}, {"t4", 2}, {"v100m16", 1}}, ""},
		{"columns in any order", "model,gpu\nA10,1\n", []NodeSpec{{"a10", 1}}, ""},
		{"missing column", "sn,gpu\nn0,1\n", nil, "needs the columns gpu and model"},
		{"bad count", "gpu,model\nx,T4\n", nil, "line 2: column gpu"},
		{"negative count", "gpu,model\n-1,T4\n", nil, "line 2: column gpu"},
		{"GPU node without model", "gpu,model\n1,T4\n2,\n", nil, "line 3: column model"},
		{"model with a colon", "gpu,model\n1,T4:x\n", nil, "column model"},
		{"short row", "sn,gpu,model\nn0,1\n", nil, "line 2: 2 cells"},
		{"no GPU node", "gpu,model\n0,\n", nil, "no node with a GPU"},
		{"empty file", "", nil, "header row"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadNodes(strings.NewReader(tt.in))
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func FuzzReadNodes(f *testing.F) {
	f.Add("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,0,\nn1,1,1,8,G2\n")
	f.Add("gpu,model\n3,T4\n")
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := ReadNodes(strings.NewReader(in))
		if err != nil {
			return
		}
		total := 0
		for _, nd := range nodes {
			if nd.GPUs < 1 || nd.Type == "" || strings.ContainsAny(nd.Type, " ,:") {
				t.Fatalf("bad node %+v from %q", nd, in)
			}
			total += nd.GPUs
		}
		if total > MaxGPUs || len(nodes) > MaxNodes {
			t.Fatalf("%d GPUs on %d nodes: over the bounds", total, len(nodes))
		}
	})
}

// TestNodeListGivesMixedNodeSizes checks that a cluster given node by node
// keeps each node's size, type and order, and that the type rules see the
// per-type totals of the list.
func TestNodeListGivesMixedNodeSizes(t *testing.T) {
	nodes := []NodeSpec{{"t4", 2}, {"g2", 8}, {"t4", 4}}
	s, err := newSim(Config{Nodes: nodes, Policy: Rigid})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, nd := range s.nodes {
		got = append(got, nd.name+":"+string(rune('0'+nd.total)))
	}
	if want := "t4-0:2 g2-0:8 t4-1:4"; strings.Join(got, " ") != want {
		t.Fatalf("nodes %v, want %s", got, want)
	}
	if s.total != 14 {
		t.Fatalf("total %d, want 14", s.total)
	}
	// A d1 elastic job asking for 6 GPUs fits only in t4 (6 GPUs on two
	// nodes) or g2; one asking for 7 fits only on g2; one asking for 9 in no
	// single type, so it is skipped.
	jobs := []trace.Job{job("a", 0, 100, 7), job("b", 0, 100, 9)}
	jobs[0].MinGPUs, jobs[0].MaxGPUs, jobs[0].LogicalWorkers = 7, 7, 7
	jobs[1].MinGPUs, jobs[1].MaxGPUs, jobs[1].LogicalWorkers = 9, 9, 9
	res, err := Run(jobs, Config{Nodes: nodes, Policy: Elastic})
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 1 || res.Skipped != 1 || res.MeanJCT != 100 {
		t.Fatalf("jobs %d skipped %d mean JCT %v, want 1, 1, 100", res.Jobs, res.Skipped, res.MeanJCT)
	}
}

func TestRunRefusesBadNodeLists(t *testing.T) {
	for name, cfg := range map[string]Config{
		"both GPUs and nodes": {GPUs: []GPUGroup{{"v100", 4}}, GPUsPerNode: 4, Nodes: []NodeSpec{{"t4", 1}}},
		"node without GPUs":   {Nodes: []NodeSpec{{"t4", 0}}},
		"node without type":   {Nodes: []NodeSpec{{"", 1}}},
		"speed for no type":   {Nodes: []NodeSpec{{"t4", 1}}, Speeds: map[string]float64{"v100": 1}},
	} {
		if _, err := Run(nil, cfg); err == nil || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}

func TestMainNodesFlag(t *testing.T) {
	dir := t.TempDir()
	nodes := filepath.Join(dir, "nodes.csv")
	tr := filepath.Join(dir, "trace.csv")
	if err := os.WriteFile(nodes, []byte("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,0,\nn1,1,1,8,G2\nn2,1,1,2,T4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tr, []byte("job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training\na,0,100,8,,,1\nb,0,100,2,,,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"--trace", tr, "--nodes", nodes, "--speeds", "t4:0.5", "--policy", "rigid", "--json", "-"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.TotalGPUs != 10 || res.Jobs != 2 || res.MeanQueue != 0 {
		t.Fatalf("total %d jobs %d mean queue %v, want 10, 2, 0", res.TotalGPUs, res.Jobs, res.MeanQueue)
	}
	for _, args := range [][]string{
		{"--trace", tr, "--nodes", nodes, "--gpus", "v100:4", "--policy", "rigid", "--json", "-"},
		{"--trace", tr, "--nodes", nodes, "--gpus-per-node", "4", "--policy", "rigid", "--json", "-"},
		{"--trace", tr, "--nodes", filepath.Join(dir, "missing.csv"), "--policy", "rigid", "--json", "-"},
	} {
		errb.Reset()
		if code := Main(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--nodes") {
			t.Errorf("%v: exit %d, stderr %q: want 2 naming --nodes", args, code, errb.String())
		}
	}
}
