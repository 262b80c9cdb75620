package planner

import "math"

// KeepAfterLoss is the fewest units shrink-to-admit may leave a job that
// held orig units before its first shrink-to-admit: at least minimum (its
// request's), at least 1, and at least orig − ⌊maxLoss · orig⌋, so over
// its whole life the job loses at most the fraction maxLoss (admit.max_loss,
// in (0, 1]) of what it started with, rounded down (a job whose loss rounds
// to zero units is never shrunk). The units are whatever orig and minimum
// count: nodes in the daemon, which shrinks by whole nodes (`scontrol
// update NumNodes=`), GPUs in the simulator. The 1e-9 keeps a product such
// as 0.3 · 10 = 2.9999999999999996 from losing a whole unit to rounding.
func KeepAfterLoss(orig, minimum int, maxLoss float64) int {
	return max(minimum, orig-int(math.Floor(maxLoss*float64(orig)+1e-9)), 1)
}

// DonorFacts are what the daemon knows of a running job that
// shrink-to-admit might shrink ([NotDonor]).
type DonorFacts struct {
	// Elastic: its comment is an EasyScale request with a node range (read
	// from the job's id and squeue record, never its name).
	Elastic bool
	// Ready: its coordinator is up (Rendezvous holds the coordinator and
	// token files), so it can take a membership change. Rendezvous, a
	// path, is only for the reason's text and is left out of recordings.
	Ready      bool
	Rendezvous string `json:"-"`
	// NotReady, when not Ready, says which rule its rendezvous files
	// broke (daemon rendezvous.go); only for the reason's text.
	NotReady string `json:"-"`
	// Managed: all of its nodes are managed by this daemon.
	Managed bool
	// AdmitOn: shrink-to-admit is on in its partition Partition.
	AdmitOn   bool
	Partition string
	// Nodes is its node count now.
	Nodes int
	// HasEnd: the end of its time limit is known.
	HasEnd bool
	// MixedTypesUnsafe: its nodes have more than one GPU type and the
	// cluster runs a Slurm on which shrinking such a job crashed slurmctld
	// (24.11.5: daemon.MixedShrinkSafeSeries). The zero value, false, is
	// the 22.05 behaviour of the recordings made before this fact.
	MixedTypesUnsafe bool `json:",omitempty"`
	// GPUsPerJob: its GPUs were requested per job (--gpus=N) on more than
	// one node, so how many each node holds is unknown (squeue does not
	// print it and Slurm need not spread them evenly).
	GPUsPerJob bool `json:",omitempty"`
	// Composite is how squeue's %i prints it when it is a task of a job
	// array ("2050006_1") or a component of a heterogeneous job
	// ("2050012+1"), "" for a job that stands alone: a shrink by its id
	// can change the others (every task, for the task that holds the
	// array's id; one component's limit apart from the rest's).
	// CompositeUnread: whether it is one could not be read.
	Composite       string `json:",omitempty"`
	CompositeUnread bool   `json:",omitempty"`
}

// NotDonor says why a running job can never give up nodes for
// shrink-to-admit, "" when it may: it must be an elastic EasyScale job
// whose coordinator is up, on nodes all managed by this daemon, in a
// partition where shrink-to-admit is on, on two or more nodes (a job is
// never shrunk below one node), with a known end (its raised time limit
// is computed from it), with a known GPU count on each node (GPUsPerJob),
// not on several GPU types where the Slurm in use crashed after
// shrinking such a job (MixedTypesUnsafe), and known to stand alone, no
// job array's task nor heterogeneous job's component (Composite,
// CompositeUnread). The rules are checked in that order and the first one
// broken is named.
func NotDonor(f DonorFacts) string {
	switch {
	case !f.Elastic:
		return "no elastic node range"
	case !f.Ready && f.NotReady != "":
		return "its coordinator is not up: " + f.NotReady
	case !f.Ready:
		return "its coordinator is not up (no coordinator and token in " + f.Rendezvous + ")"
	case !f.Managed:
		return "not all of its nodes are managed by this daemon"
	case !f.AdmitOn:
		return "admit is off in its partition " + f.Partition
	case f.Nodes < 2:
		return "it runs on one node (never shrunk below one)"
	case !f.HasEnd:
		return "no end time"
	case f.GPUsPerJob:
		return "its GPUs are requested per job on several nodes: how many each node holds is unknown"
	case f.MixedTypesUnsafe:
		return "its nodes have more than one GPU type, and this Slurm's slurmctld crashed after such a job was shrunk (24.11.5)"
	case f.Composite != "":
		return "it is a task of a job array or a component of a heterogeneous job (squeue prints it as " + f.Composite + "): a shrink by its id can change the others"
	case f.CompositeUnread:
		return "whether it is a task of a job array or a component of a heterogeneous job could not be read (squeue -o %A|%i... failed this cycle)"
	}
	return ""
}
