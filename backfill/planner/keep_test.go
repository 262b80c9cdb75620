package planner

import "testing"

func TestKeepAfterLoss(t *testing.T) {
	tests := []struct {
		name          string
		orig, minimum int
		maxLoss       float64
		want          int
	}{
		{"half of 4 nodes may go", 4, 1, 0.5, 2},
		{"half of 3 rounds down: one node may go", 3, 1, 0.5, 2},
		{"0.4 of 2 rounds down to none: never shrunk", 2, 1, 0.4, 2},
		{"the request's minimum wins over the cap", 4, 3, 0.5, 3},
		{"0.3 of 10 is 3 despite floating point (0.3·10 = 2.9999999999999996)", 10, 1, 0.3, 7},
		{"a loss of everything still keeps one", 4, 0, 1, 1},
		{"units are GPUs in the simulator: 8 GPUs keep 4", 8, 2, 0.5, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeepAfterLoss(tc.orig, tc.minimum, tc.maxLoss); got != tc.want {
				t.Errorf("KeepAfterLoss(%d, %d, %v) = %d, want %d", tc.orig, tc.minimum, tc.maxLoss, got, tc.want)
			}
		})
	}
}

func TestNotDonor(t *testing.T) {
	ok := DonorFacts{Elastic: true, Ready: true, Rendezvous: "/w/.easyscale/10", Managed: true, AdmitOn: true, Partition: "gpu", Nodes: 2, HasEnd: true}
	tests := []struct {
		name   string
		change func(*DonorFacts)
		want   string
	}{
		{"an elastic job on two managed nodes with its coordinator up and an end may give up nodes", func(*DonorFacts) {}, ""},
		{"a job without a node range never does", func(f *DonorFacts) { f.Elastic = false }, "no elastic node range"},
		{"nor one whose coordinator is not up", func(f *DonorFacts) { f.Ready = false },
			"its coordinator is not up (no coordinator and token in /w/.easyscale/10)"},
		{"nor one on a node another daemon manages", func(f *DonorFacts) { f.Managed = false }, "not all of its nodes are managed by this daemon"},
		{"nor one in a partition where admit is off", func(f *DonorFacts) { f.AdmitOn = false }, "admit is off in its partition gpu"},
		{"nor one on a single node", func(f *DonorFacts) { f.Nodes = 1 }, "it runs on one node (never shrunk below one)"},
		{"nor one without a known end", func(f *DonorFacts) { f.HasEnd = false }, "no end time"},
		{"nor one on several GPU types where this Slurm crashed after shrinking such a job", func(f *DonorFacts) { f.MixedTypesUnsafe = true },
			"its nodes have more than one GPU type, and this Slurm's slurmctld crashed after such a job was shrunk (24.11.5)"},
		{"nor one whose GPUs, asked per job, are on several nodes in an unknown split", func(f *DonorFacts) { f.GPUsPerJob = true },
			"its GPUs are requested per job on several nodes: how many each node holds is unknown"},
		{"nor a job array's task or a heterogeneous job's component", func(f *DonorFacts) { f.Composite = "2050012+1" },
			"it is a task of a job array or a component of a heterogeneous job (squeue prints it as 2050012+1): a shrink by its id can change the others"},
		{"nor one not known to stand alone", func(f *DonorFacts) { f.CompositeUnread = true },
			"whether it is a task of a job array or a component of a heterogeneous job could not be read (squeue -o %A|%i... failed this cycle)"},
		{"the first rule broken is named", func(f *DonorFacts) { f.Elastic, f.Nodes = false, 1 }, "no elastic node range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.change(&f)
			if got := NotDonor(f); got != tc.want {
				t.Errorf("NotDonor = %q, want %q", got, tc.want)
			}
		})
	}
}
