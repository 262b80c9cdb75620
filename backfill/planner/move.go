package planner

import "math"

// MoveMargin is the fraction of a running job's time left on its GPUs now
// by which a move must end it sooner before [MoveToFaster] moves it: the
// move's cost is an estimate (Slurm's requeue delay, the restart, the
// steps since the last checkpoint redone), and a moved job holds the fast
// GPUs that jobs submitted after it would have had. 0.1 against 0.2 and
// 0.3 (the default from E40 to E45, which no P100 → V100 move could pass:
// 3.1 / 2.4 < 1.3): fewer workloads worse than rigid on both families of
// draws, with the same means (BENCHMARKS.md, issue 17, E46).
const MoveMargin = 0.1

// DefaultMoveCost is the seconds a move costs a job by default: Slurm
// makes a requeued job eligible again after cred_expire (120 s by default;
// shared/slurm-lab/NOTES.md), then the runtime starts and resumes from its
// newest checkpoint (torch_rescale_fresh_s 3.3 s, BENCHMARKS.md) and redoes
// the steps since it, about half of checkpoint_every.
const DefaultMoveCost = 150.0

// MoveAmongLongest is how long, as a fraction of the longest time left of
// any other running job, a job's own time left must be before
// [MoveToFaster] moves it: a move takes fast GPUs for the rest of the job,
// which pays off for the schedule when the job is long against the others
// (it sets the makespan, and its own completion time counts the most),
// and a short job is left where Slurm put it. 0.1 since E62, against 0.5
// (E40 to E61), 0.25 and no bound: fewer workloads worse than rigid on
// both families of draws and a lower mean JCT, where 0.5 left long jobs
// on T4s behind one longer job (BENCHMARKS.md, issue 17, E40, E62).
const MoveAmongLongest = 0.1

// MoveRequest asks whether a running elastic job that may mix GPU types
// (d2) should move to faster GPUs that are idle now: Model is its
// throughput model, Work its remaining work (seconds at Model.RefGPUs
// reference GPUs), Now its GPUs now by speed, To the GPUs it would run on
// after the move, Cost the seconds the move costs it (DefaultMoveCost)
// and Longest the longest time left of any other running job (seconds; 0:
// none runs).
type MoveRequest struct {
	Model   Model
	Work    float64
	Now     []SpeedCount
	To      []SpeedCount
	Cost    float64
	Longest float64
	// Redo is the work (seconds at Model.RefGPUs reference GPUs) the move
	// makes the job do again besides Work: a one-type (d1) job moved to
	// another GPU type starts over from step 0 (its checkpoint's bits
	// are another type's, and the torch runtime refuses to resume from it:
	// torchengine.ResumeError), so Redo is the work it has done; 0 for a
	// d2 job, which resumes from its checkpoint.
	Redo float64
}

// MoveToFaster reports whether the job is long against the others running
// (its time left where it runs, RunTime(Now), is at least
// MoveAmongLongest × Longest) and moving ends it sooner by more than
// MoveMargin of that time: Cost + RunTime(To, Work + Redo) < RunTime(Now)
// / (1 + MoveMargin). False for no work left, a negative Redo or GPUs
// that run it no faster.
//
// Why: a d2 job placed on T4s because no V100 was free when it started
// keeps their pace to the end (every step waits for the slowest GPU,
// EasyScale §4.2), and when it is long it sets the makespan; V100s that
// free up later never help it, since a job at its maximum does not grow
// and a batch host cannot be released (ShedNodes). EasyScale moves such
// a job's logical workers to the faster GPUs; under Slurm the job is
// requeued and resumes from its checkpoint, bit-identical, on the faster
// nodes (BENCHMARKS.md, issue 17, E40).
func MoveToFaster(q MoveRequest) bool {
	if q.Work <= 0 || q.Cost < 0 || math.IsNaN(q.Cost) || !(q.Redo >= 0) {
		return false
	}
	left := RunTime(q.Model, q.Now, q.Work)
	if left < MoveAmongLongest*q.Longest {
		return false
	}
	after := q.Cost + RunTime(q.Model, q.To, q.Work+q.Redo)
	return !math.IsInf(after, 1) && after*(1+MoveMargin) < left
}

// Pace is the GPUs by speed that set a running job's pace now: base (its
// own allocation), or all (base with its running extra jobs' GPUs) when m
// runs it faster on them (an extra job on slower GPUs can slow every step,
// EasyScale §4.2). [MoveToFaster] weighs a move against it (MoveRequest.Now);
// the simulator's rate takes the same maximum.
func Pace(m Model, base, all []SpeedCount) []SpeedCount {
	tb, _ := m.Throughput(base)
	if ta, _ := m.Throughput(all); ta > tb {
		return all
	}
	return base
}
