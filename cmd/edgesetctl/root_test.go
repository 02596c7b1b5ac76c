package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestStreamsDefaults: streams built without a clock or a watch interval,
// as tests build them, keep time.Now and poll every second.
func TestStreamsDefaults(t *testing.T) {
	t.Parallel()
	var zero streams
	before := time.Now()
	assert.False(t, zero.now().Before(before), "the zero clock is time.Now")
	assert.Equal(t, time.Second, zero.watchInterval())

	set := streams{clock: func() time.Time { return fixedNow }, watchEvery: time.Millisecond}
	assert.Equal(t, fixedNow, set.now())
	assert.Equal(t, time.Millisecond, set.watchInterval())
}
