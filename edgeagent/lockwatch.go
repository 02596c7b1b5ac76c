package edgeagent

import (
	"context"
	"sync"
	"time"
)

// DefaultUpdateLockPoll is how often the agent looks at the update locks
// of the running instances that opt in (Config.UpdateLockPoll).
const DefaultUpdateLockPoll = 2 * time.Second

// lockWatcher polls the lock files of the running instances that opt into
// the update lock, and asks the loop for a pass when one is taken,
// released or renewed, so the lock's state reaches the controller within
// a poll interval rather than at the next resync. The loop tells it, after
// every pass, which files to watch and what it saw of them.
type lockWatcher struct {
	interval time.Duration
	poke     func()

	mu   sync.Mutex           // guards seen
	seen map[string]lockState // lock directory -> what the last pass saw
}

func newLockWatcher(interval time.Duration, poke func()) *lockWatcher {
	return &lockWatcher{interval: interval, poke: poke, seen: map[string]lockState{}}
}

// set replaces the watched directories with seen.
func (w *lockWatcher) set(seen map[string]lockState) {
	w.mu.Lock()
	w.seen = seen
	w.mu.Unlock()
}

// Run polls until ctx ends.
func (w *lockWatcher) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.changed() {
			w.poke()
		}
	}
}

// changed reports whether a watched lock differs from what the last pass
// saw.
func (w *lockWatcher) changed() bool {
	w.mu.Lock()
	seen := w.seen
	w.mu.Unlock()
	for dir, was := range seen {
		now, err := readLock(dir)
		if err == nil && (now.held != was.held || now.own != was.own || !now.since.Equal(was.since)) {
			return true
		}
	}
	return false
}
