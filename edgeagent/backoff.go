package edgeagent

import "time"

// Backoff is the restart and pull retry schedule: Initial, doubling on each
// consecutive failure up to Max; a container that ran ResetAfter or longer
// before failing starts again from Initial.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	ResetAfter time.Duration
}

// DefaultBackoff is kubelet's schedule: 10 s doubling to 5 min, reset after
// 10 min of healthy running.
var DefaultBackoff = Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute, ResetAfter: 10 * time.Minute}

// Delay returns the wait after the failures-th consecutive failure
// (failures >= 1).
func (b Backoff) Delay(failures int) time.Duration {
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// retryState is one backoff in progress: how many consecutive failures and
// when the next attempt may be made.
type retryState struct {
	failures int
	until    time.Time
}

// next records a failure at now after ranFor of healthy running (zero for
// a failed pull) and returns the new state.
func (b Backoff) next(s retryState, now time.Time, ranFor time.Duration) retryState {
	if ranFor >= b.ResetAfter {
		s.failures = 0
	}
	s.failures++
	s.until = now.Add(b.Delay(s.failures))
	return s
}

// waiting reports whether an attempt at now must still wait.
func (s retryState) waiting(now time.Time) bool {
	return now.Before(s.until)
}
