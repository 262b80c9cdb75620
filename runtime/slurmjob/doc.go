// Package slurmjob is the runtime's side of Slurm: it reads a task's place
// in an allocation from the SLURM_* environment, meets the other tasks of
// the job at a rendezvous directory, and keeps a short status in the job's
// comment, visible with `squeue -o '%.10i %.40k'`.
//
// `srun easyscale run --config job.toml` starts one task per physical
// worker (one per GPU, or per CPU slot without GPUs). Task 0 (SLURM_PROCID
// 0, on the first node) hosts the coordinator and one worker; every other
// task is a worker. They meet in the rendezvous directory
//
//	<submit dir>/.easyscale/<job id>/      ($EASYSCALE_RENDEZVOUS_DIR overrides)
//	  token          the job's secret (0600), written by task 0
//	  job-id         the id workers authenticate as
//	  coordinator.R  HOST:PORT, written once the coordinator of run R listens
//	  exit-code.R    the coordinator's exit status, written when run R ends
//	                 (both with a second line, the run's stamp:
//	                 "job ID run R started UNIX-SECONDS")
//	  coordinator, exit-code   copies of the newest run's (the value alone)
//	  environment    task 0's environment, NUL-separated KEY=VALUE (0600):
//	                 an extra job's worker starts again on it
//	                 (MergeEnvironment)
//	  python         a torch job's interpreter, an absolute path
//	  state/         the SQLite state and checkpoints
//
// which must be on a filesystem every node sees (the submit directory
// usually is). R is the run, SLURM_RESTART_COUNT (0, then 1 after the first
// requeue, ...): a requeued job keeps its directory, and with it the files
// of its earlier runs, so a task reads only its own run's files. A job that
// reuses an earlier job's id (slurmctld lost its state, or the ids wrapped)
// finds that job's directory until its task 0 moves it aside (RetireStale);
// the stamp's start time, SLURM_JOB_START_TIME or, where Slurm does not set
// it, the StartTime squeue reports, keeps a task that looks first from
// taking the earlier job's files for its own. A worker task waits for
// its run's coordinator.R, and stops with exit status 0 as soon as its
// run's exit-code.R exists (before joining, or when it cannot reach or lost
// the coordinator): a finished job that is requeued resumes at its last
// step and its step ends COMPLETED in seconds. Task 0 waits up to 120 s for
// the step's other tasks; an elastic job then starts on those that joined
// when they make its minimum (Task.MinTasks: its minimum nodes' tasks),
// and the others join at a step boundary when they come. Batch scripts
// return exit-code (see examples/slurm/mnist.sbatch); extra jobs of the
// backfill daemon join with `easyscale worker --join $(cat DIR/coordinator)
// --token-file DIR/token`. Task 0 puts nothing of the job's in DIR unless
// DIR and its parent pass CheckPrivateDir (its user's own, or a parent of
// root's, and writable by no one else unless sticky), and a worker reads
// environment and python only when they are its user's own and no one
// else may write them. A submit directory its group may write (a shared
// project directory) still lets a member move .easyscale aside once the
// job has started: workers then fail the token handshake rather than join
// an impostor, and EASYSCALE_RENDEZVOUS_DIR in a private directory avoids
// it.
//
// A node that fails (its slurmd, slurmstepd and tasks gone) is a shrink: the
// coordinator loses that worker (at once when its connections close, after
// the heartbeat timeout when the node goes silent) and the survivors redo
// the step. Slurm keeps the job running on the other nodes only when the job
// has --no-kill and its srun step too (SLURM_NO_KILL=set), which
// easyscale-sbatch adds to elastic jobs; sbatch-wrap/submit's doc has what
// was measured. The first node runs the batch script and task 0, the
// coordinator: when it is lost, the coordinator's standby (a worker task on
// another node holding the committed state, runtime/cluster standby.go)
// takes over in place, publishes its address in coordinator.R and records
// takeover.R; the other tasks rejoin it (CoordinatorAddr). With the batch
// script gone, the new coordinator requeues the job after the training once
// Slurm has set the first node DOWN, and the requeued run ends COMPLETED at
// once (docs/first-node-loss.md). Without a standby (a torch job before
// its first remote worker is admitted, or the standby lost too) a worker
// task requeues the job once Slurm sets the node DOWN (`scontrol requeue`),
// which resumes from its newest checkpoint. Either requeue asks for the
// nodes the job still had and the tasks they hold (Slurm keeps the lost
// node in both, and the requeued job would wait for it).
package slurmjob
