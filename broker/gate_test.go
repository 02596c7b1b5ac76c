package broker

import (
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"
)

// TestGateForgetsIdleSources: failed logins from ever new addresses do not
// grow the gate without bound: once their window has passed, a sweep
// forgets them, and a released connection leaves nothing behind.
func TestGateForgetsIdleSources(t *testing.T) {
	clock := newFakeClock()
	g := newGate(Limits{}.withDefaults(), clock.Now)
	for i := range 5000 {
		g.failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if _, n := g.counts(); n != 5000 {
		t.Fatalf("sources = %d, want 5000 within the window", n)
	}
	clock.Advance(DefaultAuthFailureWindow)
	// New sources keep coming: a sweep (when the map has doubled) forgets
	// the old ones, whose window has passed.
	for i := range 4000 {
		g.failed(netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if _, n := g.counts(); n != 4000 {
		t.Errorf("sources = %d, want the 4000 in their window", n)
	}
	addr := netip.MustParseAddr("192.0.2.1")
	if reason := g.admit(addr); reason != "" {
		t.Fatalf("admit: %s", reason)
	}
	g.release(addr, true)
	if pending, n := g.counts(); pending != 0 || n != 4000 {
		t.Errorf("after release: pending %d, sources %d, want 0 and 4000", pending, n)
	}
}

// TestLogLimiterKeysBounded: past maxLogKeys distinct keys, new keys share
// one, so the limiter's memory is bounded and a flood from ever new
// sources is still limited.
func TestLogLimiterKeysBounded(t *testing.T) {
	clock := newFakeClock()
	logs := &logRecorder{}
	l := newLogLimiter(slog.New(logs), time.Minute, clock.Now)
	for i := range maxLogKeys + 500 {
		l.Log(fmt.Sprintf("auth/%d", i), slog.LevelWarn, "connection refused")
	}
	if got := len(logs.all()); got != maxLogKeys+1 {
		t.Errorf("records = %d, want %d (one per key, then one for the overflow)", got, maxLogKeys+1)
	}
	if got := len(l.keys); got > maxLogKeys+1 {
		t.Errorf("keys = %d, want at most %d", got, maxLogKeys+1)
	}
}
