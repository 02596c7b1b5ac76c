package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/controller/ui"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// Config is the controller's configuration. Every field is a key of
// configs/controller.yaml, a flag and an EDGESET_ environment variable (see
// cmd/edgeset-controller). Zero values mean the default; ApplyDefaults fills
// them in one place.
type Config struct {
	// DataDir holds the store (edgeset.db), the broker's retained messages
	// (broker.db), the fleet secret and the API token.
	DataDir string `mapstructure:"data-dir"`

	// MQTTAddr is the embedded broker's TCP listener.
	MQTTAddr string `mapstructure:"mqtt-addr"`
	// MQTTTLSAddr, with MQTTTLSCert and MQTTTLSKey, adds a TLS listener.
	MQTTTLSAddr string `mapstructure:"mqtt-tls-addr"`
	MQTTTLSCert string `mapstructure:"mqtt-tls-cert"`
	MQTTTLSKey  string `mapstructure:"mqtt-tls-key"`
	// MQTTClientCA turns on mutual TLS on the TLS listener: a client
	// certificate signed by this CA is required, and its common name is the
	// node's identity.
	MQTTClientCA string `mapstructure:"mqtt-client-ca"`
	// MQTTWSAddr adds a WebSocket listener.
	MQTTWSAddr string `mapstructure:"mqtt-ws-addr"`
	// MQTT connection limits of the embedded broker (docs/security.md); zero
	// means the broker's default. MQTTConnectTimeout closes a connection
	// that has not completed CONNECT and authentication in time;
	// MQTTMaxPendingConnections bounds such connections;
	// MQTTMaxConnectionsPerSource bounds the connections of one IP address;
	// MQTTAuthFailureLimit failed logins within MQTTAuthFailureWindow refuse
	// the address for MQTTAuthFailureBackoff; MQTTExemptSources (IP
	// addresses or CIDR prefixes) are exempt from the per-source cap and
	// the back-off.
	MQTTConnectTimeout          time.Duration `mapstructure:"mqtt-connect-timeout"`
	MQTTMaxPendingConnections   int           `mapstructure:"mqtt-max-pending-connections"`
	MQTTMaxConnectionsPerSource int           `mapstructure:"mqtt-max-connections-per-source"`
	MQTTAuthFailureLimit        int           `mapstructure:"mqtt-auth-failure-limit"`
	MQTTAuthFailureWindow       time.Duration `mapstructure:"mqtt-auth-failure-window"`
	MQTTAuthFailureBackoff      time.Duration `mapstructure:"mqtt-auth-failure-backoff"`
	MQTTExemptSources           []string      `mapstructure:"mqtt-exempt-sources"`

	// BrokerURLs selects an external MQTT 3.1.1 broker instead of the
	// embedded one (tcp://host:1883, ssl://host:8883): one URL, or the
	// nodes of a broker cluster, among which the controller fails over
	// (mqttclient.Options.BrokerURLs). At most mqttclient.MaxBrokerURLs.
	BrokerURLs []string `mapstructure:"broker-url"`
	// BrokerURL is shorthand, for callers in Go, for a one-element
	// BrokerURLs; set one, not both. It is no key of its own.
	BrokerURL string `mapstructure:"-"`
	// EnrollBrokerURLs are the broker URLs an enrolled device is given
	// (edgeset-agent enroll): the external broker's URLs when empty, or
	// the embedded broker's listeners on the host the device reached the
	// API at.
	EnrollBrokerURLs []string `mapstructure:"enroll-broker-url"`
	// BrokerUsername and BrokerPasswordFile are the controller's credential
	// on an external broker. The default password is the controller token
	// derived from the fleet secret (`edgesetctl token create --controller`).
	BrokerUsername     string `mapstructure:"broker-username"`
	BrokerPasswordFile string `mapstructure:"broker-password-file"`
	// BrokerClientID is the MQTT client ID on an external broker;
	// BrokerUsername when empty. An HA supervisor gives each controller
	// its own, so that a new leader's connection never shares a client ID
	// (and a broker's session bookkeeping) with its predecessor's. It is
	// no key of its own.
	BrokerClientID string `mapstructure:"-"`
	// BrokerCAFile verifies an external broker's TLS certificate.
	BrokerCAFile string `mapstructure:"broker-ca-file"`
	// BrokerDropTopic is where an external broker publishes its count of
	// dropped messages (Mosquitto's default). When it rises the controller
	// republishes every desired state and re-reads every node's retained
	// state. "none" turns it off.
	BrokerDropTopic string `mapstructure:"broker-drop-topic"`
	// BrokerResyncInterval is how often the controller re-reads every known
	// node's retained state from an external broker, whatever the drop
	// counter says. A negative value turns the periodic re-read off.
	BrokerResyncInterval time.Duration `mapstructure:"broker-resync-interval"`
	// BrokerSettleInterval is how long after each connection to an
	// external broker the controller subscribes to the node topics again,
	// which replays their retained messages: a broker cluster spreads a
	// subscription and a device's retained state over its nodes
	// asynchronously, and a device that announced itself meanwhile would
	// otherwise stay unknown. The controller's first pass after it starts
	// also waits up to this long for a report from every node it knows
	// online (externalTransport.awaitReports). A negative value turns both
	// off.
	BrokerSettleInterval time.Duration `mapstructure:"broker-settle-interval"`

	// NATSAuthURLs, when set, are NATS client URLs of a NATS cluster whose
	// MQTT listeners the devices use (broker-url): the controller serves
	// the cluster's auth callout (broker/natsauth), admitting each device
	// with its node token and granting it exactly its own topics, and the
	// controller itself. NATSAuthUser and NATSAuthPasswordFile are the
	// callout's auth user on the cluster; NATSAuthIssuerSeedFile holds the
	// account nkey seed whose public key is the servers' auth_callout
	// issuer; NATSAuthAccount is the account admitted clients are placed
	// in; NATSAuthUserTTL makes the servers close an admitted connection
	// after that long, so a revocation takes effect within it (negative:
	// never). See docs/scale-out.md.
	NATSAuthURLs           []string      `mapstructure:"nats-auth-url"`
	NATSAuthUser           string        `mapstructure:"nats-auth-user"`
	NATSAuthPasswordFile   string        `mapstructure:"nats-auth-password-file"`
	NATSAuthIssuerSeedFile string        `mapstructure:"nats-auth-issuer-seed-file"`
	NATSAuthAccount        string        `mapstructure:"nats-auth-account"`
	NATSAuthUserTTL        time.Duration `mapstructure:"nats-auth-user-ttl"`

	// APIAddr is the HTTP API listener.
	APIAddr string `mapstructure:"api-addr"`
	// UIDisabled turns the web dashboard (/ui/ on the API listener) off.
	UIDisabled bool `mapstructure:"ui-disabled"`
	// APITLSCert and APITLSKey serve the API over HTTPS.
	APITLSCert string `mapstructure:"api-tls-cert"`
	APITLSKey  string `mapstructure:"api-tls-key"`
	// API limits (docs/security.md): how long a client may take to send a
	// request's headers and whole request, to take a response, or keep an
	// idle connection; the largest header block.
	APIReadHeaderTimeout time.Duration `mapstructure:"api-read-header-timeout"`
	APIReadTimeout       time.Duration `mapstructure:"api-read-timeout"`
	APIWriteTimeout      time.Duration `mapstructure:"api-write-timeout"`
	APIIdleTimeout       time.Duration `mapstructure:"api-idle-timeout"`
	APIMaxHeaderBytes    int           `mapstructure:"api-max-header-bytes"`
	// APIMaxUnauthenticatedConns bounds the open API connections that have
	// not yet carried an authorised request, APIMaxConnsPerSource the open
	// connections of one source address (IPv6: one /64).
	APIMaxUnauthenticatedConns int `mapstructure:"api-max-unauthenticated-connections"`
	APIMaxConnsPerSource       int `mapstructure:"api-max-connections-per-source"`
	// APIAuthFailureLimit failed authentications of one source within
	// APIAuthFailureWindow block it for APIAuthFailureWindow (429);
	// APIAuthLogInterval allows one log line per source and interval about
	// failed authentications, and one per interval about refused
	// connections.
	APIAuthFailureLimit  int           `mapstructure:"api-auth-failure-limit"`
	APIAuthFailureWindow time.Duration `mapstructure:"api-auth-failure-window"`
	APIAuthLogInterval   time.Duration `mapstructure:"api-auth-log-interval"`

	// Signing signs every desired state, revision, ConfigMap and Secret
	// the controller publishes with its online key (DataDir/signing.key,
	// created on first start), for agents that pin the fleet root
	// (docs/security.md). SigningValidity is how long each signed
	// document is acceptable (default DefaultSigningValidity); the
	// controller re-signs everything every half of it. SigningTrustRoot,
	// optional, is the fleet root's public key (a file, or its
	// "ed25519:..." value) against which uploaded key sets are verified.
	Signing          bool          `mapstructure:"signing"`
	SigningValidity  time.Duration `mapstructure:"signing-validity"`
	SigningTrustRoot string        `mapstructure:"signing-trust-root"`

	// SecretEncryptionKeyFile names the data keys that encrypt Secrets in
	// the store (controller/datakey: one base64 AES-256 key a line, the
	// first current); empty derives one key from the fleet secret.
	SecretEncryptionKeyFile string `mapstructure:"secret-encryption-key-file"`
	// UnsealedSecretsFallback sends a Secret in the clear to a node that
	// registered no sealing key (an agent older than sealing), instead of
	// withholding it: off by default (sealed.go).
	UnsealedSecretsFallback bool `mapstructure:"unsealed-secrets-fallback"`

	// NodeOfflineGrace is how long a node may be disconnected before it is
	// marked Ready=Unknown and tainted unreachable.
	NodeOfflineGrace time.Duration `mapstructure:"node-offline-grace"`
	// RepublishRate bounds desired-state publishes per second when the
	// controller republishes the whole fleet after (re)connecting.
	RepublishRate int `mapstructure:"republish-rate"`
	// FullPassInterval is how often a reconcile pass decides every node
	// and daemonset from scratch, the level-triggered safety net under the
	// incremental passes that decide only what an event changed.
	FullPassInterval time.Duration `mapstructure:"full-pass-interval"`
	// DesiredRepairAfter is how long an online node may report a
	// generation below its desired state's before the controller publishes
	// that desired state again (repair.go); negative never.
	DesiredRepairAfter time.Duration `mapstructure:"desired-repair-after"`
	// SiteLabel is the node label whose value names a node's site: the
	// dashboard and the metrics (edgeset_nodes_by_site) group nodes by it.
	SiteLabel string `mapstructure:"site-label"`
	// TelemetryHistory is how many reports of each node's telemetry are
	// kept for `describe node` and the dashboard (0:
	// telemetry.DefaultLimit; negative: the latest only).
	TelemetryHistory int `mapstructure:"telemetry-history"`
	// ImageQuota bounds the bytes of the image store (DataDir/images);
	// default imagestore.DefaultQuota. ImageMaxUpload bounds one push.
	// ImageGCGrace spares an image no revision references this long after
	// its push. ImageDownloadsPerNode bounds the blob downloads one node
	// has open at once.
	ImageQuota            int64         `mapstructure:"image-quota"`
	ImageMaxUpload        int64         `mapstructure:"image-max-upload"`
	ImageGCGrace          time.Duration `mapstructure:"image-gc-grace"`
	ImageDownloadsPerNode int           `mapstructure:"image-downloads-per-node"`
	// MetricsPerNode adds per-node series to /metrics (edgeset_node_*),
	// for the first MaxPerNodeSeriesNodes nodes: for small fleets only.
	MetricsPerNode bool `mapstructure:"metrics-per-node"`
	// Clock is what the controller reads the time from for every decision
	// and stamp (node offline graces, tolerations, minReadySeconds, store
	// and event times); nil means time.Now. Tests inject their own. Only
	// durations measured for metrics and logs read the wall clock.
	Clock func() time.Time `mapstructure:"-"`
	// MaxEvents bounds the stored events.
	MaxEvents int `mapstructure:"max-events"`
	// MaxEventsPerNode bounds the stored events one node's reports
	// caused: past it, the node's newest event evicts its oldest. Default
	// a tenth of MaxEvents (at most MaxNodeEvents); at most MaxNodeEvents.
	MaxEventsPerNode int `mapstructure:"max-events-per-node"`
	// MaxNodeEvents bounds the stored events caused by nodes, all nodes
	// together: past it the oldest node-caused event is trimmed, never the
	// controller's own (Applied, rollout), which keep at least
	// MaxEvents-MaxNodeEvents places. Default half of MaxEvents; at most
	// MaxEvents.
	MaxNodeEvents int `mapstructure:"max-node-events"`
	// NodeEventRate and NodeEventBurst are the token bucket of events per
	// node: NodeEventRate a second, bursts of NodeEventBurst. Events over
	// it are dropped and counted.
	NodeEventRate  int `mapstructure:"node-event-rate"`
	NodeEventBurst int `mapstructure:"node-event-burst"`
	// EventSeriesWindow is how long a repeated event (same object, type,
	// reason and message) folds into the stored one, as a Kubernetes
	// event series (count and lastTime), instead of being stored anew.
	EventSeriesWindow time.Duration `mapstructure:"event-series-window"`

	// MaxUsers bounds the API users (default access.DefaultMaxUsers);
	// UserMaxTTL bounds a user token's lifetime (default a year), and
	// UserRequireTTL refuses users without one (config_access.go).
	MaxUsers       int           `mapstructure:"user-max"`
	UserMaxTTL     time.Duration `mapstructure:"user-max-ttl"`
	UserRequireTTL bool          `mapstructure:"user-require-ttl"`
	// AuditMaxEntries and AuditMaxAge bound the audit log (defaults
	// audit.DefaultMaxEntries, audit.DefaultMaxAge).
	AuditMaxEntries int           `mapstructure:"audit-max-entries"`
	AuditMaxAge     time.Duration `mapstructure:"audit-max-age"`

	// ManifestsDir, when set, is watched: every manifest in it is applied
	// at start and whenever a file changes.
	ManifestsDir string `mapstructure:"manifests-dir"`
	// Prune deletes daemonsets whose file was removed from ManifestsDir.
	Prune bool `mapstructure:"prune"`

	// ExternalAPI, set by an HA controller's supervisor (controller/ha),
	// makes New open no API listener and Run serve none: the caller serves
	// Handler on a listener it owns for longer than one controller's life.
	// It is no key of its own.
	ExternalAPI bool `mapstructure:"-"`
	// Replicate, set by an HA controller's supervisor, is the store's
	// store.Options.Replicate: every write is committed to etcd, fenced
	// by the leader's term, before it commits locally. It is no key of
	// its own.
	Replicate store.Replicator `mapstructure:"-"`
	// OnStoreFault, when set, is told of every store write the file
	// could not take (the store's Options.OnWrite with an error), after
	// the controller's own bookkeeping; it must not block. An HA
	// supervisor ends the term when the write had reached etcd. It is no
	// key of its own.
	OnStoreFault func(err error) `mapstructure:"-"`

	// SigningPeers, set by an HA controller's supervisor, lists the
	// online keys of the fleet's HA controllers (each controller's own,
	// registered in etcd), which the signing status shows and keys
	// delegate delegates. It is no key of its own.
	SigningPeers func(ctx context.Context) ([]api.ControllerKey, error) `mapstructure:"-"`

	// LogLevel is debug, info, warn or error; LogFormat text or json.
	LogLevel  string `mapstructure:"log-level"`
	LogFormat string `mapstructure:"log-format"`

	// Test seams, not user-facing: no key, flag or environment variable
	// sets them. Zero means the default; tests in this package shorten
	// them, each on its own controller, so they can run in parallel.
	//
	// logAnswerTimeout bounds the wait for a node's first log chunk, and,
	// when not following, for each next one.
	logAnswerTimeout time.Duration
	// logFollowLimit bounds a follow stream; agents end theirs after 10
	// minutes, so this only catches a node that vanished mid-stream.
	logFollowLimit time.Duration
	// newTransport, when set, replaces the broker (embedded or external)
	// with the transport it returns: the in-process benchmarks measure
	// the controller alone with one that only counts what is published.
	newTransport func(transportHooks) (transport, error)
	// presenceRecheck is how long after the embedded broker starts the
	// controller ends the online sessions no connection holds
	// (expireUnconnected); default defaultPresenceRecheck.
	presenceRecheck time.Duration
}

// Defaults of Config.
const (
	DefaultDataDir          = "./data"
	DefaultMQTTAddr         = "127.0.0.1:1883"
	DefaultAPIAddr          = "127.0.0.1:8080"
	DefaultNodeOfflineGrace = 40 * time.Second
	DefaultRepublishRate    = 5000
	DefaultFullPassInterval = 5 * time.Minute
	// DefaultSiteLabel names a node's site, as edge fleets label them.
	DefaultSiteLabel = ui.DefaultSiteLabel
	DefaultMaxEvents = 10000
	// Event limits per node.
	DefaultNodeEventRate     = 10
	DefaultNodeEventBurst    = 50
	DefaultEventSeriesWindow = 10 * time.Minute
	DefaultControllerUser    = "edgeset-controller"
	// DefaultBrokerDropTopic is Mosquitto's count of dropped messages.
	DefaultBrokerDropTopic      = "$SYS/broker/publish/messages/dropped"
	DefaultBrokerResyncInterval = 10 * time.Minute
	DefaultBrokerSettleInterval = 10 * time.Second
	// DefaultNATSAuthUser and DefaultNATSAuthAccount are the names
	// docs/scale-out.md's nats-server configuration uses.
	DefaultNATSAuthUser    = "edgeset-auth"
	DefaultNATSAuthAccount = "EDGESET"
	// DefaultNATSAuthUserTTL bounds how long a revoked node, admitted
	// before its revocation, stays connected to the NATS cluster.
	DefaultNATSAuthUserTTL = time.Hour
)

// Defaults of the test seams (Config.logAnswerTimeout and after).
const (
	defaultLogAnswerTimeout = 15 * time.Second
	defaultLogFollowLimit   = 11 * time.Minute
	// defaultPresenceRecheck is a keepalive and a half of the agent's
	// (mqttclient.DefaultKeepAlive): when a broker gives up on a silent
	// connection and publishes its will.
	defaultPresenceRecheck = 90 * time.Second
)

// Defaults of the API limits (Config.APIReadHeaderTimeout and after).
const (
	DefaultAPIReadHeaderTimeout       = 10 * time.Second
	DefaultAPIReadTimeout             = 30 * time.Second
	DefaultAPIWriteTimeout            = 60 * time.Second
	DefaultAPIIdleTimeout             = 120 * time.Second
	DefaultAPIMaxHeaderBytes          = 64 << 10
	DefaultAPIMaxUnauthenticatedConns = 256
	DefaultAPIMaxConnsPerSource       = 64
	DefaultAPIAuthFailureLimit        = 10
	DefaultAPIAuthFailureWindow       = time.Minute
	DefaultAPIAuthLogInterval         = time.Minute
)

// ApplyDefaults fills every unset field with its default.
func (c *Config) ApplyDefaults() {
	c.applyAccessDefaults()
	setDefault(&c.DataDir, DefaultDataDir)
	setDefault(&c.MQTTAddr, DefaultMQTTAddr)
	setDefault(&c.APIAddr, DefaultAPIAddr)
	setDefault(&c.BrokerUsername, DefaultControllerUser)
	setDefault(&c.BrokerDropTopic, DefaultBrokerDropTopic)
	if len(c.BrokerURLs) == 0 {
		c.BrokerURLs = nil // an empty list (broker-url: []) is none
	}
	if len(c.EnrollBrokerURLs) == 0 {
		c.EnrollBrokerURLs = nil
	}
	if c.BrokerResyncInterval == 0 {
		c.BrokerResyncInterval = DefaultBrokerResyncInterval
	}
	if c.BrokerSettleInterval == 0 {
		c.BrokerSettleInterval = DefaultBrokerSettleInterval
	}
	if len(c.NATSAuthURLs) == 0 {
		c.NATSAuthURLs = nil
	}
	setDefault(&c.NATSAuthUser, DefaultNATSAuthUser)
	setDefault(&c.NATSAuthAccount, DefaultNATSAuthAccount)
	if c.NATSAuthUserTTL == 0 {
		c.NATSAuthUserTTL = DefaultNATSAuthUserTTL
	}
	setDefault(&c.LogLevel, "info")
	setDefault(&c.LogFormat, "text")
	if c.NodeOfflineGrace == 0 {
		c.NodeOfflineGrace = DefaultNodeOfflineGrace
	}
	if c.SigningValidity == 0 {
		c.SigningValidity = DefaultSigningValidity
	}
	if c.RepublishRate == 0 {
		c.RepublishRate = DefaultRepublishRate
	}
	if c.FullPassInterval == 0 {
		c.FullPassInterval = DefaultFullPassInterval
	}
	if c.DesiredRepairAfter == 0 {
		c.DesiredRepairAfter = DefaultDesiredRepairAfter
	}
	setDefault(&c.SiteLabel, DefaultSiteLabel)
	if c.TelemetryHistory == 0 {
		c.TelemetryHistory = telemetry.DefaultLimit
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.MaxNodeEvents == 0 {
		c.MaxNodeEvents = max(1, c.MaxEvents/2)
	}
	if c.MaxEventsPerNode == 0 {
		c.MaxEventsPerNode = min(max(1, c.MaxEvents/10), max(1, c.MaxNodeEvents))
	}
	if c.NodeEventRate == 0 {
		c.NodeEventRate = DefaultNodeEventRate
	}
	if c.NodeEventBurst == 0 {
		c.NodeEventBurst = DefaultNodeEventBurst
	}
	if c.EventSeriesWindow == 0 {
		c.EventSeriesWindow = DefaultEventSeriesWindow
	}
	c.applyAPIDefaults()
	c.applyMQTTLimitDefaults()
	zeroDefault(&c.logAnswerTimeout, defaultLogAnswerTimeout)
	zeroDefault(&c.presenceRecheck, defaultPresenceRecheck)
	zeroDefault(&c.logFollowLimit, defaultLogFollowLimit)
}

func (c *Config) applyAPIDefaults() {
	zeroDefault(&c.APIReadHeaderTimeout, DefaultAPIReadHeaderTimeout)
	zeroDefault(&c.APIReadTimeout, DefaultAPIReadTimeout)
	zeroDefault(&c.APIWriteTimeout, DefaultAPIWriteTimeout)
	zeroDefault(&c.APIIdleTimeout, DefaultAPIIdleTimeout)
	zeroDefault(&c.APIMaxHeaderBytes, DefaultAPIMaxHeaderBytes)
	c.applyImageDefaults()
	zeroDefault(&c.APIMaxUnauthenticatedConns, DefaultAPIMaxUnauthenticatedConns)
	zeroDefault(&c.APIMaxConnsPerSource, DefaultAPIMaxConnsPerSource)
	zeroDefault(&c.APIAuthFailureLimit, DefaultAPIAuthFailureLimit)
	zeroDefault(&c.APIAuthFailureWindow, DefaultAPIAuthFailureWindow)
	zeroDefault(&c.APIAuthLogInterval, DefaultAPIAuthLogInterval)
}

// applyMQTTLimitDefaults fills the unset MQTT limits with the broker's
// defaults, so the config shows what applies.
func (c *Config) applyMQTTLimitDefaults() {
	zeroDefault(&c.MQTTConnectTimeout, broker.DefaultConnectTimeout)
	zeroDefault(&c.MQTTMaxPendingConnections, broker.DefaultMaxPendingConnections)
	zeroDefault(&c.MQTTMaxConnectionsPerSource, broker.DefaultMaxConnectionsPerSource)
	zeroDefault(&c.MQTTAuthFailureLimit, broker.DefaultAuthFailureLimit)
	zeroDefault(&c.MQTTAuthFailureWindow, broker.DefaultAuthFailureWindow)
	zeroDefault(&c.MQTTAuthFailureBackoff, broker.DefaultAuthFailureBackoff)
	if len(c.MQTTExemptSources) == 0 {
		c.MQTTExemptSources = nil
	}
}

// zeroDefault sets *p to v if *p is zero.
func zeroDefault[T int | time.Duration](p *T, v T) {
	if *p == 0 {
		*p = v
	}
}

func setDefault(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

// Validate reports every invalid key at once, each named as in the config
// file.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	checkAddr := func(key, v string) {
		if v == "" {
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(key, "%q is not HOST:PORT: %v", v, err)
		}
	}
	checkAddr("mqtt-addr", c.MQTTAddr)
	checkAddr("mqtt-tls-addr", c.MQTTTLSAddr)
	checkAddr("mqtt-ws-addr", c.MQTTWSAddr)
	checkAddr("api-addr", c.APIAddr)
	if problem := schema.LabelKeyProblem(c.SiteLabel); problem != "" {
		bad("site-label", "%s", problem)
	}
	if c.MQTTTLSAddr != "" && (c.MQTTTLSCert == "" || c.MQTTTLSKey == "") {
		bad("mqtt-tls-addr", "needs mqtt-tls-cert and mqtt-tls-key")
	}
	if c.MQTTClientCA != "" && c.MQTTTLSAddr == "" {
		bad("mqtt-client-ca", "needs mqtt-tls-addr (mutual TLS applies to the TLS listener)")
	}
	if (c.APITLSCert == "") != (c.APITLSKey == "") {
		bad("api-tls-cert", "api-tls-cert and api-tls-key go together")
	}
	c.validateBrokerURLs(bad)
	if c.SigningValidity != 0 && c.SigningValidity < minSigningValidity {
		bad("signing-validity", "%s: at least %s", c.SigningValidity, minSigningValidity)
	}
	if c.SigningTrustRoot != "" && !c.Signing {
		bad("signing-trust-root", "needs signing: true")
	}
	c.validateImages(bad)
	c.validateNATSAuth(bad)
	c.validateAccess(bad)
	if strings.ContainsAny(c.BrokerDropTopic, "+#") {
		bad("broker-drop-topic", "%q: want one topic name, without wildcards (or none)", c.BrokerDropTopic)
	}
	if c.NodeOfflineGrace < 0 {
		bad("node-offline-grace", "must not be negative, got %s", c.NodeOfflineGrace)
	}
	c.validateMQTTLimits(bad)
	if c.FullPassInterval < 0 {
		bad("full-pass-interval", "must not be negative, got %s", c.FullPassInterval)
	}
	if c.RepublishRate < 0 {
		bad("republish-rate", "must not be negative, got %d", c.RepublishRate)
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"max-events", c.MaxEvents}, {"max-node-events", c.MaxNodeEvents}, {"max-events-per-node", c.MaxEventsPerNode}, {"node-event-rate", c.NodeEventRate}, {"node-event-burst", c.NodeEventBurst}} {
		if k.v < 0 {
			bad(k.key, "must not be negative, got %d", k.v)
		}
	}
	if c.MaxNodeEvents > c.MaxEvents {
		bad("max-node-events", "must not exceed max-events (%d), got %d", c.MaxEvents, c.MaxNodeEvents)
	}
	if c.MaxEventsPerNode > c.MaxNodeEvents {
		bad("max-events-per-node", "must not exceed max-node-events (%d), got %d", c.MaxNodeEvents, c.MaxEventsPerNode)
	}
	if c.EventSeriesWindow < 0 {
		bad("event-series-window", "must not be negative, got %s", c.EventSeriesWindow)
	}
	errs = append(errs, c.validateAPILimits()...)
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		bad("log-level", "%v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", "%q: want text or json", c.LogFormat)
	}
	return errors.Join(errs...)
}

// validateAPILimits refuses negative API limits, each named by its key.
func (c *Config) validateAPILimits() []error {
	var errs []error
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"api-read-header-timeout", c.APIReadHeaderTimeout},
		{"api-read-timeout", c.APIReadTimeout},
		{"api-write-timeout", c.APIWriteTimeout},
		{"api-idle-timeout", c.APIIdleTimeout},
		{"api-auth-failure-window", c.APIAuthFailureWindow},
		{"api-auth-log-interval", c.APIAuthLogInterval},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", d.key, d.v))
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{
		{"api-max-header-bytes", c.APIMaxHeaderBytes},
		{"api-max-unauthenticated-connections", c.APIMaxUnauthenticatedConns},
		{"api-max-connections-per-source", c.APIMaxConnsPerSource},
		{"api-auth-failure-limit", c.APIAuthFailureLimit},
	} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %d", n.key, n.v))
		}
	}
	return errs
}

// APILimits are the API server's limits from the configuration.
func (c *Config) APILimits() api.Limits {
	return api.Limits{
		ReadHeaderTimeout:       c.APIReadHeaderTimeout,
		ReadTimeout:             c.APIReadTimeout,
		WriteTimeout:            c.APIWriteTimeout,
		IdleTimeout:             c.APIIdleTimeout,
		MaxHeaderBytes:          c.APIMaxHeaderBytes,
		MaxUnauthenticatedConns: c.APIMaxUnauthenticatedConns,
		MaxConnsPerSource:       c.APIMaxConnsPerSource,
		AuthFailures:            c.APIAuthFailureLimit,
		AuthFailureWindow:       c.APIAuthFailureWindow,
		AuthLogInterval:         c.APIAuthLogInterval,
	}
}

// validateMQTTLimits reports negative MQTT limits and exempt sources that
// are neither an IP address nor a CIDR prefix.
func (c *Config) validateMQTTLimits(bad func(key, format string, args ...any)) {
	for key, v := range map[string]int64{
		"mqtt-connect-timeout":            int64(c.MQTTConnectTimeout),
		"mqtt-max-pending-connections":    int64(c.MQTTMaxPendingConnections),
		"mqtt-max-connections-per-source": int64(c.MQTTMaxConnectionsPerSource),
		"mqtt-auth-failure-limit":         int64(c.MQTTAuthFailureLimit),
		"mqtt-auth-failure-window":        int64(c.MQTTAuthFailureWindow),
		"mqtt-auth-failure-backoff":       int64(c.MQTTAuthFailureBackoff),
	} {
		if v < 0 {
			bad(key, "must not be negative")
		}
	}
	if _, err := parseSources(c.MQTTExemptSources); err != nil {
		bad("mqtt-exempt-sources", "%v", err)
	}
}

// parseSources parses IP addresses (as /32 or /128) and CIDR prefixes.
func parseSources(entries []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix such as 10.0.0.0/8", e)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// brokerLimits are the embedded broker's connection limits; Validate has
// checked them.
func (c *Config) brokerLimits() broker.Limits {
	exempt, _ := parseSources(c.MQTTExemptSources)
	return broker.Limits{
		ConnectTimeout:          c.MQTTConnectTimeout,
		MaxPendingConnections:   c.MQTTMaxPendingConnections,
		MaxConnectionsPerSource: c.MQTTMaxConnectionsPerSource,
		AuthFailureLimit:        c.MQTTAuthFailureLimit,
		AuthFailureWindow:       c.MQTTAuthFailureWindow,
		AuthFailureBackoff:      c.MQTTAuthFailureBackoff,
		ExemptSources:           exempt,
	}
}

// dropTopic is the external broker's drop counter topic, or "" when off.
func (c *Config) dropTopic() string {
	if c.BrokerDropTopic == "none" {
		return ""
	}
	return c.BrokerDropTopic
}

// Embedded reports whether the controller runs its own broker.
func (c *Config) Embedded() bool { return len(c.brokerURLs()) == 0 }

// brokerURLs returns the external broker's URLs, trimmed of spaces:
// BrokerURLs, or BrokerURL as a list of one; none for the embedded broker.
func (c *Config) brokerURLs() []string {
	if c.BrokerURL != "" && len(c.BrokerURLs) == 0 {
		return []string{strings.TrimSpace(c.BrokerURL)}
	}
	out := make([]string, 0, len(c.BrokerURLs))
	for _, u := range c.BrokerURLs {
		out = append(out, strings.TrimSpace(u))
	}
	return out
}

// validateBrokerURLs checks broker-url and enroll-broker-url: each entry
// a URL with a host, named by its index in a list, and not too many.
func (c *Config) validateBrokerURLs(bad func(key, format string, args ...any)) {
	if c.BrokerURL != "" && len(c.BrokerURLs) > 0 {
		bad("broker-url", "BrokerURL and BrokerURLs both set; set one")
	}
	checkURLs("broker-url", c.brokerURLs(), bad)
	checkURLs("enroll-broker-url", c.EnrollBrokerURLs, bad)
}

func checkURLs(name string, urls []string, bad func(key, format string, args ...any)) {
	if len(urls) > mqttclient.MaxBrokerURLs {
		bad(name, "%d URLs, at most %d", len(urls), mqttclient.MaxBrokerURLs)
		return
	}
	for i, raw := range urls {
		key := name
		if len(urls) > 1 {
			key = fmt.Sprintf("%s[%d]", name, i)
		}
		if u, err := url.Parse(strings.TrimSpace(raw)); err != nil || u.Host == "" {
			bad(key, "%q is not a URL such as tcp://host:1883", raw)
		}
	}
}

// Paths of the files the controller keeps in DataDir.
func (c *Config) storePath() string { return filepath.Join(c.DataDir, "edgeset.db") }
func (c *Config) tokenPath() string { return filepath.Join(c.DataDir, "admin.token") }

// TokenPath is where the API token is written on first start.
func (c *Config) TokenPath() string { return c.tokenPath() }

// StorePath is the controller's store file.
func (c *Config) StorePath() string { return c.storePath() }

// ParseLogLevel maps debug, info, warn and error to slog levels.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q: want debug, info, warn or error", s)
	}
	return l, nil
}

// validateNATSAuth checks the nats-auth keys: all or none, and only with
// an external broker (the cluster's MQTT listeners).
func (c *Config) validateNATSAuth(bad func(key, format string, args ...any)) {
	if len(c.NATSAuthURLs) == 0 {
		return
	}
	if c.Embedded() {
		bad("nats-auth-url", "needs broker-url: the devices connect to the NATS cluster's MQTT listeners, not the embedded broker")
	}
	for i, raw := range c.NATSAuthURLs {
		if u, err := url.Parse(raw); err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls") {
			bad(fmt.Sprintf("nats-auth-url[%d]", i), "%q is not a NATS URL such as nats://host:4222", raw)
		}
	}
	for _, k := range []struct{ key, v string }{
		{"nats-auth-user", c.NATSAuthUser}, {"nats-auth-password-file", c.NATSAuthPasswordFile},
		{"nats-auth-issuer-seed-file", c.NATSAuthIssuerSeedFile}, {"nats-auth-account", c.NATSAuthAccount},
	} {
		if k.v == "" {
			bad(k.key, "required with nats-auth-url")
		}
	}
}
