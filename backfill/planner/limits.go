package planner

// ElasticShape is a running elastic job as counts: its request and its own
// (base) allocation. The daemon reads it from the job's comment (es-req
// min= max= lw=, or the runtime's workers=P/L) and squeue's node list and
// GPUs.
type ElasticShape struct {
	// MinNodes and MaxNodes are its request's node range (≥ 1).
	MinNodes, MaxNodes int
	// LogicalWorkers is the logical worker (EST) count it declared (lw=,
	// or L of workers=P/L once its runtime has reported); 0 when it
	// declared none.
	LogicalWorkers int
	// BaseGPUs on BaseNodes nodes are its own allocation.
	BaseGPUs, BaseNodes int
}

// ElasticBounds are the GPU counts the planner works with for one elastic
// job ([GPUBounds]).
type ElasticBounds struct {
	// GPUsPerNode is the GPUs per node of its own allocation (≥ 1).
	GPUsPerNode int
	// LogicalWorkers is the EST count it runs (≥ 1).
	LogicalWorkers int
	// MinGPUs and MaxGPUs are RunningJob.MinGPUs and MaxGPUs: the fewest
	// GPUs it may hold and the most, own and lent together.
	MinGPUs, MaxGPUs int
}

// GPUsPerNode is the GPUs per node of an allocation of gpus GPUs on nodes
// nodes, rounded down and at least 1 (1 for no nodes): a job's request
// counts nodes of this many GPUs (--gres=gpu:N is per node).
func GPUsPerNode(gpus, nodes int) int {
	if nodes < 1 {
		return 1
	}
	return max(1, gpus/nodes)
}

// LogicalWorkers is the logical worker (EST) count of a job that declared
// declared (0: none) and holds baseGPUs GPUs of its own: what it declared,
// else what the runtime fixes at the job's first start, one logical worker
// per physical worker it started with (elastic.Request), which the daemon
// takes to be one per GPU of its own allocation; at least 1. Such a job is
// therefore never grown past its own allocation.
func LogicalWorkers(declared, baseGPUs int) int {
	if declared > 0 {
		return declared
	}
	return max(1, baseGPUs)
}

// WorkerCap is the most physical workers a job may have, which is the most
// GPUs it may hold (a physical worker is one task on one GPU, own or lent):
// its node range's maximum times its GPUs per node, and at most its logical
// workers, since each physical worker runs at least one (EasyScale, arXiv
// 2208.14228: a job's ESTs are spread over its physical workers).
func WorkerCap(maxNodes, gpusPerNode, logicalWorkers int) int {
	return min(maxNodes*gpusPerNode, logicalWorkers)
}

// GPUBounds returns the planner's bounds for a running elastic job:
// MaxGPUs is its [WorkerCap], never below its own allocation (the
// planner never takes a job's own GPUs), and MinGPUs its
// request's minimum nodes times its GPUs per node, at least 1 and at most
// MaxGPUs.
func GPUBounds(s ElasticShape) ElasticBounds {
	b := ElasticBounds{GPUsPerNode: GPUsPerNode(s.BaseGPUs, s.BaseNodes), LogicalWorkers: LogicalWorkers(s.LogicalWorkers, s.BaseGPUs)}
	b.MaxGPUs = max(s.BaseGPUs, WorkerCap(s.MaxNodes, b.GPUsPerNode, b.LogicalWorkers))
	b.MinGPUs = min(b.MaxGPUs, max(1, s.MinNodes*b.GPUsPerNode))
	return b
}
