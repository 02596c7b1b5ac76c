package fanout

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEachCoversEveryItemOnce(t *testing.T) {
	for _, tc := range []struct{ n, minChunk, procs int }{
		{0, 1, 4}, {1, 1, 4}, {7, 1, 4}, {8, 2, 4}, {1000, 64, 2}, {1000, 64, 3}, {5, 100, 4}, {10, 0, 4},
	} {
		prev := runtime.GOMAXPROCS(tc.procs)
		counts := make([]atomic.Int32, tc.n)
		var calls atomic.Int32
		Each(tc.n, tc.minChunk, func(lo, hi int) {
			calls.Add(1)
			assert.Less(t, lo, hi, "empty range")
			for i := lo; i < hi; i++ {
				counts[i].Add(1)
			}
		})
		runtime.GOMAXPROCS(prev)
		for i := range counts {
			assert.EqualValues(t, 1, counts[i].Load(), "n=%d item %d", tc.n, i)
		}
		assert.LessOrEqual(t, int(calls.Load()), tc.procs, "n=%d: more ranges than workers", tc.n)
		if tc.n > 0 && tc.n < 2*max(tc.minChunk, 1) {
			assert.EqualValues(t, 1, calls.Load(), "n=%d below two chunks: one call", tc.n)
		}
	}
}
