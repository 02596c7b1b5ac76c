package natsauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/loglimit"
)

// Subjects and headers of the auth callout protocol (nats-server
// server/auth_callout.go).
const (
	authCalloutSubject = "$SYS.REQ.USER.AUTH"
	xkeyHeader         = "Nats-Server-Xkey"
)

// errRefused is the error text a refused client's server logs; it names no
// reason, so a client learns nothing from it (as the embedded broker's
// "bad username or password").
const errRefused = "not authorized"

// maxLogKeys bounds the log limiter's memory.
const maxLogKeys = 4096

// ErrRunning: Run was called twice.
var ErrRunning = errors.New("natsauth: responder already running")

// Responder answers a NATS cluster's auth callout requests. It is a
// long-lived part: Run serves until its context ends.
type Responder struct {
	opts     Options
	issuer   string // public key of opts.Issuer
	revoked  *credential.Revocations
	counters *counters
	logs     *loglimit.Limiter
	log      *slog.Logger
	ready    chan struct{}

	mu      sync.Mutex
	running bool // guarded by mu
}

// New validates opts and returns a Responder; nothing connects until Run.
func New(opts Options) (*Responder, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	issuer, _ := opts.Issuer.PublicKey() // checked by validate
	r := &Responder{
		opts:     opts,
		issuer:   issuer,
		counters: newCounters(),
		logs:     loglimit.New(opts.LogInterval, maxLogKeys, nil),
		log:      opts.Logger.With("component", "natsauth"),
		ready:    make(chan struct{}),
	}
	if opts.RevokedFile != "" {
		r.revoked = credential.NewRevocations(opts.RevokedFile)
	}
	return r, nil
}

// Ready is closed once Run has subscribed: requests are answered from then
// on (nats-server refuses clients while no responder is subscribed).
func (r *Responder) Ready() <-chan struct{} { return r.ready }

// Stats returns the counters of allowed and denied requests.
func (r *Responder) Stats() Stats { return r.counters.stats() }

// Run connects to the cluster, subscribes to the auth callout subject in
// the queue group QueueGroup and answers requests until ctx ends; then it
// unsubscribes, joins its workers and closes the connection. It polls the
// revocation list meanwhile. While no server of URL is reachable, at the
// start as later, it keeps trying (Ready is closed once one is); it fails
// only on a bad revocation list or a second call.
func (r *Responder) Run(ctx context.Context) error {
	if err := r.start(); err != nil {
		return err
	}
	if err := r.reloadRevocations(true); err != nil {
		return err
	}
	nc, err := r.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	reqs := make(chan *nats.Msg, r.opts.PendingRequests)
	sub, err := nc.ChanQueueSubscribe(authCalloutSubject, QueueGroup, reqs)
	if err != nil {
		return fmt.Errorf("natsauth: subscribe %s: %w", authCalloutSubject, err)
	}
	if !r.awaitSubscribed(ctx, nc) {
		return nil
	}
	close(r.ready)
	r.log.Info("auth callout responder ready", "url", nc.ConnectedUrlRedacted(), "account", r.opts.Account)

	workCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range r.opts.Workers {
		wg.Go(func() { r.work(workCtx, reqs) })
	}
	r.pollRevocations(ctx)
	stop()
	err = sub.Unsubscribe()
	wg.Wait()
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("natsauth: unsubscribe: %w", err)
	}
	return nil
}

// awaitSubscribed waits until the subscription reached a server (a
// flush succeeds), retrying while no server is reachable; false if ctx
// ended first.
func (r *Responder) awaitSubscribed(ctx context.Context, nc *nats.Conn) bool {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	warned := false
	for {
		err := nc.FlushTimeout(5 * time.Second)
		if err == nil {
			return true
		}
		if !warned {
			r.log.Warn("auth callout waiting for the NATS cluster", "url", r.opts.URL, "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// start marks the responder running, once.
func (r *Responder) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return ErrRunning
	}
	r.running = true
	return nil
}

// connect opens the responder's NATS connection; it reconnects forever.
func (r *Responder) connect() (*nats.Conn, error) {
	opts := append([]nats.Option{
		nats.Name("edgeset-auth-callout"),
		nats.UserInfo(r.opts.User, r.opts.Password),
		nats.MaxReconnects(-1),
		// A cluster down when the controller starts is waited for, as
		// one that goes down later is.
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			r.log.Warn("auth callout connection lost", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			r.log.Info("auth callout reconnected", "url", nc.ConnectedUrlRedacted())
		}),
	}, r.opts.NATSOptions...)
	nc, err := nats.Connect(r.opts.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("natsauth: connect to %s: %w", r.opts.URL, err)
	}
	return nc, nil
}

// pollRevocations re-reads the revocation list every RevocationPoll until
// ctx ends.
func (r *Responder) pollRevocations(ctx context.Context) {
	tick := time.NewTicker(r.opts.RevocationPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := r.reloadRevocations(false); err != nil {
				r.log.Error("reload revocation list", "error", err)
			}
		}
	}
}

// Reload re-reads the revocation list and node epochs now. Connections
// already admitted keep going until the servers close them (UserTTL).
func (r *Responder) Reload() error { return r.reloadRevocations(true) }

// reloadRevocations re-reads the revocation list if forced or changed.
func (r *Responder) reloadRevocations(force bool) error {
	if r.revoked == nil {
		return nil
	}
	changed, bad, err := r.revoked.Load(force)
	for _, line := range bad {
		r.log.Warn("skipping malformed revocation entry", "file", r.revoked.Path(), "line", line)
	}
	if changed && err == nil {
		r.log.Info("revocation list loaded", "file", r.revoked.Path())
	}
	return err
}

// isRevoked reports whether node is in the revocation list.
func (r *Responder) isRevoked(node string) bool {
	return r.revoked != nil && r.revoked.Revoked(r.opts.Secret, node)
}

// epoch returns node's credential epoch (0 without a revocation list).
func (r *Responder) epoch(node string) uint64 {
	if r.revoked == nil {
		return 0
	}
	return r.revoked.Epoch(node)
}

// work answers requests until ctx ends.
func (r *Responder) work(ctx context.Context, reqs <-chan *nats.Msg) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-reqs:
			r.answer(m)
		}
	}
}

// answer decides one request and responds to it. A request that cannot be
// decoded is not answered: it names no user to refuse.
func (r *Responder) answer(m *nats.Msg) {
	req, reason := r.decode(m)
	if reason != "" {
		r.counters.deny(reason)
		r.logDenied(reason, "", nil)
		return
	}
	v := authorize(r.opts.Secret, r.isRevoked, r.epoch, req.ClientInformation, req.ConnectOptions)
	resp, err := r.response(req, v)
	if err != nil {
		r.log.Error("encode auth callout response", "node", v.identity, "error", err)
		return
	}
	// Counted before the answer, so a client that saw its CONNACK sees the
	// counter too.
	if v.reason != "" {
		r.counters.deny(v.reason)
		r.logDenied(v.reason, v.identity, req)
	} else {
		r.counters.allow()
		r.log.Debug("client admitted", "node", v.identity, "host", req.ClientInformation.Host, "server", req.Server.Name)
	}
	if err := m.Respond([]byte(resp)); err != nil {
		r.log.Warn("respond to auth callout", "node", v.identity, "error", err)
	}
}

// decode checks the request's size and form and decodes its claims.
func (r *Responder) decode(m *nats.Msg) (*jwt.AuthorizationRequestClaims, string) {
	if len(m.Data) > r.opts.MaxRequestBytes {
		return nil, ReasonTooLarge
	}
	if m.Header.Get(xkeyHeader) != "" {
		return nil, ReasonEncrypted
	}
	req, err := jwt.DecodeAuthorizationRequestClaims(string(m.Data))
	if err != nil || req.UserNkey == "" || req.Server.ID == "" {
		return nil, ReasonBadRequest
	}
	return req, ""
}

// response encodes the signed answer to req: a user JWT for the server to
// register, placed in Account, or a refusal.
func (r *Responder) response(req *jwt.AuthorizationRequestClaims, v verdict) (string, error) {
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = req.Server.ID
	if v.reason != "" {
		resp.Error = errRefused
		return resp.Encode(r.opts.Issuer)
	}
	user := jwt.NewUserClaims(req.UserNkey)
	user.Name = v.identity // becomes the connection's username (retained messages' source)
	user.Audience = r.opts.Account
	user.Permissions = v.permissions
	user.AllowedConnectionTypes.Add(jwt.ConnectionTypeMqtt, jwt.ConnectionTypeMqttWS)
	if r.opts.UserTTL > 0 {
		user.Expires = time.Now().Add(r.opts.UserTTL).Unix()
	}
	token, err := user.Encode(r.opts.Issuer)
	if err != nil {
		return "", fmt.Errorf("user JWT of %s: %w", v.identity, err)
	}
	resp.Jwt = token
	return resp.Encode(r.opts.Issuer)
}

// logDenied logs a refusal, at most once per identity and LogInterval.
func (r *Responder) logDenied(reason, identity string, req *jwt.AuthorizationRequestClaims) {
	suppressed, ok := r.logs.Allow(reason + "/" + identity)
	if !ok {
		return
	}
	attrs := []any{"node", identity, "reason", reason}
	if req != nil {
		attrs = append(attrs, "host", req.ClientInformation.Host, "client_id", req.ClientInformation.MQTT, "server", req.Server.Name)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	r.log.Warn("nats client refused", attrs...)
}
