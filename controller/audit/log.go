package audit

import (
	"context"
	"log/slog"
	"time"
)

// Store keeps entries durably; the controller's store implements it.
type Store interface {
	AppendAudit(e Entry, ret Retention, now time.Time) (uint64, error)
	FinishAudit(seq uint64, status int, message string, d time.Duration) error
	NoteAudit(seq uint64, detail string) error
	ListAudit(f Filter) ([]Entry, error)
}

// Log writes entries to a Store within a Retention, stamped on its
// clock. Safe for concurrent use (the store serialises writes).
type Log struct {
	store Store
	ret   Retention
	now   func() time.Time
	log   *slog.Logger
}

// NewLog returns a Log over store; now and log may be nil.
func NewLog(store Store, ret Retention, now func() time.Time, log *slog.Logger) *Log {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Log{store: store, ret: ret.WithDefaults(), now: now, log: log}
}

// Begin stores e, stamped now, with Status 0, and returns its sequence
// number. The caller must not go on with the call it records if Begin
// fails.
func (l *Log) Begin(_ context.Context, e Entry) (uint64, error) {
	now := l.now()
	e.Time, e.Status = now.UTC(), 0
	return l.store.AppendAudit(e, l.ret, now)
}

// Finish records the outcome of entry seq. A failure is logged: the
// entry stays, with its outcome unknown.
func (l *Log) Finish(seq uint64, status int, message string, d time.Duration) {
	if err := l.store.FinishAudit(seq, status, message, d); err != nil {
		l.log.Error("audit: record the outcome of a call", "seq", seq, "status", status, "err", err)
	}
}

// Note records detail on entry seq, the call's own account of what it is
// about to do (Entry.Detail). The caller must not go on if it fails.
func (l *Log) Note(seq uint64, detail string) error {
	return l.store.NoteAudit(seq, Clip(detail))
}

// Record stores a complete entry at once (a dashboard sign-in, whose
// outcome is known before anything changes).
func (l *Log) Record(e Entry) error {
	now := l.now()
	e.Time = now.UTC()
	e.Message = Clip(e.Message)
	_, err := l.store.AppendAudit(e, l.ret, now)
	return err
}

// List returns the entries f selects, oldest first.
func (l *Log) List(f Filter) ([]Entry, error) { return l.store.ListAudit(f) }
