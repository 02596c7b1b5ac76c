package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Options configure a Server.
type Options struct {
	// Token is the bearer token every request but /healthz, /readyz and
	// /metrics must carry when Users is nil; it is then an admin's.
	Token string
	// Users (may be nil) authenticates bearer tokens as users and
	// manages them (/users); with it, Token is not used.
	Users UserAdmin
	// DeferUserTokens admits, besides Token, any bearer token of a
	// user's form (access.TokenPrefix) without checking it: an HA
	// standby, which holds no user table, forwards such a request to
	// the leader, which does.
	DeferUserTokens bool
	// Audit (may be nil) keeps the audit log of mutating calls.
	Audit Auditor
	// Metrics (may be nil) serves /metrics without authentication.
	Metrics http.Handler
	// Log (may be nil) receives the server's log lines.
	Log *slog.Logger
	// Limits bound what one client can hold of the server.
	Limits Limits
	// Observer (may be nil) is told what the server refuses.
	Observer Observer
	// UI (may be nil) serves GET / and every path under /ui/, before and
	// instead of the bearer-token check (the dashboard, controller/ui,
	// signs its users in with a session of its own).
	UI http.Handler
}

// Observer is told what the server refuses; the controller counts it in
// /metrics. Its methods must not block.
type Observer interface {
	// AuthFailed: a request carried no bearer token or a wrong one.
	AuthFailed()
	// AuthThrottled: a request was answered 429 because its source failed
	// to authenticate too often.
	AuthThrottled()
	// ConnRefused: a connection was closed as soon as it was accepted;
	// reason is ConnRefusedUnauthenticated or ConnRefusedPerSource.
	ConnRefused(reason string)
	// AcceptFailed: the listener's Accept failed (out of descriptors);
	// the server retries.
	AcceptFailed()
}

// Reasons given to Observer.ConnRefused.
const (
	// ConnRefusedUnauthenticated: Limits.MaxUnauthenticatedConns were open.
	ConnRefusedUnauthenticated = "unauthenticated"
	// ConnRefusedPerSource: Limits.MaxConnsPerSource were open from the
	// connection's source.
	ConnRefusedPerSource = "per-source"
)

type nopObserver struct{}

func (nopObserver) AuthFailed()        {}
func (nopObserver) AuthThrottled()     {}
func (nopObserver) ConnRefused(string) {}
func (nopObserver) AcceptFailed()      {}

// shutdownGrace is how long Serve waits for requests in flight when its
// context ends before it closes their connections.
const shutdownGrace = 5 * time.Second

// Serve serves the API over HTTP on ln until ctx ends, then shuts down:
// requests in flight get shutdownGrace to finish, then their connections
// are closed. It returns nil after a shutdown, else why it stopped.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeHandler(ctx, ln, s)
}

// ServeTLS is Serve over HTTPS with the certificate and key files.
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener, certFile, keyFile string) error {
	return s.ServeHandlerTLS(ctx, ln, s, certFile, keyFile)
}

// ServeHandler serves h over HTTP on ln within the Front's limits (the
// timeouts, the connection caps) until ctx ends, then shuts down as
// Server.Serve does. Requests reach h with their connection tracked, so
// Admit (or a Server that h passes them to) marks it authenticated.
func (f *Front) ServeHandler(ctx context.Context, ln net.Listener, h http.Handler) error {
	return f.serve(ctx, ln, h, func(srv *http.Server, ln net.Listener) error { return srv.Serve(ln) })
}

// ServeHandlerTLS is ServeHandler over HTTPS with the certificate and key
// files.
func (f *Front) ServeHandlerTLS(ctx context.Context, ln net.Listener, h http.Handler, certFile, keyFile string) error {
	return f.serve(ctx, ln, h, func(srv *http.Server, ln net.Listener) error { return srv.ServeTLS(ln, certFile, keyFile) })
}

func (f *Front) serve(ctx context.Context, ln net.Listener, h http.Handler, serve func(*http.Server, net.Listener) error) error {
	srv := f.httpServer(h)
	errc := make(chan error, 1)
	go func() { errc <- serve(srv, f.listener(ln)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve API on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close() // log streams still open after the grace period
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve API on %s: %w", ln.Addr(), err)
	}
	return nil
}

// httpServer returns the http.Server serving h within f's limits. Its
// own error log (TLS handshake failures of every scanner) goes to the
// debug level: a client must not be able to fill the log.
func (f *Front) httpServer(h http.Handler) *http.Server {
	l := f.limits
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnContext:       withConn,
		ErrorLog:          slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
}

// listener wraps ln so that connections past the caps of Limits are
// closed as soon as they are accepted.
func (f *Front) listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: newConnLimiter(f.limits, f.obs, f.log)}
}
