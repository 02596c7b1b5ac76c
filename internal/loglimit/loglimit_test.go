package loglimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLimiterOneLinePerKeyAndInterval(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := New(time.Minute, 10, func() time.Time { return now })
	n, ok := l.Allow("a")
	assert.True(t, ok, "first line of a key passes")
	assert.Zero(t, n)
	for range 3 {
		_, ok = l.Allow("a")
		assert.False(t, ok, "within the interval")
	}
	_, ok = l.Allow("b")
	assert.True(t, ok, "another key is its own")
	now = now.Add(time.Minute)
	n, ok = l.Allow("a")
	assert.True(t, ok, "after the interval")
	assert.Equal(t, 3, n, "counts what was suppressed")
}

func TestLimiterKeysBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := New(time.Minute, 100, func() time.Time { return now })
	passed := 0
	for i := range 150 {
		if _, ok := l.Allow(fmt.Sprintf("k%d", i)); ok {
			passed++
		}
	}
	assert.Equal(t, 101, passed, "one per key, then one for the overflow")
	assert.LessOrEqual(t, l.Len(), 101)

	now = now.Add(time.Minute)
	_, ok := l.Allow("fresh")
	assert.True(t, ok, "quiet keys are forgotten to make room")
	assert.LessOrEqual(t, l.Len(), 101)
}

func TestNilLimiterPassesEverything(t *testing.T) {
	var l *Limiter
	for range 3 {
		n, ok := l.Allow("a")
		assert.True(t, ok)
		assert.Zero(t, n)
	}
	assert.Zero(t, l.Len())
}
