package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// connEnded logs how a client connection ended. Mochi would log every one
// that ends in an error, which is every device dropping off its link and
// every connection the broker closes on shutdown, as a warning without a
// message. What a client causes (a connection that ends, authenticated or
// not) is logged through the limiter, one record per source and
// LogInterval: anyone can open connections, and a client can reconnect in
// a loop.
func (b *Broker) connEnded(conn net.Conn, end connEnd, err error) {
	var code packets.Code
	switch {
	case err == nil:
	case end.closing:
		b.log.Debug("client connection closed by the broker", "remote", conn.RemoteAddr(), "err", err)
	case errors.Is(err, packets.ErrBadUsernameOrPassword) || errors.Is(err, packets.ErrNotAuthorized):
		// The hook has logged the refusal, with the client's identity.
	case end.expired:
		b.limited.Log("timeout/"+sourceKey(end.addr).String(), slog.LevelInfo, "client connection closed: no CONNECT within the connect timeout",
			"remote", conn.RemoteAddr(), "connect_timeout", b.opts.Limits.ConnectTimeout)
	case end.pending:
		b.limited.Log("unauthenticated/"+sourceKey(end.addr).String(), slog.LevelInfo, "client connection ended before CONNECT completed",
			"remote", conn.RemoteAddr(), "err", err)
	case errors.As(err, &code):
		b.limited.Log("refused/"+sourceKey(end.addr).String(), slog.LevelWarn, "client connection refused", "remote", conn.RemoteAddr(), "reason", code.Reason)
	default:
		// An authenticated client can end its connection, and open the
		// next, at will: a reconnect loop would be a record a connection.
		b.limited.Log("ended/"+sourceKey(end.addr).String(), slog.LevelInfo, "client connection ended", "remote", conn.RemoteAddr(), "err", err)
	}
}

// connRefused counts and logs a connection the gate refused at accept.
// One record per reason and LogInterval: refusals come in floods.
func (b *Broker) connRefused(conn net.Conn, reason string) {
	b.metrics.refused.WithLabelValues(reason).Inc()
	b.limited.Log("refused/"+reason, slog.LevelWarn, "client connection refused at accept",
		"remote", conn.RemoteAddr(), "reason", reason, "limits", b.limitsFor(reason))
}

// limitsFor names the limit behind a refusal reason, for the log.
func (b *Broker) limitsFor(reason string) string {
	l := b.opts.Limits
	switch reason {
	case refusedPending:
		return fmt.Sprintf("%d connections before CONNECT (max pending connections)", l.MaxPendingConnections)
	case refusedSource:
		return fmt.Sprintf("%d connections per source address (max connections per source)", l.MaxConnectionsPerSource)
	case refusedBackoff:
		return fmt.Sprintf("%d failed logins within %s refuse the source for %s", l.AuthFailureLimit, l.AuthFailureWindow, l.AuthFailureBackoff)
	}
	return ""
}

// connectTimedOut counts a connection closed for its connect timeout.
func (b *Broker) connectTimedOut() { b.metrics.connectTimeout.Inc() }

// acceptFailed records an accept error on listener id; it retries in
// retryIn.
func (b *Broker) acceptFailed(id string, err error, retryIn time.Duration) {
	b.metrics.acceptErrors.WithLabelValues(id).Inc()
	b.listeners.set(id, fmt.Errorf("cannot accept connections: %w (retrying)", err))
	b.limited.Log("accept/"+id, slog.LevelError, "mqtt listener cannot accept connections; retrying",
		"listener", id, "err", err, "retry_in", retryIn)
}

// acceptRecovered clears listener id's accept fault.
func (b *Broker) acceptRecovered(id string) {
	b.listeners.set(id, nil)
	b.limited.Log("accepting/"+id, slog.LevelInfo, "mqtt listener accepting connections again", "listener", id)
}

// authFailed counts a refused CONNECT from conn, logs it (one record per
// source and LogInterval) and may start the source's back-off.
func (b *Broker) authFailed(conn net.Conn, pk packets.Packet, err error) {
	b.authFailures.Add(1)
	b.metrics.authFailures.WithLabelValues(authReason(err)).Inc()
	addr := sourceAddr(conn)
	b.limited.Log("auth/"+sourceKey(addr).String(), slog.LevelWarn, "connection refused", "client", pk.Connect.ClientIdentifier,
		"username", string(pk.Connect.Username), "remote", conn.RemoteAddr(), "reason", err)
	if b.gate.failed(addr) {
		l := b.opts.Limits
		b.limited.Log("backoff/"+sourceKey(addr).String(), slog.LevelWarn, "source refused after repeated failed logins",
			"source", addr, "failures", l.AuthFailureLimit, "window", l.AuthFailureWindow, "refused_for", l.AuthFailureBackoff)
	}
}

// Health reports the listeners that cannot accept connections: an accept
// failing now (file descriptors exhausted, say), which the listener retries,
// or an accept loop that ended while the broker was not closing. It is nil
// when every listener accepts.
func (b *Broker) Health() error { return b.listeners.err() }
