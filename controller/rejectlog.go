package controller

import (
	"sync"
	"time"
)

// rejectLogInterval is how often the controller logs the malformed
// messages of one node: at most one line per node and interval, the next
// carrying suppressed=N.
const rejectLogInterval = time.Minute

// maxRejectLogKeys bounds the sources a rejectLimiter remembers; past it,
// after forgetting the quiet ones, further sources share one record.
const maxRejectLogKeys = 4096

// rejectOverflow is the record shared by sources past maxRejectLogKeys.
const rejectOverflow = "\x00other sources"

// rejectLimiter decides which malformed messages are logged: a node may
// publish them as fast as its link allows, and a line for each would let
// it fill the controller's disk. The zero value is ready to use (now nil
// is time.Now); it is safe for concurrent use.
type rejectLimiter struct {
	now func() time.Time // set before first use, or nil

	mu   sync.Mutex
	keys map[string]*rejectKey // guarded by mu
}

// rejectKey is what a rejectLimiter knows of one source.
type rejectKey struct {
	last       time.Time // the last line logged
	suppressed int       // lines not logged since
}

// allow reports whether a line about source may be logged now, and how
// many were suppressed before it.
func (l *rejectLimiter) allow(source string) (suppressed int, ok bool) {
	now := time.Now()
	if l.now != nil {
		now = l.now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*rejectKey{}
	}
	k := l.keys[source]
	if k == nil && len(l.keys) >= maxRejectLogKeys {
		for s, q := range l.keys {
			if now.Sub(q.last) >= rejectLogInterval && q.suppressed == 0 {
				delete(l.keys, s)
			}
		}
		if len(l.keys) >= maxRejectLogKeys {
			source = rejectOverflow
			k = l.keys[source]
		}
	}
	if k == nil {
		l.keys[source] = &rejectKey{last: now}
		return 0, true
	}
	if now.Sub(k.last) < rejectLogInterval {
		k.suppressed++
		return 0, false
	}
	suppressed = k.suppressed
	k.last, k.suppressed = now, 0
	return suppressed, true
}
