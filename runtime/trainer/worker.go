package trainer

import (
	"sync"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
)

// worker is one physical worker: a goroutine with its own model replica,
// optimizer state, autodiff tape and share of the cores. It executes the
// functions sent to it one at a time, in order.
type worker struct {
	rank   int
	net    models.Net
	params []models.Named
	opt    optim.Optimizer
	tape   *engine.Tape
	// buffers is the worker's own BatchNorm set, used only by the
	// AblateBuffers ablation (buffers tied to the device, not the EST).
	buffers []models.Named

	tasks chan func()
	wg    *sync.WaitGroup
}

// startWorker launches the goroutine of a new worker.
func startWorker(rank int, net models.Net, opt optim.Optimizer, threads int) *worker {
	w := &worker{
		rank:    rank,
		net:     net,
		params:  net.Params(),
		opt:     opt,
		tape:    engine.NewTape(threads),
		buffers: net.NewBuffers(),
		tasks:   make(chan func()),
		wg:      &sync.WaitGroup{},
	}
	go func() {
		for f := range w.tasks {
			f()
			w.wg.Done()
		}
	}()
	return w
}

// submit queues f on the worker; wait blocks until every queued f is done.
func (w *worker) submit(f func()) {
	w.wg.Add(1)
	w.tasks <- f
}

func (w *worker) wait() { w.wg.Wait() }

// stop ends the worker's goroutine after its queued work.
func (w *worker) stop() {
	w.wait()
	close(w.tasks)
}

// onAll runs f(w) on every worker concurrently and waits for all.
func onAll(ws []*worker, f func(w *worker)) {
	for _, w := range ws {
		w.submit(func() { f(w) })
	}
	for _, w := range ws {
		w.wait()
	}
}

// flattenGrads copies the gradients of params, in order, into dst.
func flattenGrads(dst []float32, params []models.Named) {
	off := 0
	for _, p := range params {
		off += copy(dst[off:], p.T.Grad)
	}
}

// unflattenGrads copies src into the gradients of params, in order.
func unflattenGrads(params []models.Named, src []float32) {
	off := 0
	for _, p := range params {
		off += copy(p.T.Grad, src[off:])
	}
}

// paramCount is the total number of parameter elements.
func paramCount(params []models.Named) int {
	n := 0
	for _, p := range params {
		n += p.T.Len()
	}
	return n
}
