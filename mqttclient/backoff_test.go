package mqttclient

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffCeiling(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 2 * time.Minute}
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{0, time.Second},
		{1, 2 * time.Second},
		{2, 4 * time.Second},
		{6, 64 * time.Second},
		{7, 2 * time.Minute},
		{1000, 2 * time.Minute}, // no overflow
	}
	for _, tc := range tests {
		if got := b.Ceiling(tc.attempt); got != tc.want {
			t.Errorf("Ceiling(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
}

func TestBackoffDelayJitter(t *testing.T) {
	tests := []struct {
		name    string
		backoff Backoff
		attempt int
		ceiling time.Duration
	}{
		{"first retry", Backoff{Initial: time.Second, Max: 2 * time.Minute}, 0, time.Second},
		{"doubling", Backoff{Initial: time.Second, Max: 2 * time.Minute}, 3, 8 * time.Second},
		{"capped", Backoff{Initial: time.Second, Max: 2 * time.Minute}, 20, 2 * time.Minute},
		{"tiny", Backoff{Initial: time.Nanosecond, Max: 4 * time.Nanosecond}, 5, 4 * time.Nanosecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, 2))
			seen := map[time.Duration]bool{}
			var lowHalf, highHalf int
			for range 1000 {
				d := tc.backoff.Delay(tc.attempt, rnd)
				if d < 0 || d > tc.ceiling {
					t.Fatalf("Delay(%d) = %s, outside [0, %s]", tc.attempt, d, tc.ceiling)
				}
				seen[d] = true
				if d < tc.ceiling/2 {
					lowHalf++
				} else {
					highHalf++
				}
			}
			if len(seen) < 2 {
				t.Fatalf("all 1000 delays equal %v: no jitter", seen)
			}
			// Full jitter covers the whole window, not just its top.
			if lowHalf < 200 || highHalf < 200 {
				t.Errorf("delays not spread over [0, %s]: %d below half, %d above", tc.ceiling, lowHalf, highHalf)
			}
		})
	}
}

func TestBackoffDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Backoff
		want Backoff
	}{
		{"zero", Backoff{}, Backoff{time.Second, 2 * time.Minute, time.Minute}},
		{"max below initial", Backoff{Initial: time.Minute, Max: time.Second}, Backoff{time.Minute, time.Minute, time.Minute}},
		{"kept", Backoff{5 * time.Second, time.Hour, time.Second}, Backoff{5 * time.Second, time.Hour, time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.withDefaults(); got != tc.want {
				t.Errorf("withDefaults() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
