package mqttclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Default option values, applied by New.
const (
	DefaultKeepAlive        = 60 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultMaxPendingTopics = 1 << 18
	DefaultEventBuffer      = 1024
	DefaultPublishWindow    = 256
)

// MaxBrokerURLs bounds Options.BrokerURLs.
const MaxBrokerURLs = 32

// Options configure a Client. The zero value of every optional field means
// its default; New applies all defaults in one place.
type Options struct {
	// BrokerURLs are the nodes of one broker (a cluster, or a primary and
	// its standbys), each scheme://host[:port] with scheme tcp, mqtt, ssl,
	// tls, mqtts, ws or wss. A missing port means 1883 (tcp, mqtt) or 8883
	// (ssl, tls, mqtts). Every connection goes to one of them; a failed
	// attempt or a lost connection moves to the next (see doc.go,
	// Failover). At most MaxBrokerURLs. BrokerURLs or BrokerURL is
	// required.
	BrokerURLs []string
	// BrokerURL is shorthand for a one-element BrokerURLs; set one, not
	// both.
	BrokerURL string
	// OrderedBrokers makes the first attempt go to BrokerURLs[0] instead of
	// a random one: for a caller that spreads its clients itself (the
	// simulator) or prefers a primary. Failover order is the same either
	// way: the next URL in the list, wrapping around.
	OrderedBrokers bool
	// ClientID must be stable across restarts (the node name for an agent):
	// a broker lets one session per client ID live, so a second process with
	// the same ID takes the connection over. Required.
	ClientID string
	// Username and Password authenticate the client (an agent's node name
	// and node token).
	Username string
	Password string

	// TLSConfig is the base TLS configuration for ssl/tls/mqtts/wss brokers.
	// CAFile, CertFile and KeyFile, when set, are loaded into a clone of it:
	// a PEM bundle of CAs to trust instead of the system roots, and a client
	// certificate with its key. Setting any TLS option with a plain tcp:// or
	// ws:// URL is an error.
	TLSConfig *tls.Config
	CAFile    string
	CertFile  string
	KeyFile   string

	// KeepAlive is the MQTT keepalive; liveness and the will depend on it.
	// Default 60 s.
	KeepAlive time.Duration
	// ConnectTimeout bounds one connection attempt (dial, TLS, CONNACK).
	// Default 10 s.
	ConnectTimeout time.Duration
	// WriteTimeout bounds waiting for PUBACK, SUBACK or UNSUBACK when the
	// caller's context has no earlier deadline. Default 10 s.
	WriteTimeout time.Duration
	// Dial, if set, opens the network connection of every attempt in place
	// of a net.Dialer: network is "tcp" and addr the broker's host:port. It
	// lets a caller pick the local source address (a simulator spreading
	// thousands of clients over 127.0.0.x) or wrap the connection. The
	// context ends after ConnectTimeout. For ssl/tls/mqtts brokers the TLS
	// handshake runs over the returned connection; ws and wss brokers do not
	// support Dial (New refuses the combination).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Will, if set, is called on Run's goroutine before every connection
	// attempt and returns the will message for that connection, or nil for
	// none. The broker publishes it at QoS 1 when the connection dies
	// without a DISCONNECT. A clean disconnect (Run's context ending) never
	// sends the will, as MQTT specifies: an agent that wants its presence
	// to read offline publishes that itself before cancelling Run. The
	// agent stamps its session into the payload here; the last call before
	// an OnConnect belongs to that connection.
	Will func() *Message

	// Subscriptions are subscribed after every connection, before OnConnect.
	// Subscribe and Unsubscribe change the set at run time.
	Subscriptions []Subscription
	// Handler receives every inbound message on one goroutine, never on
	// paho's. Messages on a coalescing topic that arrive while Handler is
	// busy replace each other: Handler sees the latest payload of a topic
	// (an empty payload is a cleared retained message). Required when
	// anything is subscribed. It must not panic.
	Handler func(topic string, payload []byte)
	// NoCoalesce reports topics whose messages are events, not state: they
	// are queued first-in first-out in a bounded buffer (EventBuffer) and
	// dropped, counted in Stats.Dropped, when it is full. It runs on paho's
	// router goroutine and must be fast. Nil means every topic coalesces.
	NoCoalesce func(topic string) bool
	// Stale, when set, is asked before a message replaces the payload still
	// pending for its topic in the coalescing inbox: it reports whether
	// incoming is older than pending (a lower generation redelivered after
	// a newer one), which is then dropped instead. Nil: the last to arrive
	// wins.
	Stale func(topic string, pending, incoming []byte) bool
	// MaxPendingTopics bounds the distinct state topics waiting for Handler;
	// a message on a new topic beyond it is dropped and counted. Default
	// 262144.
	MaxPendingTopics int
	// EventBuffer bounds the queued event messages. Default 1024.
	EventBuffer int

	// OnConnect is called after every connection and resubscription, on its
	// own goroutine, with a context that ends when that connection ends.
	// Calls never overlap: a call waits until the previous one returned.
	// This is where the controller republishes every desired state and the
	// agent re-announces itself.
	OnConnect func(ctx context.Context)
	// OnConnectionLost is called on Run's goroutine when an established
	// connection drops, before the reconnection backoff; it must not block.
	OnConnectionLost func(err error)

	// Backoff shapes reconnection delays (see Backoff for defaults).
	Backoff Backoff
	// FirstConnectJitter is the window of the random delay before the very
	// first connection attempt, so a fleet powered on together does not
	// connect in step. Zero means Backoff.Initial; negative means none.
	FirstConnectJitter time.Duration
	// PublishWindow bounds the unacknowledged publishes PublishAll keeps in
	// flight. Default 256.
	PublishWindow int
	// PublishAtMostOnce sends Publish and PublishAll at QoS 0: each
	// returns once its message is written to the connection, with no
	// PUBACK to wait for, and a message the connection loses is gone (the
	// will stays QoS 1). For callers whose messages are level-based state
	// they republish after every connection, on a broker where QoS 1 costs
	// more than delivery: nats-server stores every QoS 1 PUBLISH in a
	// replicated JetStream stream whether or not anyone subscribes at
	// QoS 1 (docs/scale-out.md).
	PublishAtMostOnce bool

	// Logger receives connection events. Default: discard.
	Logger *slog.Logger
	// AuthRefusedHint, when set, is logged (as "hint") with every connect
	// attempt the broker refuses for its credentials (CONNACK "not
	// authorized" or "bad user name or password"): what the operator
	// should check.
	AuthRefusedHint string
}

// Subscription is one topic filter and its maximum QoS.
type Subscription struct {
	Filter string
	QoS    byte
}

// Message is an outbound message (or a will). Publishes are at QoS 1
// (QoS 0 with Options.PublishAtMostOnce), wills at QoS 1.
type Message struct {
	Topic    string
	Payload  []byte
	Retained bool
}

// withDefaults returns o with defaults applied.
func (o Options) withDefaults() Options {
	o.KeepAlive = orDefault(o.KeepAlive, DefaultKeepAlive)
	o.ConnectTimeout = orDefault(o.ConnectTimeout, DefaultConnectTimeout)
	o.WriteTimeout = orDefault(o.WriteTimeout, DefaultWriteTimeout)
	o.MaxPendingTopics = orDefault(o.MaxPendingTopics, DefaultMaxPendingTopics)
	o.EventBuffer = orDefault(o.EventBuffer, DefaultEventBuffer)
	o.PublishWindow = orDefault(o.PublishWindow, DefaultPublishWindow)
	o.Backoff = o.Backoff.withDefaults()
	if o.FirstConnectJitter == 0 {
		o.FirstConnectJitter = o.Backoff.Initial
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// orDefault returns def when v is zero or negative.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// validate reports every problem of o, each naming its field.
func (o Options) validate() error {
	var errs []error
	if o.ClientID == "" {
		errs = append(errs, errors.New("option ClientID: required"))
	}
	if len(o.Subscriptions) > 0 && o.Handler == nil {
		errs = append(errs, errors.New("option Handler: required when Subscriptions are set"))
	}
	for i, s := range o.Subscriptions {
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("option Subscriptions[%d]: %w", i, err))
		}
	}
	if o.KeepAlive > 0 && o.KeepAlive < time.Second {
		errs = append(errs, fmt.Errorf("KeepAlive: %s is below the 1 s MQTT resolution", o.KeepAlive))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("options CertFile and KeyFile: set both or neither"))
	}
	if o.Dial != nil {
		for _, raw := range o.brokerURLs() {
			if strings.HasPrefix(raw, "ws") {
				errs = append(errs, errors.New("option Dial: not supported with ws:// or wss:// brokers"))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// brokerURLs returns BrokerURLs, or BrokerURL as a list of one.
func (o Options) brokerURLs() []string {
	if len(o.BrokerURLs) == 0 && o.BrokerURL != "" {
		return []string{o.BrokerURL}
	}
	return o.BrokerURLs
}

// BrokerList returns the broker URLs o names (BrokerURLs, or BrokerURL as a
// list of one), as given: for messages that name them before New.
func (o Options) BrokerList() []string {
	return append([]string(nil), o.brokerURLs()...)
}

// broker is one validated broker URL.
type broker struct {
	field    string // the option it came from: BrokerURL or BrokerURLs[i]
	url      string // with the default port: what paho dials
	redacted string // the password masked: for logs and Stats
	tls      bool   // a TLS transport
}

// brokers validates BrokerURL or BrokerURLs and returns them with default
// ports; each error names the field and, in a list, the index.
func (o Options) brokers() ([]broker, error) {
	switch {
	case o.BrokerURL != "" && len(o.BrokerURLs) > 0:
		return nil, errors.New("options BrokerURL and BrokerURLs: set one, not both")
	case o.BrokerURL != "":
		b, err := parseBroker("BrokerURL", o.BrokerURL)
		return []broker{b}, err
	case len(o.BrokerURLs) == 0:
		return nil, errors.New("BrokerURL: required (or BrokerURLs)")
	case len(o.BrokerURLs) > MaxBrokerURLs:
		return nil, fmt.Errorf("BrokerURLs: %d URLs, at most %d", len(o.BrokerURLs), MaxBrokerURLs)
	}
	out := make([]broker, len(o.BrokerURLs))
	var errs []error
	for i, raw := range o.BrokerURLs {
		b, err := parseBroker(fmt.Sprintf("BrokerURLs[%d]", i), raw)
		errs = append(errs, err)
		out[i] = b
	}
	return out, errors.Join(errs...)
}

// parseBroker validates the URL raw of field.
func parseBroker(field, raw string) (broker, error) {
	u, err := brokerURL(field, raw)
	if err != nil {
		return broker{}, err
	}
	return broker{field: field, url: u.String(), redacted: u.Redacted(), tls: usesTLS(u.Scheme)}, nil
}

// validate checks a filter's syntax and QoS.
func (s Subscription) validate() error {
	if s.QoS > 2 {
		return fmt.Errorf("QoS %d: must be 0, 1 or 2", s.QoS)
	}
	return validateFilter(s.Filter)
}

// validateTopicName checks that topic is a topic name one can publish to:
// non-empty and without wildcards.
func validateTopicName(topic string) error {
	if topic == "" {
		return errors.New("topic: empty")
	}
	if strings.ContainsAny(topic, "#+") {
		return fmt.Errorf("topic %q: a topic name has no wildcards", topic)
	}
	return nil
}

// validateFilter checks MQTT filter syntax: non-empty, '#' only as the whole
// last level, '+' only as a whole level.
func validateFilter(filter string) error {
	if filter == "" {
		return errors.New("filter: empty")
	}
	levels := strings.Split(filter, "/")
	for i, level := range levels {
		switch {
		case level == "#" && i != len(levels)-1:
			return fmt.Errorf("filter %q: '#' must be the last level", filter)
		case level != "#" && level != "+" && strings.ContainsAny(level, "#+"):
			return fmt.Errorf("filter %q: wildcards must fill a whole level", filter)
		}
	}
	return nil
}

// defaultPorts maps accepted URL schemes to their default port ("" keeps
// the URL as given).
var defaultPorts = map[string]string{
	"tcp": "1883", "mqtt": "1883",
	"ssl": "8883", "tls": "8883", "mqtts": "8883",
	"ws": "", "wss": "",
}

// brokerURL validates raw, the value of field, and adds the default port
// when it is missing.
func brokerURL(field, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("%s: empty", field)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	port, ok := defaultPorts[u.Scheme]
	if !ok {
		return nil, fmt.Errorf("%s %q: scheme %q is not one of tcp, mqtt, ssl, tls, mqtts, ws, wss", field, u.Redacted(), u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%s %q: no host", field, u.Redacted())
	}
	if u.Port() == "" && port != "" {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	return u, nil
}

// usesTLS reports whether scheme is a TLS transport.
func usesTLS(scheme string) bool {
	switch scheme {
	case "ssl", "tls", "mqtts", "wss":
		return true
	}
	return false
}

// tlsConfig builds the TLS configuration of brokers: nil when none uses
// TLS, otherwise a clone of TLSConfig (or a TLS 1.2+ default) with CAFile
// and the client certificate loaded. TLS options with a plain broker are
// an error naming it: they would silently not apply there.
func (o Options) tlsConfig(brokers []broker) (*tls.Config, error) {
	anySet := o.TLSConfig != nil || o.CAFile != "" || o.CertFile != ""
	anyTLS := false
	for _, b := range brokers {
		anyTLS = anyTLS || b.tls
		if anySet && !b.tls {
			return nil, fmt.Errorf("TLS options set but %s %s is not TLS (use ssl://, tls://, mqtts:// or wss://)", b.field, b.redacted)
		}
	}
	if !anyTLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSConfig != nil {
		cfg = o.TLSConfig.Clone()
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CAFile %s: no PEM certificates found", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("CertFile, KeyFile: %w", err)
		}
		cfg.Certificates = append(cfg.Certificates, cert)
	}
	return cfg, nil
}
