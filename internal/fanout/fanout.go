// Package fanout splits independent work over the machine's cores: the
// pure, per-item parts of a large decision (encoding 100,000 desired
// states) run on every core while the parts that must stay in order
// (store puts, state commits) run after them on one.
package fanout

import (
	"runtime"
	"sync"
)

// Each calls fn(lo, hi) over consecutive ranges that together cover
// [0, n), concurrently on up to GOMAXPROCS goroutines, and returns when
// every call has returned. Ranges hold at least minChunk items, so small
// inputs run on the caller's goroutine alone, paying nothing for the
// split. fn must only touch what its own range owns.
func Each(n, minChunk int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(minChunk, 1))
	if workers <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	size := (n + workers - 1) / workers
	for lo := size; lo < n; lo += size {
		wg.Go(func() { fn(lo, min(lo+size, n)) })
	}
	fn(0, min(size, n))
	wg.Wait()
}
