package broker

import (
	"log/slog"
	"math"
	"net/netip"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// DefaultAddr is the plain TCP listener address used when no listener is
// configured at all: loopback only, so a fresh install is not exposed.
const DefaultAddr = "127.0.0.1:1883"

// DefaultRevocationPoll is how often the revocation list file is checked for
// changes.
const DefaultRevocationPoll = 5 * time.Second

// Options configures a Broker. Zero values take the defaults applied by
// withDefaults; only DataDir is required.
type Options struct {
	// Addr is the plain MQTT-over-TCP listener address. If Addr, TLSAddr and
	// WebSocketAddr are all empty it defaults to DefaultAddr; otherwise an
	// empty Addr means no plain TCP listener.
	Addr string
	// TLSAddr is the MQTT-over-TLS listener address; it needs CertFile and
	// KeyFile. Empty means no TLS listener.
	TLSAddr string
	// CertFile and KeyFile are the PEM server certificate and key of the TLS
	// and WebSocket listeners.
	CertFile, KeyFile string
	// ClientCAFile, if set, turns the TLS listener into a mutual-TLS one: a
	// client must present a certificate signed by one of these PEM CAs, and
	// the certificate's CommonName is the client's identity.
	ClientCAFile string
	// WebSocketAddr is the MQTT-over-WebSocket listener address (TLS when
	// CertFile is set, without client certificates). Empty means none.
	WebSocketAddr string
	// DataDir holds fleet.secret, revoked-tokens and broker.db. Required.
	DataDir string
	// Limits bounds what clients may cost; zero fields take their defaults.
	Limits Limits
	// Republished, if set, names the retained topics whose publisher
	// publishes every one of them again after each (re)connection (the
	// controller's desired states, revisions, config objects and key set):
	// the broker keeps them in memory only, and drops any copy broker.db
	// holds from before. Writing them to broker.db would only repeat, per
	// node and per change, what the publisher's own store holds.
	Republished func(topic string) bool
	// RevocationPoll is how often DataDir/revoked-tokens is checked for
	// changes (default DefaultRevocationPoll).
	RevocationPoll time.Duration
	// OnDrop, if set, is called when a message could not be delivered to a
	// subscriber (its queue or inflight quota was full, or its inflight
	// message expired) so the controller can resync that client. It runs on
	// a broker goroutine and must not block. topic may be empty when mochi
	// does not report it.
	OnDrop func(clientID, topic string)
	// Logger receives the broker's and mochi's logs (default slog.Default()).
	Logger *slog.Logger

	// now is the clock of the gate and the log limiter (default time.Now);
	// tests set it.
	now func() time.Time
}

// DefaultMaxPacketSize is Limits.MaxPacketSize unless set: the largest
// MQTT packet the broker accepts, and so the largest message the
// controller can deliver through it.
const DefaultMaxPacketSize = 256 << 10

// Limits bounds the resources one client, or all of them, may use. The
// defaults keep an idle node connection small; docs/security.md explains each.
type Limits struct {
	// MaxClients is the number of concurrently connected clients
	// (default 100,000).
	MaxClients int64
	// MaxPacketSize is the largest MQTT packet accepted, in bytes
	// (default 256 KiB).
	MaxPacketSize uint32
	// MaxPendingWrites is the length of each client's outbound queue; a
	// message for a client whose queue is full is dropped (default 256).
	MaxPendingWrites int32
	// MaxInflight is the number of unacknowledged QoS 1/2 messages the broker
	// keeps per client; past it further messages to that client are dropped
	// (default 4096).
	MaxInflight uint16
	// ReceiveMaximum is the number of unacknowledged QoS 2 messages a client
	// may have in flight towards the broker (default 128; the controller gets
	// 65,535).
	ReceiveMaximum uint16
	// MaxSubscriptions is the number of topic filters one node client may
	// hold at once; past it a new filter is refused (SUBACK failure). The
	// controller is not bounded. An agent holds its desired and
	// logs/request topics and one per revision, ConfigMap or Secret it is
	// still waiting for, a few thousand at most (default 10,000).
	MaxSubscriptions int
	// SessionExpiry is how long a persistent (clean session false) session
	// is kept after its client disconnects (default 1h).
	SessionExpiry time.Duration
	// ReadBufferSize is each connection's read buffer (default 1 KiB).
	ReadBufferSize int
	// WriteBufferSize bounds the batching buffer used while a client has
	// queued writes; it is allocated only then (default 4 KiB).
	WriteBufferSize int

	// ConnectTimeout is how long a new connection may take to complete
	// CONNECT and authentication (TLS handshake included) before it is
	// closed (default 10s).
	ConnectTimeout time.Duration
	// MaxPendingConnections is the number of connections that have not yet
	// completed CONNECT and authentication; past it new connections are
	// closed at accept (default 1,000).
	MaxPendingConnections int
	// MaxConnectionsPerSource is the number of open connections from one
	// source (an IPv4 address, an IPv6 /64), loopback included; past it new ones are closed at accept
	// (default 100). A gateway NATing many devices, or edgeset-sim, needs
	// more, or an entry in ExemptSources.
	MaxConnectionsPerSource int
	// AuthFailureLimit failed logins from one source (as above) within
	// AuthFailureWindow refuse further connections from it, at accept, for
	// AuthFailureBackoff (defaults 10, 1m, 1m).
	AuthFailureLimit   int
	AuthFailureWindow  time.Duration
	AuthFailureBackoff time.Duration
	// ExemptSources are networks exempt from MaxConnectionsPerSource and
	// the failed-login back-off (not from ConnectTimeout or
	// MaxPendingConnections). Default none.
	ExemptSources []netip.Prefix
	// LogInterval is the least time between two log records of one kind
	// caused by one source or client (failed logins, refused connections,
	// bad packets); the next record says how many were suppressed
	// (default DefaultLogInterval).
	LogInterval time.Duration
}

// Defaults of Limits.
const (
	defaultMaxClients       = 100_000
	defaultMaxPacketSize    = DefaultMaxPacketSize
	defaultMaxPendingWrites = 256
	defaultMaxInflight      = 4096
	defaultReceiveMaximum   = 128
	defaultSessionExpiry    = time.Hour
	defaultMaxSubscriptions = 10_000
	defaultReadBufferSize   = 1 << 10
	defaultWriteBufferSize  = 4 << 10
	// DefaultConnectTimeout is Limits.ConnectTimeout unless set.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultMaxPendingConnections is Limits.MaxPendingConnections unless set.
	DefaultMaxPendingConnections = 1_000
	// DefaultMaxConnectionsPerSource is Limits.MaxConnectionsPerSource
	// unless set.
	DefaultMaxConnectionsPerSource = 100
	// DefaultAuthFailureLimit, DefaultAuthFailureWindow and
	// DefaultAuthFailureBackoff are the failed-login back-off's defaults.
	DefaultAuthFailureLimit   = 10
	DefaultAuthFailureWindow  = time.Minute
	DefaultAuthFailureBackoff = time.Minute
	// sysTopicInterval is how often mochi refreshes $SYS topics (seconds);
	// its default of 1s costs a stop-the-world ReadMemStats every second.
	sysTopicInterval = 60
	// topicAliasMaximum bounds MQTT 5 topic aliases per client.
	topicAliasMaximum = 64
	// controllerReceiveQuota is the controller's inbound QoS quota.
	controllerReceiveQuota = math.MaxUint16
)

// withDefaults returns o with every zero field set to its default. It is the
// one place defaults are applied.
func (o Options) withDefaults() Options {
	if o.Addr == "" && o.TLSAddr == "" && o.WebSocketAddr == "" {
		o.Addr = DefaultAddr
	}
	if o.RevocationPoll <= 0 {
		o.RevocationPoll = DefaultRevocationPoll
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	o.Limits = o.Limits.withDefaults()
	return o
}

// withDefaults returns l with every zero field set to its default.
func (l Limits) withDefaults() Limits {
	setDefault(&l.MaxClients, defaultMaxClients)
	setDefault(&l.MaxPacketSize, defaultMaxPacketSize)
	setDefault(&l.MaxPendingWrites, defaultMaxPendingWrites)
	setDefault(&l.MaxInflight, defaultMaxInflight)
	setDefault(&l.ReceiveMaximum, defaultReceiveMaximum)
	setDefault(&l.SessionExpiry, defaultSessionExpiry)
	setDefault(&l.MaxSubscriptions, defaultMaxSubscriptions)
	setDefault(&l.ReadBufferSize, defaultReadBufferSize)
	setDefault(&l.WriteBufferSize, defaultWriteBufferSize)
	setDefault(&l.ConnectTimeout, DefaultConnectTimeout)
	setDefault(&l.MaxPendingConnections, DefaultMaxPendingConnections)
	setDefault(&l.MaxConnectionsPerSource, DefaultMaxConnectionsPerSource)
	setDefault(&l.AuthFailureLimit, DefaultAuthFailureLimit)
	setDefault(&l.AuthFailureWindow, DefaultAuthFailureWindow)
	setDefault(&l.AuthFailureBackoff, DefaultAuthFailureBackoff)
	setDefault(&l.LogInterval, DefaultLogInterval)
	return l
}

// setDefault sets *v to def if *v is zero or negative.
func setDefault[T int | int32 | int64 | uint16 | uint32 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// capabilities translates the limits into mochi's capabilities.
// MaximumMessageExpiryInterval is 0: mochi otherwise deletes retained
// messages (desired state among them) 24 hours after they were published,
// while a device may stay offline for months.
func (l Limits) capabilities() *mqtt.Capabilities {
	c := mqtt.NewDefaultServerCapabilities()
	c.MaximumClients = l.MaxClients
	c.MaximumPacketSize = l.MaxPacketSize
	c.MaximumClientWritesPending = l.MaxPendingWrites
	c.MaximumInflight = l.MaxInflight
	c.ReceiveMaximum = l.ReceiveMaximum
	c.MaximumSessionExpiryInterval = uint32(min(l.SessionExpiry/time.Second, math.MaxUint32))
	c.MaximumMessageExpiryInterval = 0
	c.TopicAliasMaximum = topicAliasMaximum
	return c
}
