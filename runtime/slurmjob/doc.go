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
//	  token        the job's secret (0600), written by task 0
//	  job-id       the id workers authenticate as
//	  coordinator  HOST:PORT, written once the coordinator listens
//
// which must be on a filesystem every node sees (the submit directory
// usually is). Extra jobs of the backfill daemon join the same way with
// `easyscale worker --join $(cat DIR/coordinator) --token-file DIR/token`.
package slurmjob
