// Package submit turns an sbatch command line into the submission of an
// EasyScale job; it is the logic of the easyscale-sbatch drop-in wrapper.
//
// The wrapper owns four options, --elastic, --logical-workers,
// --determinism and --speeds (internal/elastic). It finds them on the command line, in
// the script's #SBATCH directives (read like sbatch does: up to the first
// line that is neither blank nor a comment) and in their EASYSCALE_*
// environment twins; the command line wins over a directive, a directive
// over the environment. Every other argument is passed to the real sbatch
// unchanged and in order, and sbatch's stdout, stderr and exit status are
// the wrapper's.
//
// For an EasyScale job the wrapper
//   - validates the request (errors name the option and where it came from);
//   - prepends --nodes=MIN (the core allocation is submitted at the minimum
//     size; the backfill daemon grows it) unless the user gave -N/--nodes
//     with one count in the --elastic range, the size to start at (the
//     backfill planner's request R: shrink-to-admit may take the job down to
//     MIN, extra jobs grow it to MAX), and --no-kill for an elastic
//     request, and --comment=<request> in the encoding of elastic.Comment;
//   - sets the resolved EASYSCALE_* twins in sbatch's environment, where the
//     SPANK plugin (when installed on the submit host) reads and checks them
//     and from where they reach the job, and SLURM_NO_KILL=set for an
//     elastic request;
//   - hides its own #SBATCH directives from sbatch, which refuses options it
//     does not know when the plugin is not installed: the lines become
//     "# easyscale-sbatch: …" comments in a private copy of the script that
//     keeps the script's base name (so the default job name is unchanged);
//     the copy is removed when sbatch exits.
//
// # Node failure
//
// An elastic job should lose a failed node the way it loses a released one:
// the survivors redo the step and go on. Measured on the lab (Slurm 22.05.8,
// SlurmdTimeout=30, a 3-node job whose third node's slurmd, slurmstepd and
// task were SIGKILLed; tests/slurm TestNodeFailureShrinksTheJobInsteadOfRequeuingIt):
//   - the runtime notices at once (the dead worker's connections close; a
//     silent node after the 5 s heartbeat timeout) and goes on with 2 workers;
//     Slurm notices 34–38 s later, when the node's pings go unanswered
//     ("Nodes n3 not responding, setting DOWN");
//   - without sbatch --no-kill Slurm cancels the job "DUE TO NODE FAILURE"
//     and, the job being requeueable, requeues it (Restarts=1): it waits in
//     the queue again, then resumes from its checkpoint;
//   - with sbatch --no-kill but a plain srun, slurmctld logs "Removing failed
//     node n3 from JobId=1" and "Killing JobId=1 StepId=0 due to failed node
//     n3": the job survives, but the whole step — every task, the
//     coordinator's too — is killed (srun: "Node failure on n3");
//   - with sbatch --no-kill and srun --no-kill (SLURM_NO_KILL=set in the
//     job's environment) it logs "Killing JobId=8 StepId=0 on failed node n3":
//     only that node's tasks; the job stays RUNNING on n[1-2] (sacct records
//     RESIZING, then COMPLETED on 2 nodes, Restarts=0) and srun exits 0.
//     srun's -K/--kill-on-bad-exit is off unless slurm.conf sets
//     KillOnBadExit (the lab does not), and srun(1) says that with --no-kill
//     neither it nor -W/--wait act on the step.
//
// So the wrapper adds --no-kill to an elastic job unless the user chose
// (-k/--no-kill[=off] on the command line or in a directive, or
// SBATCH_NO_KILL), and SLURM_NO_KILL=set unless the environment has it
// or the user turned no-kill off (--no-kill=off, SBATCH_NO_KILL=off: the
// user asked Slurm to end the job on a node failure, so the steps must not
// outlive it either) (srun reads it like -k; 22.05 refuses "1", "yes" and "on"). It reaches the
// job's srun steps through sbatch's default --export=ALL; with --export=NONE
// or a list, put --no-kill on the srun line. The failure of the first node
// (the batch host, which runs task 0 and so the coordinator) is no shrink:
// with --no-kill, slurmctld logs "Killing JobId=23 StepId=batch due to
// failed node n1" and "StepId=0 on failed node n1", and leaves the job
// RUNNING on n[2-3] (BatchHost=n1) with nothing to run, until its time
// limit. The step's tasks on the other nodes live on, so the
// coordinator's standby takes over there within a second and the job trains
// on in place; after the training it requeues the job, whose batch script
// is gone, to end it COMPLETED (docs/first-node-loss.md,
// TestFirstNodeFailureIsTakenOverInPlace).
//
// It refuses, for an EasyScale job: --nodes/-N outside the --elastic range
// or as a range (the range is --elastic's),
// --comment (the wrapper records the request there), heterogeneous jobs, and
// #SBATCH lines mixing its options with others. A job without any EasyScale
// option is passed through untouched.
//
// -h/--help prints the wrapper's own help ([Usage]) and exits 0 even where
// sbatch is missing or Slurm is not configured; sbatch's own --help output
// follows when sbatch gives it.
package submit
