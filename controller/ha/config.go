package ha

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/leader"
)

// Stores a controller can keep its state in (Config.Store).
const (
	StoreBolt = "bbolt" // the single-node default: the data directory's file
	StoreEtcd = "etcd"  // shared by two or three HA controllers
)

// Limits of the HA configuration.
const (
	// MaxEtcdEndpoints bounds etcd-endpoints.
	MaxEtcdEndpoints = 16
	// maxIDLen bounds controller-id (it travels in every answer's header
	// and in the leader key).
	maxIDLen = 253
	// minLeaseTTL is the shortest leader-lease-ttl: etcd's own minimum
	// with its default election timeout is about 1.5 s.
	minLeaseTTL = time.Second
	// dialTimeout bounds the etcd client's first connection.
	dialTimeout = 5 * time.Second
)

// Config is the HA part of edgeset-controller's configuration: keys of
// configs/controller.yaml, flags and EDGESET_ variables like the
// controller's own (cmd/edgeset-controller).
type Config struct {
	// Store is bbolt (default) or etcd.
	Store string `mapstructure:"store"`
	// EtcdEndpoints are the etcd cluster's client URLs (store etcd).
	EtcdEndpoints []string `mapstructure:"etcd-endpoints"`
	// EtcdPrefix is the fleet's key prefix in etcd; DefaultPrefix.
	EtcdPrefix string `mapstructure:"etcd-prefix"`
	// EtcdCACert verifies the etcd servers' certificates; EtcdCert and
	// EtcdKey are this controller's client certificate.
	EtcdCACert string `mapstructure:"etcd-cacert"`
	EtcdCert   string `mapstructure:"etcd-cert"`
	EtcdKey    string `mapstructure:"etcd-key"`
	// ControllerID names this controller; the host name by default.
	ControllerID string `mapstructure:"controller-id"`
	// AdvertiseURL is where the other controllers forward requests while
	// this one leads; by default http(s):// and api-addr, unless api-addr
	// listens on every address.
	AdvertiseURL string `mapstructure:"advertise-url"`
	// LeaderLeaseTTL is the leader lease's TTL: how long a dead leader
	// keeps the standbys from taking over; leader.DefaultTTL.
	LeaderLeaseTTL time.Duration `mapstructure:"leader-lease-ttl"`
}

// Enabled reports whether the controller runs as an HA controller on etcd.
func (c *Config) Enabled() bool { return c.Store == StoreEtcd }

// ApplyDefaults fills the unset keys; ctl is the controller's
// configuration, defaults applied, which the advertised URL derives from.
func (c *Config) ApplyDefaults(ctl controller.Config) {
	if c.Store == "" {
		c.Store = StoreBolt
	}
	if c.EtcdPrefix == "" {
		c.EtcdPrefix = DefaultPrefix
	}
	c.EtcdPrefix = strings.TrimRight(c.EtcdPrefix, "/")
	if len(c.EtcdEndpoints) == 0 {
		c.EtcdEndpoints = nil
	}
	if c.ControllerID == "" && c.Enabled() {
		c.ControllerID, _ = os.Hostname()
	}
	if c.LeaderLeaseTTL == 0 {
		c.LeaderLeaseTTL = leader.DefaultTTL
	}
	if c.AdvertiseURL == "" && c.Enabled() {
		c.AdvertiseURL = advertised(ctl)
	}
}

// advertised is the URL of ctl's API listener, or "" when it listens on
// every address (no one address to give the others).
func advertised(ctl controller.Config) string {
	host, _, err := net.SplitHostPort(ctl.APIAddr)
	if err != nil || host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return ""
	}
	if ctl.APITLSCert != "" {
		return "https://" + ctl.APIAddr
	}
	return "http://" + ctl.APIAddr
}

// Validate reports every invalid key at once, each named as in the
// config file; ctl is the controller's configuration, defaults applied.
func (c *Config) Validate(ctl controller.Config) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	switch c.Store {
	case StoreBolt:
		c.validateUnused(bad)
		return errors.Join(errs...)
	case StoreEtcd:
	default:
		bad("store", "%q: want %s or %s", c.Store, StoreBolt, StoreEtcd)
		return errors.Join(errs...)
	}
	if ctl.Embedded() {
		bad("broker-url", "required with store etcd: every controller connects to one external broker (or broker cluster), so the embedded broker cannot be used")
	}
	c.validateEndpoints(bad)
	if !strings.HasPrefix(c.EtcdPrefix, "/") {
		bad("etcd-prefix", "%q: want a key prefix starting with /, such as %s", c.EtcdPrefix, DefaultPrefix)
	}
	switch {
	case c.ControllerID == "":
		bad("controller-id", "required (the host name is unknown)")
	case len(c.ControllerID) > maxIDLen || strings.ContainsAny(c.ControllerID, " \t\r\n/"):
		bad("controller-id", "%q: want at most %d characters, no spaces or /", c.ControllerID, maxIDLen)
	}
	c.validateAdvertise(ctl, bad)
	if c.LeaderLeaseTTL < minLeaseTTL {
		bad("leader-lease-ttl", "must be at least %s, got %s", minLeaseTTL, c.LeaderLeaseTTL)
	}
	if (c.EtcdCert == "") != (c.EtcdKey == "") {
		bad("etcd-cert", "etcd-cert and etcd-key go together")
	}
	return errors.Join(errs...)
}

// validateUnused refuses etcd keys set with store bbolt, which would be
// ignored.
func (c *Config) validateUnused(bad func(key, format string, args ...any)) {
	for _, k := range []struct {
		key string
		set bool
	}{
		{"etcd-endpoints", len(c.EtcdEndpoints) > 0}, {"advertise-url", c.AdvertiseURL != ""},
		{"etcd-cacert", c.EtcdCACert != ""}, {"etcd-cert", c.EtcdCert != ""}, {"etcd-key", c.EtcdKey != ""},
	} {
		if k.set {
			bad(k.key, "set, but store is %s: it applies only with store %s", StoreBolt, StoreEtcd)
		}
	}
}

func (c *Config) validateEndpoints(bad func(key, format string, args ...any)) {
	if len(c.EtcdEndpoints) == 0 {
		bad("etcd-endpoints", "required with store etcd (http://host:2379,...)")
		return
	}
	if len(c.EtcdEndpoints) > MaxEtcdEndpoints {
		bad("etcd-endpoints", "%d endpoints, at most %d", len(c.EtcdEndpoints), MaxEtcdEndpoints)
		return
	}
	for i, e := range c.EtcdEndpoints {
		if u, err := url.Parse(strings.TrimSpace(e)); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			bad(fmt.Sprintf("etcd-endpoints[%d]", i), "%q is not a URL such as http://host:2379", e)
		}
	}
}

func (c *Config) validateAdvertise(ctl controller.Config, bad func(key, format string, args ...any)) {
	if c.AdvertiseURL == "" {
		bad("advertise-url", "required: api-addr %s listens on every address, so give the URL the other controllers reach this one's API at", ctl.APIAddr)
		return
	}
	u, err := url.Parse(c.AdvertiseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		bad("advertise-url", "%q is not a URL such as http://controller-1:8080", c.AdvertiseURL)
	}
}

// NewClient returns a client of the configured etcd cluster. It dials
// lazily: an unreachable cluster is retried by the supervisor.
func (c *Config) NewClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   c.EtcdEndpoints,
		DialTimeout: dialTimeout,
		// Find a dead etcd member or a cut link within seconds, not the
		// two hours of TCP's keepalive.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	}
	if c.EtcdCACert != "" || c.EtcdCert != "" || c.anyHTTPS() {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s (etcd-endpoints): %w", strings.Join(c.EtcdEndpoints, ","), err)
	}
	return cli, nil
}

// anyHTTPS reports whether an endpoint is https: TLS with the system's
// roots unless etcd-cacert says otherwise.
func (c *Config) anyHTTPS() bool {
	for _, e := range c.EtcdEndpoints {
		if strings.HasPrefix(strings.TrimSpace(e), "https://") {
			return true
		}
	}
	return false
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.EtcdCACert != "" {
		pem, err := os.ReadFile(c.EtcdCACert)
		if err != nil {
			return nil, fmt.Errorf("etcd-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd-cacert: %s holds no PEM certificate", c.EtcdCACert)
		}
		tc.RootCAs = pool
	}
	if c.EtcdCert != "" {
		cert, err := tls.LoadX509KeyPair(c.EtcdCert, c.EtcdKey)
		if err != nil {
			return nil, fmt.Errorf("etcd-cert and etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
