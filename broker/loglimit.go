package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultLogInterval is Limits.LogInterval unless set: at most one record
// of a kind per source (or per client) in this interval.
const DefaultLogInterval = time.Minute

// maxLogKeys bounds the keys a logLimiter remembers; past it, after
// forgetting the quiet ones, every new key shares one overflow key.
const maxLogKeys = 10_000

// overflowKey is the shared key of records past maxLogKeys.
const overflowKey = "\x00overflow"

// logLimiter passes at most one record per key per interval, so a client
// cannot fill the disk by repeating what gets logged (failed logins, bad
// packets). The record that passes carries how many were suppressed since
// the last one of its key.
type logLimiter struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*logKey // guarded by mu
}

// logKey is the state of one key.
type logKey struct {
	last       time.Time // when a record of the key last passed
	suppressed int       // records dropped since
}

func newLogLimiter(log *slog.Logger, interval time.Duration, now func() time.Time) *logLimiter {
	return &logLimiter{log: log, interval: interval, now: now, keys: map[string]*logKey{}}
}

// Log writes the record unless one with the same key passed less than the
// interval ago; a record that passes after suppressed ones gets the
// attribute suppressed=N.
func (l *logLimiter) Log(key string, level slog.Level, msg string, args ...any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	n, ok := l.allow(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	l.log.Log(context.Background(), level, msg, args...)
}

// allow reports whether a record of key may pass now and how many were
// suppressed before it.
func (l *logLimiter) allow(key string) (suppressed int, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[key]
	if k == nil {
		if len(l.keys) >= maxLogKeys {
			l.forgetQuietLocked(now)
		}
		if len(l.keys) >= maxLogKeys {
			key = overflowKey
			k = l.keys[key]
		}
	}
	if k == nil {
		l.keys[key] = &logKey{last: now}
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

// forgetQuietLocked drops the keys with nothing suppressed whose interval
// has passed: their next record passes anyway.
func (l *logLimiter) forgetQuietLocked(now time.Time) {
	for key, k := range l.keys {
		if k.suppressed == 0 && now.Sub(k.last) >= l.interval {
			delete(l.keys, key)
		}
	}
}
