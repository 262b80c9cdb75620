package engine

import "sync"

// minParallelWork is the approximate number of multiply-adds below which an
// op runs on the calling goroutine: starting goroutines costs a few
// microseconds, about this much arithmetic.
const minParallelWork = 1 << 15

// parallelFor calls fn on contiguous chunks [lo,hi) covering [0,n), on up to
// threads goroutines, or once on the calling goroutine when work (the
// approximate total multiply-adds) is below minParallelWork. Callers give
// each index its own output elements, so results never depend on how the
// range is split.
func parallelFor(threads, n, work int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	g := min(threads, n)
	if g <= 1 || work < minParallelWork {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range g {
		lo, hi := i*n/g, (i+1)*n/g
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// chunks reports how many goroutines parallelFor would use, so callers can
// size per-goroutine scratch or pick an inner thread count.
func chunks(threads, n, work int) int {
	if n <= 0 {
		return 0
	}
	if work < minParallelWork {
		return 1
	}
	return max(min(threads, n), 1)
}
