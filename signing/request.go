package signing

import (
	"crypto/sha256"
	"fmt"
	"time"
)

// Signed requests: what the controller asks a device to do now (run an
// exec, feed a running session's input, stream a log) travels in the same
// envelope as a document, but lives briefly and counts once. Its
// statement binds the request's topic (which names the node, and for a
// session's input the session), the node, issued-at and an expiry
// RequestValidity later; its body carries the request's own ID. A
// receiver opens it with a RequestGuard, which refuses, besides what
// Verify refuses, a statement valid for longer than MaxRequestLifetime and,
// for a request that acts (Open with once), one it accepted before.

// RequestValidity is how long after it is issued a signed request stays
// acceptable: enough for a broker's delivery and some clock skew, short
// enough that a receiver remembers every request it accepted until then.
const RequestValidity = 2 * time.Minute

// MaxRequestLifetime is the longest expiresAt - issuedAt a receiver takes
// in a request.
const MaxRequestLifetime = 10 * time.Minute

// DefaultRequestMemory is how many accepted requests a RequestGuard
// remembers unless told otherwise.
const DefaultRequestMemory = 4096

// RequestGuard opens signed requests and refuses replays. It remembers
// each request accepted with once, by the SHA-256 of its signed
// statement, until the request expires, and at most max of them. Its
// invariant: every request it accepted and then forgot expires no later
// than floor, and it refuses every request expiring no later than floor,
// so forgetting (to stay within max, or because the clock says a request
// expired, whichever way the clock later moves) never lets one through
// twice. A request issued before notBefore (the receiver's start: what
// it remembered before is gone) is refused too. RequestGuard is pure (the
// caller passes the time) and not safe for concurrent use.
type RequestGuard struct {
	notBefore time.Time
	max       int
	seen      map[[sha256.Size]byte]time.Time // accepted requests' expiry, by statement digest
	floor     time.Time                       // the latest expiry of a request forgotten
}

// NewRequestGuard returns a guard refusing requests issued before
// notBefore and remembering at most max accepted ones (at most
// DefaultRequestMemory when max is not positive).
func NewRequestGuard(notBefore time.Time, max int) *RequestGuard {
	if max <= 0 {
		max = DefaultRequestMemory
	}
	return &RequestGuard{notBefore: notBefore, max: max, seen: map[[sha256.Size]byte]time.Time{}}
}

// Open verifies env as Verify does with exp at now, refuses a statement
// valid for longer than MaxRequestLifetime, and, with once, refuses a
// request accepted before (or that may have been: ErrReplay) and
// remembers this one. Requests that need no memory (a session's input
// chunk, whose sequence number the receiver orders and deduplicates
// within the session its topic names) are opened without once.
func (g *RequestGuard) Open(ks *KeySet, env []byte, exp Expect, now time.Time, once bool) (Statement, error) {
	st, payload, err := verify(ks, env, exp, now, nil)
	if err != nil {
		return Statement{}, err
	}
	if life := st.ExpiresAt.Sub(st.IssuedAt); life > MaxRequestLifetime {
		return Statement{}, fmt.Errorf("%w: request valid for %s, at most %s", ErrMalformed, life, MaxRequestLifetime)
	}
	if !once {
		return st, nil
	}
	if err := g.remember(sha256.Sum256(payload), st, now); err != nil {
		return Statement{}, err
	}
	return st, nil
}

// Remembered is how many accepted requests the guard holds.
func (g *RequestGuard) Remembered() int { return len(g.seen) }

// remember records request id of st, refusing it as a replay when it was
// (or may have been) accepted before.
func (g *RequestGuard) remember(id [sha256.Size]byte, st Statement, now time.Time) error {
	switch {
	case st.IssuedAt.Before(g.notBefore):
		return fmt.Errorf("%w: issued at %s, before this receiver started at %s", ErrReplay,
			st.IssuedAt.Format(time.RFC3339Nano), g.notBefore.Format(time.RFC3339Nano))
	case !st.ExpiresAt.After(g.floor):
		return fmt.Errorf("%w: expires at %s, no later than a request forgotten to make room (%s)", ErrReplay,
			st.ExpiresAt.Format(time.RFC3339Nano), g.floor.Format(time.RFC3339Nano))
	}
	if _, ok := g.seen[id]; ok {
		return fmt.Errorf("%w: %s issued at %s was accepted before", ErrReplay, st.Topic, st.IssuedAt.Format(time.RFC3339Nano))
	}
	if len(g.seen) >= g.max {
		g.makeRoom(now)
	}
	g.seen[id] = st.ExpiresAt
	return nil
}

// makeRoom forgets the requests expired at now, and then, while the guard
// is still full, the one expiring first, raising floor to each forgotten
// request's expiry.
func (g *RequestGuard) makeRoom(now time.Time) {
	for id, exp := range g.seen {
		if now.After(exp) {
			g.forget(id, exp)
		}
	}
	for len(g.seen) >= g.max {
		var first [sha256.Size]byte
		var at time.Time
		found := false
		for id, exp := range g.seen {
			if !found || exp.Before(at) {
				first, at, found = id, exp, true
			}
		}
		g.forget(first, at)
	}
}

func (g *RequestGuard) forget(id [sha256.Size]byte, exp time.Time) {
	delete(g.seen, id)
	if exp.After(g.floor) {
		g.floor = exp
	}
}
