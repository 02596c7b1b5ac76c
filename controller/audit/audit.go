// Package audit is the controller's audit log: one Entry for every
// mutating API call and every dashboard action (and for reads that
// disclose secrets: secret values, store backups), saying who, what,
// when, from where and with what result.
//
// The log is written ahead: the API stores an entry (Status 0) before
// the call may change anything, and refuses the call with 503 when the
// entry cannot be stored; once the call has been answered, the entry is
// completed with its status code. A controller that stops between the
// two leaves the entry at Status 0, "outcome unknown": a mutation never
// happens without its entry, though an entry may exist for a call that
// changed nothing.
//
// Entries live in the controller's store, so they are replicated with
// everything else when the store is (the HA etcd store), and are kept
// within a Retention: a count and an age.
package audit

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Via says which door an entry's call came through.
const (
	ViaAPI       = "api"
	ViaDashboard = "dashboard"
)

// Entry is one audited call.
type Entry struct {
	// Seq is assigned by the store: 1, 2, 3... never reused.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// User, Role and Namespace are the caller's.
	User      string `json:"user"`
	Role      string `json:"role,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Via       string `json:"via"`
	// Method and Path are the request's; Action is the route's pattern
	// or the dashboard action ("POST /ui/nodes/{name}/{action}").
	Method string `json:"method"`
	Path   string `json:"path"`
	Action string `json:"action,omitempty"`
	// Remote is the peer address; ForwardedFor the X-Forwarded-For of a
	// call forwarded by an HA standby.
	Remote       string `json:"remote"`
	ForwardedFor string `json:"forwardedFor,omitempty"`
	// Status is the HTTP status code answered; 0 while the call runs, and
	// for good when the controller stopped before it was answered.
	Status int `json:"status"`
	// Message is the error answered, if any (at most MaxMessage bytes).
	Message string `json:"message,omitempty"`
	// Detail says what the call acts on beyond its path, noted by the
	// call before it acts (an exec's node, container and command); at
	// most MaxMessage bytes.
	Detail string `json:"detail,omitempty"`
	// Duration is how long the call took to be answered.
	Duration time.Duration `json:"duration,omitempty"`
}

// MaxMessage bounds Entry.Message.
const MaxMessage = 512

// Result describes e's outcome: "200 OK", "403 Forbidden", "unknown".
func (e Entry) Result() string {
	if e.Status == 0 {
		return "unknown (not answered)"
	}
	return fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
}

// Defaults of Retention.
const (
	DefaultMaxEntries = 100000
	DefaultMaxAge     = 90 * 24 * time.Hour
	// MaxEntriesLimit bounds Retention.MaxEntries.
	MaxEntriesLimit = 10000000
	// MinMaxAge is the shortest Retention.MaxAge a controller accepts.
	MinMaxAge = time.Hour
)

// Retention bounds the log: at most MaxEntries entries, none older than
// MaxAge. The oldest go first.
type Retention struct {
	MaxEntries int
	MaxAge     time.Duration
}

// WithDefaults fills zero fields.
func (r Retention) WithDefaults() Retention {
	if r.MaxEntries <= 0 {
		r.MaxEntries = DefaultMaxEntries
	}
	if r.MaxAge <= 0 {
		r.MaxAge = DefaultMaxAge
	}
	return r
}

// Drop reports whether the oldest of count entries, stamped oldest, must
// be dropped at now.
func (r Retention) Drop(count int, oldest, now time.Time) bool {
	r = r.WithDefaults()
	return count > r.MaxEntries || now.Sub(oldest) > r.MaxAge
}

// Filter selects entries.
type Filter struct {
	// SinceSeq selects entries with Seq above it.
	SinceSeq uint64
	// Since selects entries at or after it.
	Since time.Time
	// User, if set, must equal Entry.User.
	User string
	// Limit, if positive, keeps the newest Limit matching entries.
	Limit int
}

// Match reports whether f selects e.
func (f Filter) Match(e Entry) bool {
	return e.Seq > f.SinceSeq && !e.Time.Before(f.Since) && (f.User == "" || e.User == f.User)
}

// Clip shortens a message to at most MaxMessage bytes, on a rune
// boundary.
func Clip(msg string) string {
	msg = strings.TrimSpace(msg)
	if len(msg) <= MaxMessage {
		return msg
	}
	cut := MaxMessage - 3
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}
