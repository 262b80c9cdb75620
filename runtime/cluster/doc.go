// Package cluster runs a job's physical workers as separate processes, on
// one machine or many: the coordinator (inside `easyscale run`) and the
// workers (`easyscale worker --join HOST:PORT --token-file FILE`).
//
//	        control (TCP, authenticated, JSON + tensor frames)
//	┌──────────────┐◄────────────────────────────┐
//	│ coordinator  │◄───────────────┐            │
//	│ (trainer,    │                │            │
//	│  statedb)    │            ┌───┴────┐   ┌───┴────┐
//	└──────────────┘            │worker 0│──►│worker 1│──► … ring
//	                            └────────┘   └────────┘      │
//	                                ▲   all-reduce ring      │
//	                                └── (runtime/collective) ┘
//
// The coordinator implements trainer.Executor. It owns membership, the
// placement of logical workers (ESTs) and the authoritative state (its own
// replica, the EST contexts, the state database); workers are stateless
// apart from their replica. One step S:
//
//  1. coordinator → each worker: Step{S, step S-1's commit, its ESTs'
//     contexts, ring}; the worker checks the commit against the update
//     of step S-1 it applied ahead (4), then computes;
//  2. workers compute their ESTs' gradients, then all-reduce them along
//     their ring (the coordinator is not a member: protocol 3);
//  3. each worker → coordinator: StepDone{advanced contexts, losses}. A
//     rank other than the last sends it as soon as its part of the
//     all-reduce is written, while the result is still on its way to it;
//     the ring's last rank, which holds the result first, sends it with
//     its answer;
//  4. the coordinator applies the optimizer to its replica and records the
//     step; its commit to the workers rides on step S+1's message. Each
//     worker, idle until then, applies step S's update as soon as the
//     result is in, at the rate the coordinator will commit
//     (trainer.LearningRate), keeping its replica as it was.
//
// Then each worker starts step S+1 on its own (a guess, guess.go): the
// same logical workers from the contexts step S left them in, on the
// replica with step S's update. Step S+1's message confirms the guess when
// it asks for exactly that (the commit of S at that rate, the same ring,
// logical workers, cursors and buffer bits); otherwise the guess is
// dropped and the step computed from the message. So a step costs each
// worker one message in and one out, no ring hop through the coordinator,
// and no wait for the coordinator between steps: the workers compute while
// it gathers, commits and records the last step. Nothing is committed on any replica before the coordinator's
// commit: an update applied ahead is undone (the copy kept is restored)
// when the next message is not the commit of that step at that rate. So
// when a worker is lost during a step (its process killed, its connection
// cut, or silent past the heartbeat timeout), the survivors are told to
// Abort (which closes their ring) and the step is redone on them from the
// same state: nothing is lost or repeated. A worker checks that every step
// it is asked for is the one its replica is at, and one that reported
// before its all-reduce failed (so it lacks the result) ends its session
// at the commit and rejoins.
//
// Signals. A worker that receives SIGTERM (Slurm's preemption, shrink and
// time-limit signal) asks to leave and is released at the next step
// boundary, with no rollback, if that boundary comes within its leave
// grace (WorkerOptions.LeaveGrace, 5 s, under Slurm's KillWait); past the
// grace it abandons its part of the step in progress and disconnects, and
// the step is redone on the survivors as for a lost worker, but at once
// (no heartbeat timeout). So a worker's SIGTERM never waits for a long
// step, and a short step is not thrown away. SIGTERM of the coordinator
// process abandons the step in progress at once (Step returns on its
// context; the workers are told to abort), the trainer checkpoints the
// last completed step, and Close says goodbye to the workers without
// waiting for them and kills the processes it launched. Joiners are
// admitted at step boundaries: they receive the parameters and optimizer
// state, verified by sha256, while fewer workers than the job's logical
// workers are members: one beyond them (a replacement extra job Slurm
// started before the one it replaces left) waits for the boundary that
// releases a member. A joiner reports the size and SHA-256 of every
// training data file it loaded (data.Manifest); one whose data differ from
// the coordinator's is refused (typeRefused, naming the first file that
// differs) and does not retry, and the job goes on without it. A coordinator
// with CoordinatorOptions.Standby streams every EST's context to a standby
// worker on another node, which can take its place when its node is lost
// (standby.go). Connections
// the coordinator refuses (no token, another job or protocol version,
// other data) are counted (Coordinator.Refused, Listener.Refused) and
// logged at a bounded rate, since anyone who reaches its port can cause
// them: the first 5 a minute one line each, the rest in one summary line
// at the minute's end (refusals.go).
//
// Local worker processes (`run --procs`, ProcLauncher): one that exits
// before it is admitted (killed while it joins) is started again, a
// bounded number of times (relaunch.go), so a grow does not wait out its
// join timeout for it, unless it left on request (a SIGTERM means leave); and the coordinator knows which processes of the
// job may still join. When the last member leaves while another worker
// process rejoins (a rank downstream of one killed while it forwarded the
// result misses the result and rejoins), the trainer waits for it instead
// of stopping with trainer.ErrNoWorkers (joinwait.go, AwaitWorkers).
//
// A worker's side is one state machine per file: worker.go (RunWorker: the
// process's sessions until it leaves or gives up), rejoin.go (the join
// deadline across sessions), session.go (one admission: connection,
// control frames, heartbeats, the message loop), admission.go (welcome,
// data and model preparation, admission), step.go (one step: compute,
// guesses, the commit and its early apply), ringconnect.go (building the
// step's ring) and allreduce.go (the reduction on it); the last two serve
// the coordinator's Abort and Bye while they wait on other ranks.
package cluster
