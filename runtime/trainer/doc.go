// Package trainer runs a training job's logical workers (EasyScaleThreads,
// ESTs) on a changing set of physical workers so that the trained model is
// bit-identical to the run with one physical worker per logical worker.
//
// The design follows EasyScale (arXiv 2208.14228):
//
//		         step s                            step s+1 (allocation changed)
//		  ┌ worker 0 ─────────────┐           ┌ worker 0 ────┐ ┌ worker 1 ────┐
//		  │ EST0 EST1 EST2 EST3   │  ──────►  │ EST0 EST1    │ │ EST2 EST3    │
//		  └───────────────────────┘  contexts └──────────────┘ └──────────────┘
//		      grads per EST  ──► canonical sum in EST order ──► identical optimizer step on every replica
//
//	  - Each EST owns a context (context.go): its data-sampler cursor, its
//	    BatchNorm running buffers, and the keys of its random streams, which
//	    are derived from (seed, EST id, step, purpose) and never from the
//	    physical worker. A physical worker runs its ESTs one after another
//	    (time-sharing, §3.2), swapping the context in; switching costs a
//	    pointer swap because the context is never copied.
//	  - Gradients are reduced by a function of the EST ids only (reduce.go):
//	    the element-wise sum in increasing EST order, each addition rounded to
//	    float32, then scaled by 1/N. The result is therefore the same for any
//	    placement and any number of physical workers.
//	  - Every physical worker holds a full replica of the parameters and the
//	    optimizer state and applies the identical update, as DDP does. In
//	    one process, rank 0 computes on the coordinator's replica itself
//	    rather than on a copy of it (local.go).
//	  - When the allocation changes (only at step boundaries) ESTs move with
//	    their contexts; joining workers copy the parameters and optimizer
//	    state of rank 0; no restart.
//	  - After every step the coordinator appends the model digest (parameters
//	    and EST 0's buffers, the model DDP would save) to the state database,
//	    and checkpoints every CheckpointEvery steps; a rerun resumes from the
//	    newest valid checkpoint and reproduces the same digests.
//	  - When the run's context ends (SIGTERM, SIGINT) mid-step, the step is
//	    abandoned at once, whatever its length (Executor.Step returns on
//	    its context): the EST contexts copied before the step (the step
//	    advances the live ones as it computes) and the coordinator's
//	    replica (changed only once a step's gradient is complete) are
//	    checkpointed as the last completed step, and Run returns
//	    ErrInterrupted. The abandoned step is redone on resume.
//
// Physical workers are goroutines in this process (worker.go); the Reducer
// interface is the seam where a network all-reduce plugs in.
package trainer
