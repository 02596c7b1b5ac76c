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
	if got := l.Len(); got > maxLogKeys+1 {
		t.Errorf("keys = %d, want at most %d", got, maxLogKeys+1)
	}
}

// TestGateIPv6SourceIsSlash64: an IPv6 host commonly holds a whole /64, so
// the gate counts connections and failed logins per /64 (as the API does):
// a client cannot escape the per-source cap or the back-off by using
// another address of its network. Another /64 is another source, and an
// exempt address stays exempt.
func TestGateIPv6SourceIsSlash64(t *testing.T) {
	clock := newFakeClock()
	l := Limits{MaxConnectionsPerSource: 2, AuthFailureLimit: 3,
		ExemptSources: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::7/128")}}.withDefaults()
	g := newGate(l, clock.Now)
	a1 := netip.MustParseAddr("2001:db8:0:1::1")
	a2 := netip.MustParseAddr("2001:db8:0:1:ffff::2")
	a3 := netip.MustParseAddr("fe80::1%eth0")
	for _, a := range []netip.Addr{a1, a2} {
		if reason := g.admit(a); reason != "" {
			t.Fatalf("admit %s: %s", a, reason)
		}
	}
	if reason := g.admit(netip.MustParseAddr("2001:db8:0:1::3")); reason != refusedSource {
		t.Errorf("third connection of 2001:db8:0:1::/64: refused %q, want %q", reason, refusedSource)
	}
	if reason := g.admit(netip.MustParseAddr("2001:db8:0:2::1")); reason != "" {
		t.Errorf("another /64: refused %q, want admitted", reason)
	}
	g.release(a1, true)
	g.release(a2, true)
	for i := range 3 {
		g.failed(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, byte(i + 1)}))
	}
	if reason := g.admit(netip.MustParseAddr("2001:db8:0:5::99")); reason != refusedBackoff {
		t.Errorf("after 3 failed logins from 2001:db8:0:5::/64: refused %q, want %q", reason, refusedBackoff)
	}
	if reason := g.admit(a3); reason != "" {
		t.Fatalf("admit %s: %s", a3, reason)
	}
	g.release(a3, true)
	for range 3 {
		if reason := g.admit(netip.MustParseAddr("2001:db8:0:9::7")); reason != "" {
			t.Errorf("exempt address: refused %q", reason)
		}
	}
	// The exempt address's connections are not counted against the rest
	// of its /64.
	if reason := g.admit(netip.MustParseAddr("2001:db8:0:9::8")); reason != "" {
		t.Errorf("a neighbour of an exempt address with 3 connections: refused %q", reason)
	}
	if pending, _ := g.counts(); pending != 5 {
		t.Errorf("pending = %d, want 5", pending)
	}
}
