package fake

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// TestPullTakesLinkTime: with an image size and a link speed, a pull
// transfers the image in ticks with progress, an interrupted pull resumes
// where it stopped, and a present image transfers nothing.
func TestPullTakesLinkTime(t *testing.T) {
	r := New()
	r.ImageSize = func(string) int64 { return 100 << 10 }
	r.LinkBytesPerSecond = 1 << 20 // 100 KiB in about 0.1 s
	var seen []int64
	err := r.PullImageProgress(context.Background(), "app:2", schema.PullIfNotPresent, nil, func(done, total int64) {
		assert.Equal(t, int64(100<<10), total)
		seen = append(seen, done)
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(seen), 3, "progress at the start, on the way and at the end: %v", seen)
	assert.Zero(t, seen[0])
	assert.Equal(t, int64(100<<10), seen[len(seen)-1])
	assert.True(t, slices.IsSorted(seen), "progress only grows: %v", seen)
	_, pulled := r.PulledAt("app:2")
	assert.True(t, pulled)

	ctx, cancel := context.WithCancel(context.Background())
	var first int64
	err = r.PullImageProgress(ctx, "app:3", schema.PullIfNotPresent, nil, func(done, total int64) {
		if done > 0 && first == 0 {
			first = done
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	var resumedAt int64 = -1
	require.NoError(t, r.PullImageProgress(context.Background(), "app:3", schema.PullIfNotPresent, nil, func(done, total int64) {
		if resumedAt < 0 {
			resumedAt = done
		}
	}))
	assert.GreaterOrEqual(t, resumedAt, first, "the second pull resumes where the first stopped")

	calls := 0
	require.NoError(t, r.PullImageProgress(context.Background(), "app:3", schema.PullAlways, nil, func(done, total int64) { calls++ }))
	assert.Zero(t, calls, "a present image transfers nothing")
}
