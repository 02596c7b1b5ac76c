package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/mochistop"
	"github.com/edgeset/edgeset/schema"
)

// Listener IDs.
const (
	listenerTCP = "tcp"
	listenerTLS = "tls"
	listenerWS  = "ws"
)

// Broker is the embedded MQTT broker. Create it with New, serve with Run.
type Broker struct {
	opts    Options
	secret  []byte
	log     *slog.Logger
	server  *mqtt.Server
	revoked *credential.Revocations

	addr, tlsAddr net.Addr       // bound listener addresses; nil if disabled
	wsAddr        net.Addr       // bound WebSocket listener address; nil if disabled
	serving       sync.WaitGroup // joins the listeners' accept loops
	conns         *conns         // every connection being served
	gate          *gate          // admits connections (conns asks it)
	listeners     listenerHealth // listeners that cannot accept
	limited       *logLimiter    // logs what clients can cause at will
	metrics       *metrics

	mu        sync.Mutex // guards started and closing: Run's start vs Close
	started   bool       // guarded by mu
	closing   bool       // guarded by mu
	closeOnce sync.Once
	ready     chan struct{} // closed once Run serves, retained messages loaded
	closed    chan struct{} // closed by Close once everything is joined
	closeErr  error         // set by Close before closed is closed

	hookDrops    atomic.Int64 // messages dropped, as reported by mochi hooks
	idExhausted  atomic.Int64 // drops for lack of packet IDs (also in InflightDropped)
	authFailures atomic.Int64 // connections refused by authenticate
}

// Stats are cumulative counters of a Broker.
type Stats struct {
	// Connected is the number of clients connected now.
	Connected int64
	// MessagesIn is the number of PUBLISH packets received from clients.
	MessagesIn int64
	// MessagesOut is the number of PUBLISH packets written to clients.
	MessagesOut int64
	// Dropped is the number of messages not delivered to a subscriber: its
	// outbound queue or inflight store was full, it had no free packet ID,
	// or an inflight message expired.
	Dropped int64
	// AuthFailures is the number of connections refused at CONNECT.
	AuthFailures int64
}

// New checks opts, loads (or creates) the fleet secret in opts.DataDir,
// opens the retained-message store and binds every configured listener. The
// broker accepts connections once Run is called.
func New(opts Options) (*Broker, error) {
	opts = opts.withDefaults()
	if opts.DataDir == "" {
		return nil, ErrNoDataDir
	}
	secret, err := credential.LoadOrCreateFleetSecret(opts.DataDir)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		opts:    opts,
		secret:  secret,
		log:     opts.Logger.With("component", "broker"),
		revoked: credential.NewRevocations(filepath.Join(opts.DataDir, credential.RevokedFile)),
		gate:    newGate(opts.Limits, opts.now),
		ready:   make(chan struct{}),
		closed:  make(chan struct{}),
	}
	b.limited = newLogLimiter(b.log, opts.Limits.LogInterval, opts.now)
	b.conns = &conns{gate: b.gate, timeout: opts.Limits.ConnectTimeout, expired: b.connectTimedOut}
	b.metrics = newMetrics(func() float64 { pending, _ := b.gate.counts(); return float64(pending) })
	if _, err := b.reload(false); err != nil {
		return nil, err
	}
	mochiLog := mochiHandler{Handler: opts.Logger.Handler(), level: slog.LevelWarn, limiter: b.limited, closing: b.conns.closing}
	b.server = mqtt.New(&mqtt.Options{
		Capabilities:             opts.Limits.capabilities(),
		ClientNetReadBufferSize:  opts.Limits.ReadBufferSize,
		ClientNetWriteBufferSize: opts.Limits.WriteBufferSize,
		SysTopicResendInterval:   sysTopicInterval,
		InlineClient:             true, // the embedded controller's in-process path
		Logger:                   slog.New(mochiLog).With("component", "mochi"),
	})
	if err := b.setup(); err != nil {
		_ = mochistop.Close(b.server, listenerTCP, listenerTLS, listenerWS) // whatever listeners and hooks were added
		return nil, err
	}
	return b, nil
}

// setup adds the hooks and binds the listeners.
func (b *Broker) setup() error {
	if err := b.server.AddHook(&hook{b: b}, nil); err != nil {
		return fmt.Errorf("add auth hook: %w", err)
	}
	store, err := openRetainedStore(filepath.Join(b.opts.DataDir, StoreFile), b.opts.Republished, b.log)
	if err != nil {
		return err
	}
	if err := b.server.AddHook(store, nil); err != nil {
		_ = store.Stop()
		return fmt.Errorf("add retained store hook: %w", err)
	}
	tlsLn, tlsWS, err := serverTLS(b.opts)
	if err != nil {
		return err
	}
	if b.addr, err = b.listen(listenerTCP, b.opts.Addr, nil); err != nil {
		return err
	}
	if b.tlsAddr, err = b.listen(listenerTLS, b.opts.TLSAddr, tlsLn); err != nil {
		return err
	}
	return b.listenWebSocket(tlsWS)
}

// listen binds addr (TLS when cfg is set) and attaches it as listener id.
// It returns the bound address, or nil when addr is empty.
func (b *Broker) listen(id, addr string, cfg *tls.Config) (net.Addr, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := b.bind(id, addr, cfg)
	if err != nil {
		return nil, err
	}
	if err := b.server.AddListener(joined{listeners.NewNet(id, ln), b}); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("add listener %s: %w", id, err)
	}
	return ln.Addr(), nil
}

// bind listens on addr through a retryListener, TLS when cfg is set.
func (b *Broker) bind(id, addr string, cfg *tls.Config) (net.Listener, error) {
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s on %s: %w", id, addr, err)
	}
	var ln net.Listener = newRetryListener(raw,
		func(err error, retryIn time.Duration) { b.acceptFailed(id, err, retryIn) },
		func() { b.acceptRecovered(id) })
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return ln, nil
}

// listenWebSocket binds and attaches the WebSocket listener if one is
// configured.
func (b *Broker) listenWebSocket(cfg *tls.Config) error {
	if b.opts.WebSocketAddr == "" {
		return nil
	}
	ln, err := b.bind(listenerWS, b.opts.WebSocketAddr, cfg)
	if err != nil {
		return err
	}
	ws := newWSListener(listenerWS, ln, cfg != nil, b.opts.Limits.ConnectTimeout, b.opts.Limits.MaxPendingConnections,
		func(conn net.Conn) { b.connRefused(conn, refusedPending) }, b.log)
	if err := b.server.AddListener(joined{ws, b}); err != nil {
		_ = ln.Close()
		return fmt.Errorf("add listener %s on %s: %w", listenerWS, b.opts.WebSocketAddr, err)
	}
	b.wsAddr = ln.Addr()
	return nil
}

// joined is a mochi listener whose accept loop and connections are tracked
// by the broker, so Close can end and join them.
type joined struct {
	listeners.Listener
	b *Broker
}

// Serve runs the accept loop of the wrapped listener. A loop that ends
// while the broker is not closing is a fault Health reports.
func (j joined) Serve(establish listeners.EstablishFn) {
	defer j.b.serving.Done()
	j.Listener.Serve(j.b.conns.track(establish, j.b.connRefused, j.b.connEnded))
	if !j.b.conns.closing() {
		j.b.listeners.set(j.ID(), errors.New("stopped accepting connections"))
		j.b.log.Error("mqtt listener stopped accepting connections", "listener", j.ID(), "address", j.Address())
	}
}

// Addr returns the bound address of the plain TCP listener, or nil if it is
// disabled. It is valid as soon as New returns.
func (b *Broker) Addr() net.Addr { return b.addr }

// TLSAddr returns the bound address of the TLS listener, or nil if it is
// disabled. It is valid as soon as New returns.
func (b *Broker) TLSAddr() net.Addr { return b.tlsAddr }

// WebSocketAddr returns the bound address of the WebSocket listener, or nil
// if it is disabled. It is valid as soon as New returns.
func (b *Broker) WebSocketAddr() net.Addr { return b.wsAddr }

// Run serves MQTT until ctx ends or Close is called, then closes the broker:
// listeners and client connections are closed, their goroutines joined and
// the store is closed. It polls the revocation list meanwhile. Run may be
// called once.
func (b *Broker) Run(ctx context.Context) error {
	if err := b.start(); err != nil {
		return err
	}
	tick := time.NewTicker(b.opts.RevocationPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return b.Close()
		case <-b.closed:
			return b.closeErr
		case <-tick.C:
			if err := b.Reload(); err != nil {
				b.log.Error("reload revocation list", "error", err)
			}
		}
	}
}

// start starts serving unless the broker is closing or already started.
func (b *Broker) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closing:
		return ErrClosed
	case b.started:
		return ErrRunning
	}
	b.started = true
	n := b.server.Listeners.Len()
	b.serving.Add(n)
	if err := b.server.Serve(); err != nil {
		b.serving.Add(-n) // mochi failed before serving any listener
		return fmt.Errorf("serve mqtt: %w", err)
	}
	close(b.ready)
	return nil
}

// Ready is closed once Run serves: the retained messages of the previous
// run are loaded, so an in-process Subscribe sees them.
func (b *Broker) Ready() <-chan struct{} { return b.ready }

// Close stops the broker and joins its goroutines. It is safe to call more
// than once and concurrently with Run; later calls return the first result.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closing = true
		b.mu.Unlock()
		b.conns.closeAll()
		b.closeErr = mochistop.Close(b.server, listenerTCP, listenerTLS, listenerWS)
		b.serving.Wait()
		close(b.closed)
	})
	<-b.closed
	return b.closeErr
}

// Stats returns the broker's counters.
func (b *Broker) Stats() Stats {
	info := b.server.Info
	quotaDrops := atomic.LoadInt64(&info.InflightDropped) - b.idExhausted.Load()
	return Stats{
		Connected:    atomic.LoadInt64(&info.ClientsConnected),
		MessagesIn:   atomic.LoadInt64(&info.MessagesReceived),
		MessagesOut:  atomic.LoadInt64(&info.MessagesSent),
		Dropped:      b.hookDrops.Load() + quotaDrops,
		AuthFailures: b.authFailures.Load(),
	}
}

// Reload re-reads the revocation list now, whether or not it changed, and
// disconnects connected clients that it revokes. Run also reloads it when
// the file changes.
//
// A node whose credential epoch changed (its token was rotated) is
// disconnected too: it was admitted with a token no longer accepted.
func (b *Broker) Reload() error {
	before := b.revoked.Epochs()
	changed, err := b.reload(true)
	if err != nil || !changed {
		return err
	}
	b.disconnectRevoked(before)
	return nil
}

// reload loads the revocation list (if changed, or always when force is set)
// and logs malformed lines.
func (b *Broker) reload(force bool) (bool, error) {
	changed, bad, err := b.revoked.Load(force)
	for _, line := range bad {
		b.log.Warn("ignoring malformed revocation entry", "file", b.revoked.Path(), "entry", line)
	}
	return changed, err
}

// disconnectRevoked disconnects every connected node that is now
// revoked, or whose credential epoch differs from before (a node
// admitted by a client certificate keeps its connection through a
// rotation: its token was not what admitted it).
func (b *Broker) disconnectRevoked(before map[string]uint64) {
	for _, cl := range b.server.Clients.GetAll() {
		identity := string(cl.Properties.Username)
		if cl.Net.Inline || cl.Closed() || identity == credential.ControllerUsername {
			continue
		}
		switch {
		case b.revoked.Revoked(b.secret, identity):
			b.log.Info("disconnecting revoked node", "node", identity, "client", cl.ID)
			_ = b.server.DisconnectClient(cl, packets.ErrNotAuthorized)
		case b.revoked.Epoch(identity) != before[identity] && !b.certified(cl):
			b.log.Info("disconnecting node whose token was rotated", "node", identity, "client", cl.ID,
				"epoch", b.revoked.Epoch(identity))
			_ = b.server.DisconnectClient(cl, packets.ErrNotAuthorized)
		}
	}
}

// ConnectedIdentities returns the identities (node names) of the nodes
// with a connection open now; the controller's own and in-process clients
// are left out, as are the sessions mochi restored from its store, which
// it keeps closed until their client connects again.
func (b *Broker) ConnectedIdentities() map[string]bool {
	out := map[string]bool{}
	for _, cl := range b.server.Clients.GetAll() {
		identity := string(cl.Properties.Username)
		if cl.Net.Inline || cl.Closed() || identity == "" || identity == credential.ControllerUsername {
			continue
		}
		out[identity] = true
	}
	return out
}

// drop counts an undelivered message and notifies Options.OnDrop.
func (b *Broker) drop(clientID, topic string) {
	b.hookDrops.Add(1)
	b.notifyDrop(clientID, topic)
}

// notifyDrop calls Options.OnDrop if set.
func (b *Broker) notifyDrop(clientID, topic string) {
	if b.opts.OnDrop != nil {
		b.opts.OnDrop(clientID, topic)
	}
}

// authenticate decides a CONNECT. commonName is the verified client
// certificate's CommonName, or "" without one. It returns the client's
// identity: the node name or credential.ControllerUsername.
func (b *Broker) authenticate(commonName string, pk packets.Packet) (string, error) {
	identity := string(pk.Connect.Username)
	password := pk.Connect.Password
	if commonName != "" {
		if identity != "" && identity != commonName {
			return "", errCertMismatch
		}
		identity = commonName
	}
	switch {
	case identity == "":
		return "", errAnonymous
	case identity == credential.ControllerUsername:
		// A certificate never suffices for the controller: it needs its token.
		if !credential.TokenMatches(credential.ControllerToken(b.secret), password) {
			return "", errBadPassword
		}
	case !schema.ValidNodeName(identity):
		return "", errBadNodeName
	case commonName == "" && !credential.TokenMatches(b.revoked.NodeToken(b.secret, identity), password):
		return "", errBadPassword
	case b.revoked.Revoked(b.secret, identity):
		return "", errRevoked
	case pk.Connect.ClientIdentifier != identity && pk.Connect.ClientIdentifier != schema.MQTTClientID(identity):
		return "", errBadClientID
	}
	if pk.Connect.WillFlag && !allowed(identity, pk.Connect.WillTopic, true) {
		return "", errWillForbidden
	}
	return identity, nil
}

// certified reports whether cl was admitted by a verified client
// certificate rather than a token.
func (b *Broker) certified(cl *mqtt.Client) bool {
	return peerCommonName(cl.Net.Conn) != ""
}
