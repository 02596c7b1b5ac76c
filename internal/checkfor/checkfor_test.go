package checkfor

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fatal = fmt.Sprintf(format, args...)
}

func TestEventuallySucceeds(t *testing.T) {
	tests := []struct {
		name  string
		fails int // calls of fn that fail before it succeeds
	}{
		{"at once", 0},
		{"after a few attempts", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			calls := 0
			Eventually(r, time.Minute, time.Millisecond, func() error {
				calls++
				if calls <= tc.fails {
					return errors.New("not yet")
				}
				return nil
			})
			if r.fatal != "" {
				t.Fatalf("Eventually failed the test: %s", r.fatal)
			}
			if calls != tc.fails+1 {
				t.Fatalf("fn called %d times, want %d", calls, tc.fails+1)
			}
		})
	}
}

// TestEventuallyReportsLastError: on timeout the failure names the timeout,
// the time waited, the attempts and fn's last error.
func TestEventuallyReportsLastError(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	Eventually(r, 20*time.Millisecond, time.Millisecond, func() error {
		calls++
		if r.fatal != "" {
			return nil // Fatalf returned (a recorder): end the loop
		}
		return fmt.Errorf("attempt %d failed", calls)
	})
	for _, want := range []string{"condition not met within 20ms", "waited ", "attempts", fmt.Sprintf("attempt %d failed", calls-1)} {
		if !strings.Contains(r.fatal, want) {
			t.Errorf("failure %q lacks %q", r.fatal, want)
		}
	}
}

// TestEventuallyStopsWhenTheTestEnds: a wait on a goroutine that outlives
// its test returns without reporting.
func TestEventuallyStopsWhenTheTestEnds(t *testing.T) {
	done := make(chan string, 1)
	t.Run("inner", func(t *testing.T) {
		r := &recorder{TB: t}
		started := make(chan struct{})
		go func() {
			var once sync.Once
			Eventually(r, time.Hour, time.Millisecond, func() error {
				once.Do(func() { close(started) })
				return errors.New("never")
			})
			r.mu.Lock()
			defer r.mu.Unlock()
			done <- r.fatal
		}()
		<-started
	})
	select {
	case fatal := <-done:
		if fatal != "" {
			t.Fatalf("Eventually reported after its test ended: %s", fatal)
		}
	case <-time.After(time.Minute):
		t.Fatal("Eventually kept polling after its test ended")
	}
}

// TestEventuallyInCleanup: in a Cleanup function, where the test's context
// has ended, Eventually still polls.
func TestEventuallyInCleanup(t *testing.T) {
	calls := 0
	t.Run("inner", func(t *testing.T) {
		t.Cleanup(func() {
			Eventually(t, time.Minute, time.Millisecond, func() error {
				calls++
				if calls < 3 {
					return errors.New("not yet")
				}
				return nil
			})
		})
	})
	if calls != 3 {
		t.Fatalf("fn called %d times in Cleanup, want 3", calls)
	}
}
