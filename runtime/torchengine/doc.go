// Package torchengine is the PyTorch engine's Go half: it ships the Python
// package easyscale (python/easyscale, embedded in every binary that imports
// this package, so the Go and Python halves are always of one version) and
// finds the Python interpreter that has torch.
//
// A job is a Python program: a training script that keeps its own loop
// ([torch] script; the loop API, python/easyscale/loop.py) or a module's
// setup(config) -> easyscale.Job ([torch] module), which easyscale.job.run
// trains with that same loop API. Each process runs the program in its main
// thread and answers this package's requests from inside the program's
// calls: the request for a step returns the step to the loop, whose
// micro-batch loop runs this process's logical workers; its end answers
// step, serves reduce and waits for commit (the gradient then in .grad, the
// loop clips and steps its optimizer and schedulers), and the loop's next
// request for a step answers commit: the step boundary.
//
// The Python side holds what decides the bits of a torch job
// (measured facts: docs/pytorch-bits.md):
//
//	easyscale.loop         the loop API: DataLoader, DistributedSampler, DDP drop-ins, register, Batch
//	easyscale.selfcheck    two steps run twice under two placements, compared bit for bit
//	easyscale.streams      random streams keyed by (seed, logical worker, step, purpose)
//	easyscale.sampler      DistributedSampler order over N logical workers, a cursor per worker
//	easyscale.context      per-logical-worker buffers (BatchNorm) swapped into one replica
//	easyscale.reduce       the chain: left fold in logical-worker order, ×float32(1/N), over gloo/NCCL
//	easyscale.numerics     pinned numerics, fingerprint and canary digest checked before admission
//	easyscale.safetensors  checkpoints in every dtype, byte-identical for equal tensors
//
// The Go side (this package) starts and supervises the processes
// (process.go: python3 -m easyscale.worker, a versioned control protocol on
// stdin and fd 3, heartbeats, Pdeathsig; forkserver.go: forked from one
// server that has imported torch), drives them through steps and
// reallocations (group.go: contiguous logical-worker ranges in rank order, a
// gloo group rebuilt for every membership, the authoritative per-logical-
// worker contexts of the last committed step), admits each by its torch
// and Python versions and its numerics (local.go) and implements trainer.Engine (engine.go), so `easyscale run`
// trains a job file with engine = "torch" with the same schedule, ledger,
// checkpoints, resume and SIGTERM handling as the native engine. Each
// checkpoint records the numerics of the process that wrote it (metadata
// easyscale.numerics: versions, fingerprint, canary), and a resume by
// processes that compute other bits is refused naming each difference
// (resume.go: a job requeued onto a node with another CPU ISA dispatch,
// GPU model or torch release resumed silently before, and ended with
// other bits than its fixed run). The error matches
// trainer.ErrOtherNumerics: with `easyscale run
// --on-other-numerics=start-over` the job starts over from step 0 instead
// (its result is then a fixed run's in the new environment) and the
// superseded state is kept under the state directory's superseded/
// (statedb.DB.StartOver).
//
// Start-up: the processes of a run's first allocation start at once
// (Options.Workers: New prestarts them all and waits only for the first,
// whose versions and numerics the others must match), and every grow starts
// the processes it misses together (Local.Resize) before it waits for any,
// then admits them in rank order. Torch is imported once per Go process,
// interpreter and environment: the first start runs a fork server
// (easyscale.forkserver, forkserver.go), which imports torch and never runs
// a torch operation (no thread pool, no CUDA context to copy), and every
// worker is a fork of it that runs easyscale.worker with its own standard
// streams and control channel. Importing torch costs each interpreter 1.8 s
// of CPU on torch 1.13 and 2.1 s on 2.6 (measured on the CI machine); a fork
// costs milliseconds, so once a server runs, a grow nobody announced waits
// for the job's load, not for torch (torch_rescale_fresh_s against
// torch_rescale_fresh_own_interpreters_s, BENCHMARKS.md); the first start of
// a Go process still pays one import. A server is started with the worker's
// whole environment (but PYTHONPATH), so what torch reads at its import is
// what an interpreter of the worker's own would have read; a worker with
// other variables gets a server of its own. What a process inherits rather
// than reads (working directory, first on sys.path as with python3 -m;
// umask, resource limits, CPU affinity, Python's hash seed) is the server's,
// which is this process's when it started the server; a spawn request
// carries only the package directory, whatever the size of the environment.
// The server ignores SIGINT, SIGTERM and SIGHUP from its bootstrap's first
// statement (Slurm signals every process of a step; a worker leaves at its
// step boundary on SIGTERM; a signal in the interpreter's own start,
// milliseconds, ends the server, and workers start as their own
// interpreters), holds about 230 MB (torch's modules) and exits after 60 s
// without workers; the kernel kills it when this process dies (when the
// thread that started it ends, as for any Pdeathsig child), and its workers
// when it dies (PR_SET_PDEATHSIG). A server that does not start makes its
// workers start as their own interpreters for a minute, the reason on the
// first one's stderr; one that does not take and answer a spawn within
// StartupTimeout is no longer used, and its running workers keep it; one
// that has exited (idle) as a spawn reached it is replaced by a new one for
// that spawn. With EASYSCALE_FORKSERVER=0 every worker is its own
// interpreter (python3 -m easyscale.worker). Python reads torch's version
// from torch/version.py without importing torch.
//
// One step on P processes holding contiguous ranges of the N logical workers,
// in three requests:
//
//	Go:      step s ──► every process      reduce s ──► every process      commit s ──► every process
//	process r:  for each logical worker l     chain: recv partial from r-1,    G into .grad; the loop
//	            it holds, in order: swap l's  add own gradients in order,      clips, steps optimizer and
//	            buffers in, seed(seed, l, s), send to r+1; rank P-1 scales     schedulers; at its next
//	            l's next micro-batch; the     by float32(1/N) and broadcasts G request for a step reply
//	            loop: forward, loss,                                           with the digest (rank 0)
//	            batch.backward; reply with
//	            losses, sample hashes,
//	            advanced contexts
//
// The digest (sha256 of every parameter and logical worker 0's buffers)
// is computed by process 0 alone, and only for the steps the trainer asks
// for (Engine is a trainer.SparseDigester): process 0 times it, the trainer
// hashes every K steps with K the smallest keeping hashing at or below 1 %
// of a step (or the job file's [torch] digest_every_steps), and always the
// final and checkpoint steps; the checkpoint request computes its own
// digest for the file's metadata. The examples are hashed every step on the
// CPU (0.2-0.4 % of a step, BENCHMARKS.md).
//
// No collective waits for a peer's computation: reduce starts only once
// every process has answered step, so a slow process is waited for as long
// as it heartbeats, however long its step, and the collective bound
// (Group.TimeoutSeconds, the heartbeat timeout, at least 5 s) covers
// transfers only. A lost process (killed, or silent past the heartbeat
// timeout) fails the step on every process; nothing was applied, so the
// survivors redo it from the contexts Go holds. SIGTERM of the run abandons
// the step at once: a control thread in process 0 answers the checkpoint
// request while the main thread is still computing (parameters and
// optimizer state change only between a commit request and the loop's next
// request for a step, under one lock; the other registered objects'
// state is the copy taken at the last boundary). A commit already asked
// for is waited for CommitGrace past SIGTERM, so it ends everywhere.
//
// Each membership change builds a new gloo group (a generation) in the
// surviving processes, which are not restarted. Its members first meet at
// an arrival barrier in the generation's store (a TCPStore on the legacy
// server on every torch version: use_libuv=False where torch takes it, as
// torch 2.4+ builds without libuv need) that Python polls
// (python/easyscale/rendezvous.py); a member lost before it arrives makes
// Go cancel the generation on the others (a cancel request their control
// thread answers at once), so they return within a poll and the group is
// formed again without it.
//
// Before the first step of a run (Local.CheckSteps, unless run
// --no-self-check) and for `easyscale check JOBFILE` (Engine.Check),
// process 0 takes every logical worker's context from Go's copy and runs
// the self-check inside the training loop; a failure is a *SelfCheckError
// naming the first tensor or attribute that differed and the likely cause.
// Every registered object is saved and loaded back when a process loads the
// job, so a job never dies at its first checkpoint.
//
// Workers on other machines (remote.go, join.go): `easyscale run --listen`
// accepts them through cluster.Listener (the native join's token, HMAC
// handshake, welcome and data comparison; the join also carries the
// Python process's versions and numerics, checked with Admit: a joiner on
// another torch or Python is refused naming both versions, since a job's
// digests hold for one torch version). Each `easyscale worker
// --join` starts its own Python process and relays the coordinator's
// requests to it as runtime/wire frames on its one connection, matched by
// id, several in flight, heartbeats both ways; to the Group it is one more
// Member. Joiners are admitted at Engine.Boundary as the last ranks, while
// fewer processes than the job's logical workers run (the others wait, in
// order, for a boundary after a member left); member 0's node address
// hosts each generation's gloo store.
//
//	coordinator                                worker (other machine)
//	Group ── Member.Call ─► remote ══ TCP ══► relay ──► Process (python3 -m easyscale.worker)
//	      ◄─ reply (id) ──────────── ══════ ◄──────── ◄── reply; gloo ◄──► other processes
//
// With Options.Standby (on Slurm) the coordinator streams every logical
// worker's context to one remote worker on another node, whose relay
// keeps them and, when the coordinator is lost, has its own Python process
// write the checkpoint of the step it committed before it is closed
// (standby.go): the copy a standby takes the coordinator's place from
// (runtime/cli takeover.go, docs/first-node-loss.md). The standby also
// keeps a spare Python process, loaded as an engine's first, which the
// engine it then coordinates with adopts (Options.Spare, spare.go), so
// the takeover starts no interpreter and imports no torch.
//
// Under `srun easyscale run` task 0 is such a coordinator and the other
// tasks join it (runtime/cli's slurm.go); so do the workers of the extra
// jobs easyscale-backfilld lends the job. Those run with the daemon's
// environment (HOME=/root, no EASYSCALE_PYTHON of the job): the package
// goes only into a cache directory of this user (cachedir.go), and the
// interpreter is the job's, which task 0 publishes in the rendezvous file
// slurmjob.PythonFile (WorkerOptions.Python).
//
// Torch versions. The engine runs on torch 1.13 (Debian 12, Python 3.11:
// make test) and 2.6 (Debian 13, Python 3.13: make test-current, in the
// current lab's root). What differs between them and how the engine meets
// it: torch 2.4+ asks TCPStore for a libuv server by default, which
// Debian's 2.6 is built without (the stores pass use_libuv=False where
// torch takes it); torch 2.x's Optimizer.load_state_dict keeps the tensors
// it is given where dtype and device match, where 1.13 copied them
// (Replica.load_replica_state copies the state itself, so two replicas in
// one process never share a momentum buffer). A kernel's bits may differ
// between torch releases, so digests are per torch version; on each one,
// fixed, changing, killed and resumed runs agree (both suites check it).
//
// GPUs. With [torch] device = "cuda" each process runs its logical
// workers on its one GPU; a torch that cannot use it is refused at load
// naming the setting (numerics.require_device). The chain reduces through
// host copies, since gloo's send and receive take CPU tensors (float32
// additions round alike on either side, so the digest is unchanged), and
// a parameter left off the device is refused naming easyscale.device().
// Checked on one H200 with torch 2.11 by tests/gpu/check.sh (BENCHMARKS.md):
// one digest on 1 process and on 1 → 3 → 2 processes. Not yet: NCCL (a
// device-side chain) for the gradient's transfer.
package torchengine
