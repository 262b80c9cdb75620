package cluster

import (
	"os"
	"testing"
)

// TestStandbyIsTheLowestRankOnAnotherNode checks the coordinator's choice
// of its standby and its count of the workers that go with its node.
func TestStandbyIsTheLowestRankOnAnotherNode(t *testing.T) {
	hn, _ := os.Hostname()
	self := joinMsg{Host: hn, PID: os.Getpid()}
	on := func(node string) joinMsg { return joinMsg{Host: hn, PID: os.Getpid() + 1, Node: node} }
	withNode := func(j joinMsg, node string) joinMsg { j.Node = node; return j }
	cases := []struct {
		name     string
		standby  bool
		node     string
		members  []joinMsg
		rank     int
		lostWith int
	}{
		{"off: no standby", false, "n1", []joinMsg{withNode(self, "n1"), on("n2")}, -1, 0},
		{"the first worker on another node", true, "n1", []joinMsg{withNode(self, "n1"), on("n3"), on("n2")}, 1, 1},
		{"workers on the coordinator's node are skipped and counted", true, "n1", []joinMsg{on("n1"), withNode(self, "n1"), on("n2")}, 2, 2},
		{"only the coordinator's node: none", true, "n1", []joinMsg{withNode(self, "n1"), on("n1")}, -1, 2},
		{"off Slurm: any other process", true, "", []joinMsg{self, on("")}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			co := &Coordinator{o: CoordinatorOptions{Standby: c.standby, Node: c.node}}
			for _, j := range c.members {
				co.members = append(co.members, &member{join: j})
			}
			rank, lost := co.standbyRank()
			if rank != c.rank || lost != c.lostWith {
				t.Fatalf("standby rank %d, %d on the coordinator's node; want %d, %d", rank, lost, c.rank, c.lostWith)
			}
		})
	}
}
