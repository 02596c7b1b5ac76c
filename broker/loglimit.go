package broker

import (
	"context"
	"log/slog"
	"time"

	"github.com/edgeset/edgeset/internal/loglimit"
)

// DefaultLogInterval is Limits.LogInterval unless set: at most one record
// of a kind per source (or per client) in this interval.
const DefaultLogInterval = time.Minute

// maxLogKeys bounds the keys a logLimiter remembers; past it, after
// forgetting the quiet ones, every new key shares one overflow key.
const maxLogKeys = 10_000

// logLimiter writes a record unless one of its key was written less than
// the interval ago (loglimit.Limiter), so a client cannot fill the disk by
// repeating what gets logged (failed logins, bad packets).
type logLimiter struct {
	log *slog.Logger
	*loglimit.Limiter
}

func newLogLimiter(log *slog.Logger, interval time.Duration, now func() time.Time) *logLimiter {
	return &logLimiter{log: log, Limiter: loglimit.New(interval, maxLogKeys, now)}
}

// Log writes the record unless one with the same key passed less than the
// interval ago; a record that passes after suppressed ones gets the
// attribute suppressed=N.
func (l *logLimiter) Log(key string, level slog.Level, msg string, args ...any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	n, ok := l.Allow(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	l.log.Log(context.Background(), level, msg, args...)
}
