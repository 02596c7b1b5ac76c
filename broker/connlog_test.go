package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// logRecorder is a slog.Handler keeping every record at or above debug.
type logRecorder struct {
	mu      sync.Mutex
	records []string // "LEVEL message attrs", guarded by mu
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", rec.Level, rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, b.String())
	return nil
}

// all returns every record.
func (r *logRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.records...)
}

// minLevel passes on only the records at or above level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}

// matching returns the records containing every one of parts.
func (r *logRecorder) matching(parts ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(rec, p)
		}
		if all {
			out = append(out, rec)
		}
	}
	return out
}

// TestConnectionEndsAreLogged: a device dropping off its link is one info
// record naming its address, a refused password is only the hook's warning,
// and the connections the broker closes on shutdown are debug records;
// none of them is mochi's warning without a message.
func TestConnectionEndsAreLogged(t *testing.T) {
	logs := &logRecorder{}
	tb := startBroker(t, Options{Logger: slog.New(logs)})

	var conn net.Conn
	c := tb.node("node-a")
	c.conn = &conn
	if _, err := dial(t, tb.Addr(), c); err != nil {
		t.Fatalf("connect: %v", err)
	}
	remote := conn.LocalAddr().String()
	_ = conn.Close() // the link drops: no DISCONNECT
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if got := logs.matching(`INFO "client connection ended"`, "remote="+remote); len(got) != 1 {
			return fmt.Errorf("want one record of the ended connection from %s, got %q", remote, got)
		}
		return nil
	})

	bad := tb.node("node-b")
	bad.pass = "wrong"
	if _, err := dial(t, tb.Addr(), bad); err == nil {
		t.Fatal("wrong password accepted")
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if len(logs.matching(`WARN "connection refused"`, "node-b")) != 1 {
			return fmt.Errorf("no refusal logged for node-b")
		}
		return nil
	})

	var live net.Conn
	c = tb.node("node-c")
	c.conn = &live
	if _, err := dial(t, tb.Addr(), c); err != nil {
		t.Fatalf("connect: %v", err)
	}
	tb.stop()
	liveRemote := live.LocalAddr().String()
	if got := logs.matching(`DEBUG "client connection closed by the broker"`, "remote="+liveRemote); len(got) != 1 {
		t.Errorf("want one debug record of the connection closed on shutdown, got %q", got)
	}
	for _, rec := range logs.matching(liveRemote) {
		if !strings.HasPrefix(rec, "DEBUG") {
			t.Errorf("shutdown logged above debug: %s", rec)
		}
	}
	if got := logs.matching(`""`); len(got) > 0 {
		t.Errorf("records without a message: %q", got)
	}
	if got := logs.matching(`"client connection ended"`); len(got) != 1 {
		t.Errorf("want only node-a's ended connection, got %q", got)
	}
}

// TestReconnectLoopLoggedWithALimiter: an authenticated client that drops
// its connection and reconnects in a loop (a broken agent, a stolen token)
// causes at will what is logged when a connection ends, so those records
// go through the limiter too: one per source and LogInterval.
func TestReconnectLoopLoggedWithALimiter(t *testing.T) {
	logs := &logRecorder{}
	tb := startBroker(t, Options{Logger: slog.New(logs)})
	for range 20 {
		var conn net.Conn
		c := tb.node("node-a")
		c.conn = &conn
		if _, err := dial(t, tb.Addr(), c); err != nil {
			t.Fatalf("connect: %v", err)
		}
		_ = conn.Close() // no DISCONNECT: the connection ends in an error
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if n := tb.Stats().Connected; n != 0 {
			return fmt.Errorf("%d clients still connected", n)
		}
		return nil
	})
	if got := logs.matching(`"client connection ended"`); len(got) != 1 {
		t.Errorf("want one record for 20 ended connections of one source, got %d: %q", len(got), got)
	}
}
