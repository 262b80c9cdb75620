package simulator

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// NodeSpec is one node of a cluster given node by node (Config.Nodes):
// GPUs (≥ 1) of one Type.
type NodeSpec struct {
	Type string
	GPUs int
}

// ReadNodes reads a node list for --nodes: a CSV file with a header row
// naming at least the columns gpu (GPUs on the node, a whole number ≥ 0)
// and model (the GPU model), in any position, as the Alibaba v2023 openb
// node list openb_node_list_all_node.csv has them (sn, cpu_milli,
// memory_mib, gpu, model). Each node with at least one GPU becomes a
// NodeSpec whose Type is the model in lower case, as a GRES type name
// (openb's "V100M16" is GPU type v100m16); nodes with 0 GPUs hold nothing
// the simulator schedules and are left out. Errors name the line and the
// column: a missing column, a count that is not a whole number in
// [0, MaxGPUs], a GPU node without a model or with a model holding a
// space, comma or colon (no GRES type name can), more than MaxGPUs GPUs or
// MaxNodes GPU nodes in all, or no GPU node at all.
func ReadNodes(r io.Reader) ([]NodeSpec, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("reading the header row: %w", err)
	}
	gpuCol, modelCol := slices.Index(head, "gpu"), slices.Index(head, "model")
	if gpuCol < 0 || modelCol < 0 {
		return nil, fmt.Errorf("line 1: the header %q needs the columns gpu and model (as openb_node_list_all_node.csv has)", strings.Join(head, ","))
	}
	var out []NodeSpec
	total := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil { // a *csv.ParseError names the line
			return nil, fmt.Errorf("reading the node list: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if gpuCol >= len(rec) || modelCol >= len(rec) {
			return nil, fmt.Errorf("line %d: %d cells, the gpu and model columns need %d", line, len(rec), max(gpuCol, modelCol)+1)
		}
		n, err := strconv.Atoi(strings.TrimSpace(rec[gpuCol]))
		if err != nil || n < 0 || n > MaxGPUs {
			return nil, fmt.Errorf("line %d: column gpu %q: write the node's GPU count, 0 to %d", line, rec[gpuCol], MaxGPUs)
		}
		if n == 0 {
			continue
		}
		model := strings.TrimSpace(rec[modelCol])
		if model == "" || strings.ContainsAny(model, " \t,:") {
			return nil, fmt.Errorf("line %d: column model %q: a node with GPUs needs a model name without spaces, commas or colons", line, rec[modelCol])
		}
		if total += n; total > MaxGPUs {
			return nil, fmt.Errorf("line %d: more than %d GPUs in all", line, MaxGPUs)
		}
		if len(out) == MaxNodes {
			return nil, fmt.Errorf("line %d: more than %d GPU nodes", line, MaxNodes)
		}
		out = append(out, NodeSpec{Type: strings.ToLower(model), GPUs: n})
	}
	if len(out) == 0 {
		return nil, errors.New("no node with a GPU: every gpu cell is 0")
	}
	return out, nil
}

// ReadNodesFile is ReadNodes on the file at path.
func ReadNodesFile(path string) ([]NodeSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	nodes, err := ReadNodes(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nodes, nil
}

// GroupNodes sums nodes by type, in order of first appearance: the
// cluster's GPUs as --gpus would list them.
func GroupNodes(nodes []NodeSpec) []GPUGroup {
	var out []GPUGroup
	for _, nd := range nodes {
		i := slices.IndexFunc(out, func(g GPUGroup) bool { return g.Type == nd.Type })
		if i < 0 {
			out = append(out, GPUGroup{Type: nd.Type})
			i = len(out) - 1
		}
		out[i].Count += nd.GPUs
	}
	return out
}
