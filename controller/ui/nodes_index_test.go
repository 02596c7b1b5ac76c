package ui

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
)

// countingBackend counts ListNodes calls.
type countingBackend struct {
	*fakeBackend
	lists atomic.Int32
}

func (c *countingBackend) ListNodes(ctx context.Context) ([]api.Node, error) {
	c.lists.Add(1)
	return c.fakeBackend.ListNodes(ctx)
}

// TestNodeIndexServesStaleWhileRunReads: past maxAge a page gets the
// snapshot it has and Run is asked for a new one; past staleLimit, or
// after invalidate, the page waits for a listing.
func TestNodeIndexServesStaleWhileRunReads(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	x := newNodeIndex(2*time.Second, func() time.Time { return time.Unix(0, clock.Load()) })
	b := &countingBackend{fakeBackend: newFake(3, now)}
	ctx := context.Background()

	first, err := x.get(ctx, b)
	require.NoError(t, err)
	assert.EqualValues(t, 1, b.lists.Load(), "the first page waits for a listing")

	clock.Store(now.Add(3 * time.Second).UnixNano())
	snap, err := x.get(ctx, b)
	require.NoError(t, err)
	assert.Same(t, first, snap, "a stale snapshot is served at once")
	assert.EqualValues(t, 1, b.lists.Load())
	select {
	case <-x.stale:
	default:
		t.Fatal("Run was not asked for a new snapshot")
	}
	fresh, err := x.fresh(ctx, b) // what Run does
	require.NoError(t, err)
	assert.NotSame(t, first, fresh)
	assert.EqualValues(t, 2, b.lists.Load())

	clock.Store(now.Add(3*time.Second + staleLimit*2*time.Second).UnixNano())
	_, err = x.get(ctx, b)
	require.NoError(t, err)
	assert.EqualValues(t, 3, b.lists.Load(), "past staleLimit the page waits")

	x.invalidate()
	_, err = x.get(ctx, b)
	require.NoError(t, err)
	assert.EqualValues(t, 4, b.lists.Load(), "after the dashboard's own action the page waits")
}
