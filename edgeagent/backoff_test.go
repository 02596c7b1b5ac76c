package edgeagent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffDelay(t *testing.T) {
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		assert.Equal(t, w, DefaultBackoff.Delay(i+1), "failure %d", i+1)
	}
	assert.Equal(t, 5*time.Minute, DefaultBackoff.Delay(1000), "no overflow")
}

func TestBackoffNext(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		prev         retryState
		ranFor       time.Duration
		wantFailures int
		wantDelay    time.Duration
	}{
		{"first crash", retryState{}, time.Second, 1, 10 * time.Second},
		{"second crash doubles", retryState{failures: 1}, 30 * time.Second, 2, 20 * time.Second},
		{"capped", retryState{failures: 8}, time.Minute, 9, 5 * time.Minute},
		{"healthy ten minutes resets", retryState{failures: 8}, 10 * time.Minute, 1, 10 * time.Second},
		{"just under ten minutes does not", retryState{failures: 3}, 10*time.Minute - time.Second, 4, 80 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DefaultBackoff.next(tc.prev, t0, tc.ranFor)
			assert.Equal(t, tc.wantFailures, got.failures)
			assert.Equal(t, t0.Add(tc.wantDelay), got.until)
			assert.True(t, got.waiting(t0.Add(tc.wantDelay-time.Nanosecond)))
			assert.False(t, got.waiting(t0.Add(tc.wantDelay)))
		})
	}
}
