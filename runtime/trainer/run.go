package trainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// job is the state of one Run: the coordinator's side of training.
type job struct {
	opts    Options
	log     hclog.Logger
	n, b    int
	seed    uint64
	horizon int64
	stop    int64

	// eng computes the steps (native.go, or runtime/torchengine).
	eng   Engine
	plan  placement.Plan
	alloc *schedule.Allocation
	// history is the allocation of every stretch of steps this run trained.
	history schedule.Schedule
	// out is the last committed step's report.
	out StepReport

	db *statedb.DB
	// follower copies the ledger to the coordinator's standby (nil:
	// the engine does not; ledgerfollow.go).
	follower LedgerFollower
	step     int64
	redone   int
	// stepRedos is how often the step in progress was redone after
	// losing workers (recorded in its ledger row).
	stepRedos   int
	resumedFrom int64
	startedOver *StartedOver
	// numericsPending: this run's numerics are recorded beside the ledger
	// once one of its steps is in it (state.go recordPendingNumerics).
	numericsPending bool
	lastLoss        float64
	digest          string
	// digests decides which steps the ledger hashes; sparse is eng when it
	// can skip the digest (nil for the native engine, hashed every step).
	digests *digestPolicy
	sparse  SparseDigester
	// rehashTo is the last step the ledger held when the run opened it:
	// the steps up to it that the run recomputes are hashed, so that they
	// are compared with the recorded ones.
	rehashTo    int64
	hashed      int
	stepSeconds float64
	progressAt  time.Time
	// stepStart is when the step in progress started (its ledger row's
	// wall time counts from it).
	stepStart time.Time
}

// Run trains opts.Spec to its horizon (or opts.StopAfter) on the allocation
// schedule, resuming from opts.StateDir when it holds a checkpoint of the
// same job. It returns the run's summary. Errors: a bad schedule, a state
// directory of another job, an unreadable checkpoint set, database write
// failures, or ctx cancellation (the state stays consistent at the last
// completed step).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	j, err := newJob(opts)
	if err != nil {
		return nil, err
	}
	defer j.close()
	start := time.Now()
	startStep := j.step
	if err := j.train(ctx); err != nil {
		return nil, err
	}
	wall := time.Since(start).Seconds()
	sum := &Summary{
		Job: opts.Spec.Name, JobID: opts.Spec.ID(), LogicalWorkers: j.n, MicroBatch: j.b,
		Steps: j.step, Horizon: j.horizon, Digest: j.digest, TrainLoss: j.lastLoss,
		Reallocations: max(0, len(j.history)-1), RedoneSteps: j.redone, ResumedFrom: j.resumedFrom, StartedOver: j.startedOver, WallSeconds: wall,
		Schedule: j.history.String(),
		Epoch:    float64(j.step) / float64(j.eng.StepsPerEpoch()), Engine: j.eng.Name(),
		DigestEvery: max(1, j.digests.Every()), HashedSteps: j.hashed,
	}
	if h, ratio, ok := j.digests.Cost(); ok {
		pct := 100 * ratio
		sum.DigestSeconds, sum.DigestCostPct = &h, &pct
	}
	if sc, ok := j.eng.(SelfChecker); ok {
		if status, secs := sc.SelfCheck(); status != "" {
			sum.SelfCheck = status
			if secs > 0 {
				sum.SelfCheckSeconds = &secs
			}
		}
	}
	if ran := j.step - startStep; ran > 0 && wall > 0 {
		sum.SamplesPerSec = float64(ran) * float64(j.n*j.b) / wall
	}
	if !opts.SkipEval {
		loss, acc, n, err := j.eng.Evaluate(ctx)
		switch {
		case errors.Is(err, ErrNoTestSet):
			j.log.Info("no final evaluation: the job has no test set")
		case err != nil:
			return nil, fmt.Errorf("evaluating the trained model: %w", err)
		default:
			sum.TestLoss, sum.TestAccuracy, sum.TestSamples = &loss, &acc, n
			j.log.Info("evaluated", "test_loss", loss, "test_accuracy", acc)
		}
	}
	return sum, nil
}

func newJob(opts Options) (*job, error) {
	spec := opts.Spec
	j := &job{opts: opts, n: spec.LogicalWorkers, b: spec.MicroBatch, seed: spec.Seed, log: opts.Logger}
	if j.log == nil {
		j.log = hclog.NewNullLogger()
	}
	if err := j.schedule().Validate(j.n); err != nil {
		return nil, err
	}
	eng := opts.Engine
	if eng == nil {
		var err error
		if eng, err = NativeEngine(opts); err != nil {
			return nil, err
		}
	}
	j.eng = eng
	j.digests = newDigestPolicy(1)
	if sd, ok := eng.(SparseDigester); ok {
		j.sparse, j.digests = sd, newDigestPolicy(sd.DigestEvery())
	}
	spe := eng.StepsPerEpoch()
	if spe < 1 {
		j.close()
		return nil, &jobspec.FieldError{Field: "micro_batch", Msg: fmt.Sprintf("%d gives no full micro-batch per epoch; lower micro_batch or logical_workers", j.b)}
	}
	var err error
	if j.horizon, err = spec.Horizon(spe); err != nil {
		j.close()
		return nil, err
	}
	j.stop = j.horizon
	if opts.StopAfter > 0 && opts.StopAfter < j.stop {
		j.stop = opts.StopAfter
	}
	if opts.StopAfter > j.horizon {
		j.log.Warn("--steps is past the job's horizon; stopping at the horizon", "steps", opts.StopAfter, "horizon", j.horizon)
	}
	if w := spec.LR.WarmupSteps; int64(w) > j.horizon {
		j.close()
		return nil, &jobspec.FieldError{Field: "lr_schedule.warmup_steps", Msg: fmt.Sprintf("%d exceeds the training horizon of %d steps (%s); lower warmup_steps or lengthen the run", w, j.horizon, horizonText(spec, spe))}
	}
	for _, a := range j.schedule()[1:] {
		if a.FromStep >= j.stop {
			j.log.Warn("a --workers entry starts after the run's last step and never applies", "from_step", a.FromStep, "stop", j.stop)
		}
	}

	// Initial state: the engine's (the seed's initialisation and fresh
	// contexts), unless a checkpoint of this job says otherwise.
	if opts.StateDir != "" {
		if err := j.openState(); err != nil {
			j.close()
			return nil, err
		}
		j.follower = followLedger(j.eng, j.db.LedgerPage, j.pendingRow)
	}
	j.digest, _ = j.eng.Digest()
	return j, nil
}

func (j *job) schedule() schedule.Schedule {
	if j.opts.Schedule != nil {
		return j.opts.Schedule
	}
	return schedule.Schedule{{FromStep: 0, Workers: j.n}}
}

func (j *job) close() {
	if j.eng != nil {
		if err := j.eng.Close(); err != nil {
			j.log.Warn("stopping workers", "error", err)
		}
		j.eng = nil
	}
	if j.db != nil {
		if err := j.db.Close(); err != nil {
			j.log.Warn("closing state database", "error", err)
		}
		j.db = nil
	}
}

// train runs steps until the stop step.
func (j *job) train(ctx context.Context) error {
	for j.step < j.stop {
		if ctx.Err() != nil {
			return j.interrupted(context.Cause(ctx))
		}
		if err := j.reallocate(ctx, j.schedule().At(j.step)); err != nil {
			if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
				return j.interrupted(context.Cause(ctx))
			}
			return j.saveOnNoWorkers(ctx, err)
		}
		if err := j.boundary(ctx); err != nil {
			return j.saveOnNoWorkers(ctx, err)
		}
		t0 := time.Now()
		j.stepStart = t0
		if j.sparse != nil {
			j.sparse.HashNext(j.mustHash(j.step + 1))
		}
		if err := j.runStep(ctx); err != nil {
			return j.saveOnNoWorkers(ctx, err)
		}
		j.step++
		if err := j.record(time.Since(t0)); err != nil {
			return err
		}
		if j.db != nil && (j.step%int64(j.opts.Spec.CheckpointEvery) == 0 || j.step == j.stop) {
			if err := j.checkpoint(); err != nil {
				return err
			}
		}
		j.progress(time.Since(t0))
		j.writeProgress(time.Since(t0), j.step == j.stop)
		if j.opts.OnStep != nil {
			j.opts.OnStep(j.step, j.stop, j.eng.Workers())
		}
	}
	j.endProgress()
	return nil
}

// ErrInterrupted is returned (wrapped) when ctx ends a run early (SIGTERM
// from Slurm at preemption or the time limit): the state was checkpointed
// at the last completed step, and rerunning the command resumes there.
var ErrInterrupted = errors.New("interrupted")

// interrupted checkpoints the last completed step and reports why the run
// stopped.
func (j *job) interrupted(cause error) error {
	if j.db != nil && j.step > 0 {
		if last, ok, _ := j.db.LastStep(); ok && last == j.step {
			if err := j.checkpoint(); err != nil {
				return fmt.Errorf("stopping at step %d (%v): %w", j.step, cause, err)
			}
		}
	}
	j.log.Warn("stopped before the end; rerun the same command to resume", "step", j.step, "cause", cause.Error())
	return fmt.Errorf("%w at step %d: %v", ErrInterrupted, j.step, cause)
}

// abandon gives up the step in progress when ctx ended during it, and
// checkpoints the last completed step: the engine's state is that step's
// (see Engine). The abandoned step is recomputed on resume.
func (j *job) abandon(cause error) error {
	j.log.Warn("abandoning the step in progress", "step", j.step, "cause", cause.Error())
	return j.interrupted(cause)
}

// saveOnNoWorkers checkpoints the last completed step when every physical
// worker is gone (all left or were lost, and none was on its way: see
// job.workers), so a rerun resumes there. An error wrapping ctx's own
// (SIGTERM while waiting for workers) is an interruption.
func (j *job) saveOnNoWorkers(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return j.interrupted(context.Cause(ctx))
	}
	if !errors.Is(err, ErrNoWorkers) {
		return err
	}
	// The workers may have left because the whole job is being stopped
	// (Slurm signals every task at once): give this process's own signal a
	// moment to arrive, then treat it as an interruption, not a failure.
	select {
	case <-ctx.Done():
		return j.interrupted(context.Cause(ctx))
	case <-time.After(time.Second):
	}
	if j.db != nil && j.step > 0 {
		if last, ok, _ := j.db.LastStep(); ok && last == j.step {
			if cerr := j.checkpoint(); cerr != nil {
				return fmt.Errorf("%w; checkpointing step %d also failed: %v", err, j.step, cerr)
			}
			return fmt.Errorf("%w; step %d is checkpointed: rerun the same command to resume", err, j.step)
		}
	}
	return err
}

// runStep runs one step on the engine. When workers are lost during the
// step, the engine restores the contexts and the step is redone on the
// survivors: nothing is lost or repeated. When ctx ends during the step
// (SIGTERM), the step is abandoned at once and the last completed step
// checkpointed (see abandon).
func (j *job) runStep(ctx context.Context) error {
	step := j.step
	j.stepRedos = 0
	for {
		rep, err := j.eng.Step(ctx, step, j.plan)
		if err == nil {
			j.out = rep
			break
		}
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			return j.abandon(context.Cause(ctx))
		}
		var lost *LostError
		if !errors.As(err, &lost) {
			return err
		}
		j.redone++
		j.stepRedos++
		j.log.Warn("workers lost; redoing the step on the survivors", "step", step, "lost", fmt.Sprint(lost.Ranks), "error", lost.Err)
		workers, err := j.workers(ctx)
		if err != nil {
			return err
		}
		if err := j.replan(workers, nil, "lost workers"); err != nil {
			return err
		}
	}
	j.lastLoss = meanLoss(j.out.Losses, j.n)
	return nil
}

// meanLoss is a step's training loss: the mean over its n logical workers
// of their micro-batch losses, summed in float64 in logical worker order.
func meanLoss(losses []float32, n int) float64 {
	var sum float64
	for _, l := range losses {
		sum += float64(l)
	}
	return sum / float64(n)
}

// boundary lets the engine admit joiners and release leavers, and
// re-places the logical workers when the membership changed.
func (j *job) boundary(ctx context.Context) error {
	changed, err := j.eng.Boundary(ctx, j.step)
	if err != nil {
		return fmt.Errorf("step boundary %d: %w", j.step, err)
	}
	workers, err := j.workers(ctx)
	if err != nil {
		return err
	}
	if !changed && len(j.plan) == workers {
		return nil
	}
	return j.replan(workers, j.alloc.Speeds, "membership")
}

// reallocate applies alloc if it differs from the current allocation:
// workers join (copying the coordinator's replica) or leave, and ESTs move
// with their contexts to the new placement.
func (j *job) reallocate(ctx context.Context, alloc schedule.Allocation) error {
	if j.alloc != nil && j.alloc.Workers == alloc.Workers && slices.Equal(j.alloc.Speeds, alloc.Speeds) {
		return nil
	}
	t0 := time.Now()
	if err := j.eng.Resize(ctx, alloc.Workers); err != nil {
		return fmt.Errorf("resizing to %d workers at step %d: %w", alloc.Workers, j.step, err)
	}
	j.alloc = &alloc
	if p, ok := j.eng.(Preparer); ok {
		if next, ok := j.schedule().Next(j.step); ok && next.Workers > alloc.Workers {
			p.Prepare(ctx, next.Workers)
		}
	}
	return j.replan(j.eng.Workers(), alloc.Speeds, "schedule", "rescale_ms", float64(time.Since(t0).Microseconds())/1000)
}

// noteAllocation appends a to the run's allocation history (what the
// summary reports as schedule and reallocations): a change at the same
// step replaces the previous entry (no step ran on it), and an allocation
// equal to the one before adds nothing, also after such a replacement (a
// joiner admitted and lost before its first step leaves no span).
func (j *job) noteAllocation(a schedule.Allocation) {
	h := j.history
	same := func(b schedule.Allocation) bool { return b.Workers == a.Workers && slices.Equal(b.Speeds, a.Speeds) }
	if n := len(h); n > 0 && same(h[n-1]) {
		return
	}
	if n := len(h); n > 0 && h[n-1].FromStep == a.FromStep {
		h = h[:n-1]
	}
	if n := len(h); n > 0 && same(h[n-1]) {
		j.history = h
		return
	}
	j.history = append(h, a)
}

// replan places the ESTs on the executor's current workers and records the
// allocation. speeds must match workers or be nil.
func (j *job) replan(workers int, speeds []float64, reason string, kv ...any) error {
	if workers < 1 {
		return fmt.Errorf("step %d: %w", j.step, ErrNoWorkers)
	}
	if speeds != nil && len(speeds) != workers {
		speeds = nil
	}
	plan, err := placement.Compute(j.n, workers, speeds)
	if err != nil {
		return fmt.Errorf("placing ESTs at step %d: %w", j.step, err)
	}
	j.plan = plan
	j.noteAllocation(schedule.Allocation{FromStep: j.step, Workers: workers, Speeds: speeds})
	j.log.Info("allocation", append([]any{"step", j.step, "world_size", workers, "placement", plan.String(),
		"imbalance", fmt.Sprintf("%.3f", plan.Imbalance(speeds)), "reason", reason}, kv...)...)
	if j.db != nil {
		err := j.db.RecordAllocation(statedb.Allocation{Step: j.step, Workers: workers, Speeds: speeds,
			Placement: plan.String(), Reason: reason, Time: time.Now()})
		if err != nil {
			return err // statedb's error names the step
		}
	}
	return nil
}

// mustHash reports whether completed step s is hashed: by the digest
// interval, and always the run's last step, every checkpoint step (the
// summary's digest and a resume's checks need them) and every step the
// ledger already held when the run opened it (a recomputed step is
// compared with its row).
func (j *job) mustHash(s int64) bool {
	return s == j.stop || s%int64(max(1, j.opts.Spec.CheckpointEvery)) == 0 || s <= j.rehashTo || j.digests.Hashed(s)
}

// record takes the digest of the completed step (unhashed when the engine
// skipped it), feeds the digest interval's measurement and appends the
// step to the ledger.
func (j *job) record(wall time.Duration) error {
	digest, per := j.eng.Digest()
	j.digest = digest
	if digest != "" {
		j.hashed++
		if j.sparse != nil {
			before := j.digests.Every()
			j.digests.Observe(j.sparse.HashSeconds(), wall.Seconds())
			if k := j.digests.Every(); k != before {
				h, ratio, _ := j.digests.Cost()
				j.log.Info("digest interval", "step", j.step, "every_steps", k, "hash_ms", fmt.Sprintf("%.2f", 1000*h),
					"cost_pct", fmt.Sprintf("%.3f", 100*ratio))
			}
		}
	}
	if j.db == nil {
		return nil
	}
	row := j.ledgerRow(j.step, j.out, wall)
	row.Digest, row.Unhashed, row.TensorDigests = digest, digest == "", per
	err := j.db.AppendLedger(row)
	if errors.Is(err, statedb.ErrDivergence) {
		return fmt.Errorf("step %d was recomputed after a resume and differs from the recorded run (a run with other numerics "+
			"than the ledger's, another CPU ISA, GPU model or torch release, computes other bits: resume where the job ran "+
			"before, or start it over with a new --state directory): %w", j.step, err)
	}
	if err != nil {
		return fmt.Errorf("recording step %d in the ledger: %w", j.step, err)
	}
	if err := j.recordPendingNumerics(digest != ""); err != nil {
		return err
	}
	if j.follower != nil {
		j.follower.LedgerRecorded(j.step)
	}
	return nil
}

// ledgerRow is the ledger row of step (the steps completed) from the
// report of its last engine step and its wall time, without a digest
// (Unhashed): the row record appends once the digest is taken, and the
// one PendingRow hands an engine before the commit.
func (j *job) ledgerRow(step int64, rep StepReport, wall time.Duration) statedb.LedgerEntry {
	return statedb.LedgerEntry{Step: step, Unhashed: true, Loss: meanLoss(rep.Losses, j.n), WallSeconds: wall.Seconds(),
		Workers: len(j.plan), Placement: j.plan.String(), SamplesHash: joinHashes(rep.Samples), Redos: j.stepRedos, Time: time.Now()}
}

// pendingRow is the trainer's PendingRow (LedgerFollower).
func (j *job) pendingRow(s int64, rep StepReport) statedb.LedgerEntry {
	return j.ledgerRow(s+1, rep, time.Since(j.stepStart))
}

func joinHashes(h []string) string {
	var b bytes.Buffer
	for i, s := range h {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// horizonText says where a job's horizon of optimizer steps comes from:
// its steps key, or its epochs times the steps of one epoch (spe) at its
// micro-batch, for an error about it.
func horizonText(spec *jobspec.Spec, spe int) string {
	if spec.Steps > 0 {
		return fmt.Sprintf("steps = %d", spec.Steps)
	}
	return fmt.Sprintf("epochs = %d of %d steps at micro_batch %d", spec.Epochs, spe, spec.MicroBatch)
}
