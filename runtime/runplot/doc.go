// Package runplot draws training runs from their state directories: the
// picture of EasyScale's promise, where a run on a fixed allocation and one
// on a changing allocation have the same loss curve while their physical
// workers differ.
//
//	state dir --ReadRun (statedb, read-only)--> Run{Steps, Allocations}
//	[]Run --SVG (pure: values in, bytes out)--> one SVG document
//
//	 loss  |\___                        one polyline per run; the first run
//	       |    ''--..___ o             widest and translucent, later ones
//	       |             '''----....    narrower on top; o = redone step
//	       +------:------:-----:----- step
//	workers|  ____:      :_____:        step function per run; dashed
//	       |_|    :______|     :____    lines at reallocations
//
// The picture is plain SVG written by hand (no plotting library), so it
// can be checked element by element: each run is a <polyline class="loss">
// and a <polyline class="workers">, reallocations <line class="realloc">
// and redone steps <circle class="redo">, each with data-run and (marks)
// data-step. The command is easyscale-plot (runtime/cmd/easyscale-plot),
// kept out of the compute-node binary easyscale. Both engines, native and
// torch, record the same ledger, so either is drawn the same way.
//
// x is the number of completed steps: ledger row s (the s-th step) is the
// point x = s of the loss curve and the workers segment from s-1 to s; an
// allocation recorded at step boundary b (b steps completed) is a line at
// x = b.
package runplot
