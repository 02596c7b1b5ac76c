package mqttclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// Client is one MQTT connection kept alive by Run. Its methods are safe for
// concurrent use.
type Client struct {
	opts    Options     // defaults applied; read-only after New
	brokers []broker    // validated, with default ports; never empty
	tls     *tls.Config // nil when no broker uses TLS
	log     *slog.Logger
	stats   counters
	inbox   *inbox
	fences  fences      // markers Refresh waits for
	running atomic.Bool // set by the first Run

	mu sync.Mutex
	// Guarded by mu.
	conn       mqtt.Client     // paho client of the live connection; nil when offline
	connBroker string          // redacted URL of the live connection's broker; "" offline
	subs       map[string]byte // filter to QoS, subscribed on every connection
}

// New validates opts, applies defaults and returns a Client that does
// nothing until Run.
func New(opts Options) (*Client, error) {
	brokers, err := opts.brokers()
	if err != nil {
		return nil, fmt.Errorf("mqtt options: %w", err)
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("mqtt options: %w", err)
	}
	tlsCfg, err := opts.tlsConfig(brokers)
	if err != nil {
		return nil, fmt.Errorf("mqtt options: %w", err)
	}
	opts = opts.withDefaults()
	c := &Client{
		opts:    opts,
		brokers: brokers,
		tls:     tlsCfg,
		log:     opts.Logger.With("clientID", opts.ClientID),
		subs:    make(map[string]byte, len(opts.Subscriptions)),
	}
	c.inbox = newInbox(opts.MaxPendingTopics, opts.EventBuffer, &c.stats)
	c.inbox.stale = opts.Stale
	for _, s := range opts.Subscriptions {
		c.subs[s.Filter] = s.QoS
	}
	return c, nil
}

// Run connects (after a random delay within FirstConnectJitter), keeps the
// connection up, reconnecting with Backoff after every loss, and delivers
// inbound messages to Handler. It blocks until ctx ends, then disconnects
// cleanly (so the broker does not publish the will), waits for Handler and
// OnConnect to return and returns nil. Run may be called once; a second
// call returns ErrAlreadyRunning.
func (c *Client) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.consume(ctx) })
	c.connectLoop(ctx, &wg)
	cancel()
	wg.Wait()
	return nil
}

// Broker returns the URL (password masked) of the broker the live
// connection uses, or "" when there is none.
func (c *Client) Broker() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connBroker
}

// Connected reports whether a connection is up.
func (c *Client) Connected() bool {
	pc := c.current()
	return pc != nil && pc.IsConnectionOpen()
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	return Stats{
		Received:        c.stats.received.Load(),
		Coalesced:       c.stats.coalesced.Load(),
		Dropped:         c.stats.dropped.Load(),
		Published:       c.stats.published.Load(),
		PublishErrors:   c.stats.publishErrors.Load(),
		Connects:        c.stats.connects.Load(),
		Reconnects:      c.stats.reconnects.Load(),
		ConnectFailures: c.stats.connectFails.Load(),
		Refreshed:       c.stats.refreshed.Load(),
		Pending:         c.inbox.len(),
		Connected:       c.Connected(),
		Broker:          c.Broker(),
	}
}

// current returns the live connection's paho client, or nil.
func (c *Client) current() mqtt.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// setCurrent records the live connection and its broker's URL (nil and ""
// when it ended).
func (c *Client) setCurrent(pc mqtt.Client, broker string) {
	c.mu.Lock()
	c.conn, c.connBroker = pc, broker
	c.mu.Unlock()
}

// setOffline records that no connection is live.
func (c *Client) setOffline() { c.setCurrent(nil, "") }

// consume delivers inbox messages to Handler until ctx ends.
func (c *Client) consume(ctx context.Context) {
	for {
		for {
			topic, payload, ok := c.inbox.pop()
			if !ok {
				break
			}
			if c.opts.Handler != nil {
				c.opts.Handler(topic, payload)
			}
			if ctx.Err() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.inbox.ready:
		}
	}
}

// connectLoop connects, serves each connection until it is lost and waits
// out the backoff, until ctx ends; rotation picks each attempt's broker.
// OnConnect goroutines join wg.
func (c *Client) connectLoop(ctx context.Context, wg *sync.WaitGroup) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	first := 0
	if !c.opts.OrderedBrokers {
		first = rnd.IntN(len(c.brokers))
	}
	rot := newRotation(len(c.brokers), first, c.opts.Backoff, rnd)
	delay := jitter(max(c.opts.FirstConnectJitter, 0), rnd)
	onConnectDone := closedChan()
	for sleep(ctx, delay) {
		b := c.brokers[rot.pick()]
		conn, err := c.connect(ctx, b)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.stats.connectFails.Add(1)
			delay = rot.failed()
			c.logConnectFailure(b, err, delay)
			continue
		}
		rot.connected()
		start := time.Now()
		onConnectDone = c.serve(ctx, conn, wg, onConnectDone)
		delay = rot.lost(time.Since(start) >= c.opts.Backoff.ResetAfter)
		if ctx.Err() == nil {
			c.log.Info("mqtt reconnecting", "in", delay, "next", c.brokers[rot.peek()].redacted)
		}
	}
}

// logConnectFailure logs a failed attempt on b; retryIn is the wait before
// the next attempt (zero: the next broker of the round, at once).
func (c *Client) logConnectFailure(b broker, err error, retryIn time.Duration) {
	if hint := c.opts.AuthRefusedHint; hint != "" && IsAuthRefused(err) {
		c.log.Warn("mqtt connect refused: the broker did not accept the credentials", "broker", b.redacted, "err", err, "retryIn", retryIn, "hint", hint)
		return
	}
	c.log.Warn("mqtt connect failed", "broker", b.redacted, "err", err, "retryIn", retryIn)
}

// connection is one established paho connection.
type connection struct {
	pc     mqtt.Client
	broker broker
	lost   chan error // receives the cause when paho reports the loss
}

// connect makes one connection attempt, bounded by ConnectTimeout. A fresh
// paho client per connection sidesteps paho's unsafe reuse of a client after
// Disconnect; paho's own reconnect is off because its backoff has no jitter.
func (c *Client) connect(ctx context.Context, b broker) (*connection, error) {
	conn := &connection{broker: b, lost: make(chan error, 1)}
	conn.pc = mqtt.NewClient(c.pahoOptions(b, conn.lost))
	tok := conn.pc.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		<-tok.Done() // bounded by ConnectTimeout: no retries inside paho
		if tok.Error() == nil {
			conn.pc.Disconnect(c.quiesceMillis())
		}
		return nil, ctx.Err()
	}
	if err := tok.Error(); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", b.redacted, err)
	}
	return conn, nil
}

// pahoOptions builds the paho options of one connection attempt to b: one
// paho client per connection, with b its only broker. Clean
// session with the memory store: paho's file store panics on I/O errors in
// v1.5.1, and edgeset republishes state on every connection anyway. Order
// matters stays true so a topic's messages reach the inbox in order
// (latest wins needs that); the inbox push never blocks the router.
func (c *Client) pahoOptions(b broker, lost chan<- error) *mqtt.ClientOptions {
	po := mqtt.NewClientOptions().
		AddBroker(b.url).
		SetClientID(c.opts.ClientID).
		SetUsername(c.opts.Username).
		SetPassword(c.opts.Password).
		SetProtocolVersion(4).
		SetCleanSession(true).
		SetStore(mqtt.NewMemoryStore()).
		SetOrderMatters(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetResumeSubs(false).
		SetKeepAlive(c.opts.KeepAlive).
		SetConnectTimeout(c.opts.ConnectTimeout).
		SetWriteTimeout(c.opts.WriteTimeout).
		SetDialer(&net.Dialer{Timeout: c.opts.ConnectTimeout}).
		SetDefaultPublishHandler(c.receive).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			select {
			case lost <- err:
			default:
			}
		})
	if b.tls {
		po.SetTLSConfig(c.tls)
	}
	if c.opts.Dial != nil {
		po.SetCustomOpenConnectionFn(c.openConn)
	}
	if c.opts.Will != nil {
		if w := c.opts.Will(); w != nil {
			po.SetBinaryWill(w.Topic, w.Payload, 1, w.Retained)
		}
	}
	return po
}

// openConn opens one connection through Options.Dial, bounded by
// ConnectTimeout, and runs the TLS handshake over it for TLS brokers.
func (c *Client) openConn(uri *url.URL, _ mqtt.ClientOptions) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ConnectTimeout)
	defer cancel()
	conn, err := c.opts.Dial(ctx, "tcp", uri.Host)
	if err != nil || !usesTLS(uri.Scheme) {
		return conn, err
	}
	cfg := c.tls
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = uri.Hostname()
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

// receive is paho's message handler; it runs on paho's router goroutine and
// must never block.
func (c *Client) receive(_ mqtt.Client, m mqtt.Message) {
	topic := m.Topic()
	if c.fences.arrived(topic, m.Payload()) {
		return
	}
	event := c.opts.NoCoalesce != nil && c.opts.NoCoalesce(topic)
	c.inbox.push(topic, m.Payload(), event)
}

// serve runs one established connection: it resubscribes, starts OnConnect
// once the previous call (prevDone) has returned, and waits for the
// connection to drop or ctx to end. It returns the channel closed when this
// connection's OnConnect returns.
func (c *Client) serve(ctx context.Context, conn *connection, wg *sync.WaitGroup, prevDone <-chan struct{}) <-chan struct{} {
	c.setCurrent(conn.pc, conn.broker.redacted)
	defer c.setOffline()
	if c.stats.connects.Add(1) > 1 {
		c.stats.reconnects.Add(1)
	}
	c.log.Info("mqtt connected", "broker", conn.broker.redacted)
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := c.resubscribe(connCtx, conn.pc); err != nil {
		c.log.Error("mqtt resubscribe failed", "broker", conn.broker.redacted, "err", err)
		if !errors.Is(err, ErrSubscriptionRefused) {
			// The connection is unusable (most likely already lost):
			// drop it and let the loop reconnect with backoff.
			c.setOffline()
			conn.pc.Disconnect(c.quiesceMillis())
			c.connectionLost(conn.broker, err)
			return prevDone
		}
	}
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		<-prevDone
		if c.opts.OnConnect != nil && connCtx.Err() == nil {
			c.opts.OnConnect(connCtx)
		}
	})
	c.awaitEnd(ctx, conn)
	return done
}

// awaitEnd blocks until the connection drops (then reports it) or ctx ends
// (then disconnects cleanly, so no will is published).
func (c *Client) awaitEnd(ctx context.Context, conn *connection) {
	select {
	case <-ctx.Done():
		c.setOffline()
		conn.pc.Disconnect(c.quiesceMillis())
		c.log.Info("mqtt disconnected", "broker", conn.broker.redacted)
	case err := <-conn.lost:
		c.setOffline()
		c.connectionLost(conn.broker, err)
	}
}

// connectionLost logs the loss of an established connection to b and
// reports it, naming b, to OnConnectionLost.
func (c *Client) connectionLost(b broker, err error) {
	c.log.Warn("mqtt connection lost", "broker", b.redacted, "err", err)
	if c.opts.OnConnectionLost != nil {
		c.opts.OnConnectionLost(fmt.Errorf("connection to %s: %w", b.redacted, err))
	}
}

// quiesceMillis is how long Disconnect may wait for the DISCONNECT packet
// to be written and paho's goroutines to stop.
func (c *Client) quiesceMillis() uint {
	return uint(c.opts.WriteTimeout.Milliseconds())
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// closedChan returns a closed channel.
func closedChan() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}
