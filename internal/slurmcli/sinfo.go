package slurmcli

import (
	"fmt"
	"strings"
)

// SinfoFields are the sinfo --Format fields this package asks for, in order.
var SinfoFields = []string{"NodeList", "StateLong", "Gres", "GresUsed", "Partition", "Reason", "CPUsState"}

// SinfoArgs returns the arguments of `sinfo` whose output [ParseSinfo] reads: one
// line per node and partition (--Node), no header, SinfoFields delimited by s.
// sinfo has no environment twin of --Format, so s is on its command line; the
// fields are node text only root or slurmd sets (names, GRES, state, Reason).
func SinfoArgs(s Separators) []string {
	return []string{"--Node", "--noheader", "--Format=" + s.format(SinfoFields)}
}

// Node is one node as sinfo shows it, merged over its partitions.
type Node struct {
	Name string `json:"name"`
	// State is sinfo's long state: "idle", "mixed", "allocated", "drained",
	// "draining", "down", ... with a suffix such as "*" (not responding) or "~".
	State      string   `json:"state"`
	GRES       []GRES   `json:"gres"`      // configured, e.g. gpu:v100:4
	GRESUsed   []GRES   `json:"gres_used"` // allocated now, with IDX detail
	Partitions []string `json:"partitions"`
	Default    string   `json:"default_partition,omitempty"` // the partition marked "*", if the node is in it
	Reason     string   `json:"reason,omitempty"`            // why it is drained/down; "" for "none"
	CPUs       string   `json:"cpus"`                        // allocated/idle/other/total, e.g. "3/5/0/8"
}

// Drained reports whether the node is drained, draining or down (sinfo states
// "drained", "draining", "down", "fail", "failing", possibly with a suffix).
func (n Node) Drained() bool {
	s := strings.TrimRight(n.State, "*~#!%$@^-+")
	switch s {
	case "drained", "draining", "drain", "down", "fail", "failing":
		return true
	}
	return false
}

// GPUs returns the node's configured and allocated GPU counts.
func (n Node) GPUs() (total, used int) { return GPUs(n.GRES), GPUs(n.GRESUsed) }

// ParseSinfo parses the output of `sinfo` run with [SinfoArgs](s) into one Node per
// node name, in first-seen order. Any record that cannot be read is an error (nodes
// are few and an unreadable one would misstate the free GPUs): *ParseError with
// Source "sinfo".
func ParseSinfo(out []byte, s Separators) ([]Node, error) {
	recs, bad, err := splitRecords("sinfo", out, SinfoFields, s)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, bad[0]
	}
	var nodes []Node
	index := map[string]int{}
	for _, rec := range recs {
		r, i := rec.values, rec.line-1
		if r[0] == "" {
			return nil, &ParseError{Source: "sinfo", Line: i + 1, Field: "NodeList", Err: fmt.Errorf("empty node name")}
		}
		gres, err := ParseGRES(r[2])
		if err != nil {
			return nil, &ParseError{Source: "sinfo", Line: i + 1, Field: "Gres", Err: err}
		}
		used, err := ParseGRES(r[3])
		if err != nil {
			return nil, &ParseError{Source: "sinfo", Line: i + 1, Field: "GresUsed", Err: err}
		}
		k, seen := index[r[0]]
		if !seen {
			k = len(nodes)
			index[r[0]] = k
			reason := r[5]
			if reason == "none" {
				reason = ""
			}
			nodes = append(nodes, Node{Name: r[0], State: r[1], GRES: gres, GRESUsed: used, Reason: reason, CPUs: r[6]})
		}
		part, isDefault := strings.CutSuffix(r[4], "*")
		nodes[k].Partitions = append(nodes[k].Partitions, part)
		if isDefault {
			nodes[k].Default = part
		}
	}
	return nodes, nil
}

// DrainedNodes returns the names of the nodes that are drained, draining or down.
func DrainedNodes(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if n.Drained() {
			out = append(out, n.Name)
		}
	}
	return out
}
