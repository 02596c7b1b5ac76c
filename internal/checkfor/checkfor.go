// Package checkfor waits in tests for a condition that becomes true on its
// own time: a message delivered, a container started, a pass made. It polls
// instead of sleeping a guessed duration, as nats-server's checkFor does.
package checkfor

import (
	"testing"
	"time"
)

// Eventually calls fn every interval until it returns nil. When timeout has
// passed and fn still fails, it fails the test (t.Fatalf, so it must be
// called from the test's goroutine) with fn's last error, the time waited
// and the number of attempts.
//
// fn is always called at least once. When the test ends while Eventually
// waits (it was called on another goroutine that outlived the test), it
// returns without reporting. Called from a Cleanup function, after the
// test's context ended, it polls until timeout.
func Eventually(t testing.TB, timeout, interval time.Duration, fn func() error) {
	t.Helper()
	ended := t.Context().Done()
	select {
	case <-ended:
		ended = nil // in a Cleanup function: the test is over, but not its cleanup
	default:
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for attempts := 1; ; attempts++ {
		err := fn()
		if err == nil {
			return
		}
		elapsed := time.Since(start)
		if elapsed >= timeout {
			t.Fatalf("condition not met within %s (waited %s, %d attempts): %v",
				timeout, elapsed.Round(time.Millisecond), attempts, err)
		}
		timer.Reset(interval)
		select {
		case <-ended:
			return
		case <-timer.C:
		}
	}
}
