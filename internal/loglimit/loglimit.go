// Package loglimit decides which log lines about what clients do may be
// written: a client can repeat what gets logged (failed logins, malformed
// messages, bad packets) as fast as its link allows, and a line for each
// would let it fill the disk. A Limiter passes at most one line per key and
// interval; the next one to pass says how many were suppressed.
package loglimit

import (
	"sync"
	"time"
)

// overflowKey is the key shared by the keys past a Limiter's bound.
const overflowKey = "\x00overflow"

// Limiter passes at most one line per key and interval, remembering at
// most maxKeys keys: past them, after forgetting the quiet ones, every new
// key shares one, so memory is bounded and a flood from ever new sources is
// still limited. It is safe for concurrent use. A nil Limiter, or one
// with no interval, passes every line.
type Limiter struct {
	interval time.Duration
	maxKeys  int
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*key // guarded by mu
}

// key is what a Limiter knows of one key.
type key struct {
	last       time.Time // when a line of the key last passed
	suppressed int       // lines not passed since
}

// New returns a Limiter; now nil is time.Now.
func New(interval time.Duration, maxKeys int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{interval: interval, maxKeys: maxKeys, now: now, keys: map[string]*key{}}
}

// Allow reports whether a line of name may be written now and how many
// were suppressed before it.
func (l *Limiter) Allow(name string) (suppressed int, ok bool) {
	if l == nil || l.interval <= 0 {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[name]
	if k == nil {
		if len(l.keys) >= l.maxKeys {
			l.forgetQuietLocked(now)
		}
		if len(l.keys) >= l.maxKeys {
			name = overflowKey
			k = l.keys[name]
		}
	}
	if k == nil {
		l.keys[name] = &key{last: now}
		return 0, true
	}
	if now.Sub(k.last) < l.interval {
		k.suppressed++
		return 0, false
	}
	suppressed = k.suppressed
	k.last, k.suppressed = now, 0
	return suppressed, true
}

// Len is how many keys the Limiter remembers.
func (l *Limiter) Len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// forgetQuietLocked drops the keys with nothing suppressed whose interval
// has passed: their next line passes anyway.
func (l *Limiter) forgetQuietLocked(now time.Time) {
	for name, k := range l.keys {
		if k.suppressed == 0 && now.Sub(k.last) >= l.interval {
			delete(l.keys, name)
		}
	}
}
