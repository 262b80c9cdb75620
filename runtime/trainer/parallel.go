package trainer

import "sync"

// parallelRanges splits [0, n) into up to parts contiguous ranges and calls
// fn on each from its own goroutine, returning when all are done. fn must
// only write outputs inside its range.
func parallelRanges(n, parts int, fn func(lo, hi int)) {
	if parts < 1 {
		parts = 1
	}
	if parts > n {
		parts = n
	}
	if parts <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
