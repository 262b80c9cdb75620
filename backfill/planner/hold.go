package planner

import "math"

// HoldMargin is the fraction of a job's run time on the GPUs free now by
// which waiting for faster ones must end it sooner before HoldForFaster
// leaves it pending: the wait is estimated from the running jobs' time
// limits, which jobs reserved ahead of it may still delay.
const HoldMargin = 0.1

// HoldOption is one way for a queued job to wait for faster GPUs: the GPU
// types it would start on (a prefix of its types, fastest first), the
// seconds until its request fits on them alone (Wait, 0: it fits now) and
// its speeds on the allocation it would get then.
type HoldOption struct {
	Types  []string
	Wait   float64
	Speeds []SpeedCount
}

// HoldRequest asks whether a queued job that may mix GPU types (d2,
// untyped) should start where Slurm would place it first or wait for
// faster types. Model is its throughput model, Work its remaining work
// (seconds at Model.RefGPUs reference GPUs); Any is its earliest start on
// any of its types (Wait 0: it fits now) with its speeds there, Options
// the faster alternatives.
type HoldRequest struct {
	Model   Model
	Work    float64
	Any     HoldOption
	Options []HoldOption
}

// HoldForFaster picks the option that ends the job earliest (its wait plus
// RunTime there) and returns it with ok true when that end beats the job's
// end on any type (Any's wait plus RunTime there) by more than HoldMargin
// of the latter: the job waits for those types (or, with Wait 0, starts on
// them now). ok is false when Any ends it as soon, within the margin, or
// no option is usable.
//
// Why: Slurm starts an untyped job on whatever GPUs are free, and on a mix
// with slower types every step waits for the slowest GPU (EasyScale §4.2).
// A long job placed on T4s because no V100 node was free just then can run
// three times longer than after a short wait, and as the job that ends last
// it sets the makespan; rigid scheduling is exposed to the same placement,
// but an elastic schedule moves start times and so which job meets it
// (BENCHMARKS.md, issue 17, E32). The daemon's half would exclude the
// slower nodes from the pending job (`scontrol update JobId=ID
// ExcNodeList=`); the simulator applies it to the queue head
// (simulator.Config.HoldForFast).
func HoldForFaster(q HoldRequest) (HoldOption, bool) {
	runAny := q.Any.Wait + RunTime(q.Model, q.Any.Speeds, q.Work)
	best, bestEnd := -1, math.Inf(1)
	for i, o := range q.Options {
		if o.Wait < 0 || math.IsNaN(o.Wait) {
			continue
		}
		if end := o.Wait + RunTime(q.Model, o.Speeds, q.Work); end < bestEnd {
			best, bestEnd = i, end
		}
	}
	if best < 0 || math.IsInf(bestEnd, 1) || bestEnd*(1+HoldMargin) >= runAny {
		return HoldOption{}, false
	}
	return q.Options[best], true
}
