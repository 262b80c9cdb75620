package planner

import "strings"

// Lends that fail before they run: an extra job whose submission Slurm
// refuses, or one that Slurm keeps pending until the daemon cancels it,
// is a Slurm request made for nothing, like one whose worker fails at once
// ([LendEnd]), and is retried under the same [RetryPolicy] (issue 20 item
// 2). Not every such failure is the job's: slurmctld may be down or
// overloaded, and a node the snapshot saw idle may have been taken. The
// rules below say what counts, and against what.

// SubmitFailure is one lend whose submission failed: no Slurm job was
// made (the daemon's sbatch).
type SubmitFailure struct {
	// Answered: the request got an answer about itself. The submit
	// command (sbatch) ran and exited with a non-zero status, printing
	// Message; or the daemon could not form the request for this job
	// (e.g. its user has no group on the submit host). False when the
	// command could not be run, was killed (its timeout, the daemon
	// stopping) or printed something other than a job id: nothing was
	// learnt of the request.
	Answered bool
	// Message is what the command printed on stderr (or the daemon's
	// reason for not forming the request).
	Message string
}

// Outcome is the rule for a failed submission: [LendFailed] (counted
// against the job and the node, as any failed lend, so backoff and
// retry.stop_after apply) when the request was answered and the answer
// is not one that says Slurm could not take requests at all
// ([SlurmUnavailable]): sbatch's "Batch job submission failed: Invalid
// partition name specified", "Requested node configuration is not
// available", "Invalid account or account/partition combination
// specified", "Job violates accounting/QOS policy", a job_submit plugin's
// refusal and any other answer about the request are the same answer next
// cycle. [LendNeutral] otherwise: slurmctld down, overloaded or
// unreachable, a timeout, an authentication (munge) failure or a command
// that could not be run is the daemon's or Slurm's fault, not the job's;
// it is not counted, so an outage never stops anyone's growth. The caller
// backs off instead: the daemon ends the cycle there, which waits
// poll_interval doubled per consecutive failed cycle (up to max_backoff),
// or probes with `scontrol ping` when slurmctld does not answer.
//
// A request refused for the daemon's own settings (extra.partition or
// extra.qos that Slurm does not know) is counted against every job it
// would grow: each backs off and stops after retry.stop_after refusals
// rather than being refused every cycle.
func (f SubmitFailure) Outcome() LendOutcome {
	if !f.Answered || SlurmUnavailable(f.Message) {
		return LendNeutral
	}
	return LendFailed
}

// unavailableMessages are Slurm's (slurm_errno.c, 22.05 and later) and the
// C library's texts for failures to reach slurmctld or of slurmctld to
// take any request now, matched without regard to case anywhere in a
// message.
var unavailableMessages = []string{
	"unable to contact slurm controller", // connect, send, receive, shutdown failure, backoff
	"communication connection failure",
	"communication shutdown failure",
	"message send failure",
	"message receive failure",
	"socket timed out",
	"zero bytes were transmitted or received",
	"protocol authentication error",
	"munge",
	"protocol version has changed",
	"incompatible versions of client and server",
	"unexpected message received",
	"standby mode",
	"unable to create job record, try again",
	"temporarily unable to accept job",
	"resource temporarily unavailable",
	"unable to connect to database",
	"connection refused",
	"connection timed out",
	"connection reset",
	"network is unreachable",
	"no route to host",
	"transport endpoint is not connected",
	"broken pipe",
}

// SlurmUnavailable reports whether msg, a Slurm command's message, says
// that slurmctld could not be reached or could not take any request now
// (see [SubmitFailure.Outcome]), rather than answering the request.
func SlurmUnavailable(msg string) bool {
	m := strings.ToLower(msg)
	for _, u := range unavailableMessages {
		if strings.Contains(m, u) {
			return true
		}
	}
	return false
}

// PendingLend is one lend that Slurm kept pending on its node past the
// daemon's pending_timeout, so the daemon cancelled it.
type PendingLend struct {
	// Reason is squeue's pending reason (%r) when it was cancelled.
	Reason string
}

// Outcome is the rule for a lend cancelled pending: [LendFailed] when
// Slurm's reason is a limit of the job's user, account or QOS (a reason
// that starts with "Assoc" or "QOS", such as AssocGrpGRES or
// QOSMaxGRESPerUser: it holds on every node, so the job backs off and
// stops like any failed lend); [LendNodeFailed] otherwise (Resources,
// Priority, ReqNodeNotAvail, ...: the node's GPUs were not free after all,
// a race with Slurm's own scheduling or a node Slurm will not start the
// job on). A node's failure backs the job off that node only, doubling up
// to the cap per consecutive failure there, and never stops the job: a
// busy or broken node says nothing of the job, and a healthy job must not
// lose its growth until its status changes because its nodes were raced.
func (p PendingLend) Outcome() LendOutcome {
	if strings.HasPrefix(p.Reason, "Assoc") || strings.HasPrefix(p.Reason, "QOS") {
		return LendFailed
	}
	return LendNodeFailed
}
