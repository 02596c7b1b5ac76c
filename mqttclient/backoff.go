package mqttclient

import (
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with full jitter: before retry n
// (counting from 0) the client sleeps a uniformly random duration in
// [0, min(Max, Initial*2^n)]. Full jitter spreads a fleet that lost its
// broker at the same instant over the whole window, so 10,000 devices do not
// reconnect in lock-step after a broker restart.
type Backoff struct {
	// Initial is the ceiling of the first retry window. Default 1 s.
	Initial time.Duration
	// Max caps the window. Default 2 min.
	Max time.Duration
	// ResetAfter is how long a connection must have lasted for the next
	// reconnection to start again from Initial. Default 1 min.
	ResetAfter time.Duration
}

// Default backoff settings.
const (
	DefaultBackoffInitial    = time.Second
	DefaultBackoffMax        = 2 * time.Minute
	DefaultBackoffResetAfter = time.Minute
)

// withDefaults fills zero fields.
func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoffInitial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoffMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = DefaultBackoffResetAfter
	}
	return b
}

// Ceiling returns the upper bound of the window for retry attempt (0-based):
// min(Max, Initial*2^attempt). b must have positive Initial and Max.
func (b Backoff) Ceiling(attempt int) time.Duration {
	ceiling := b.Initial
	for i := 0; i < attempt && ceiling < b.Max; i++ {
		ceiling *= 2
	}
	return min(ceiling, b.Max)
}

// Delay returns a uniformly random duration in [0, Ceiling(attempt)] drawn
// from rnd. It is pure given rnd, so tests seed it.
func (b Backoff) Delay(attempt int, rnd *rand.Rand) time.Duration {
	return jitter(b.Ceiling(attempt), rnd)
}

// jitter returns a uniformly random duration in [0, ceiling].
func jitter(ceiling time.Duration, rnd *rand.Rand) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rnd.Int64N(int64(ceiling) + 1))
}
