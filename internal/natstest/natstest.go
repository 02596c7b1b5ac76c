// Package natstest starts an in-process NATS server cluster for tests:
// JetStream (stores in t.TempDir()), an MQTT listener per server, routes
// between every pair of servers, and the auth callout configured for an
// account key it generates, so a broker/natsauth.Responder can admit
// edgeset clients. Its configuration is the one docs/scale-out.md
// describes.
package natstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// Names of the cluster's accounts and of the callout's auth user.
const (
	// Account holds every admitted MQTT client, with JetStream.
	Account = "EDGESET"
	// AuthAccount holds the auth callout responder.
	AuthAccount = "AUTH"
	// AuthUser is the responder's user; it bypasses the callout.
	AuthUser = "edgeset-auth"
)

// Cluster is a running cluster; every server is shut down (and joined)
// when the test ends.
type Cluster struct {
	Servers []*server.Server
	// Issuer is the auth_callout issuer's account key pair, to sign the
	// responder's answers with.
	Issuer nkeys.KeyPair
	// AuthPassword is AuthUser's password.
	AuthPassword string

	opts []*server.Options
}

// startTimeout bounds the cluster's start and its JetStream meta leader
// election.
const startTimeout = 30 * time.Second

// Start starts a cluster of size servers (3 if size is 0) and waits until
// every server accepts clients and JetStream has a meta leader. Set
// EDGESET_NATS_LOG=1 to see the servers' logs.
func Start(t testing.TB, size int) *Cluster {
	t.Helper()
	if size <= 0 {
		size = 3
	}
	issuer, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatalf("create issuer key: %v", err)
	}
	c := &Cluster{Issuer: issuer, AuthPassword: "auth-" + randomSuffix(t)}
	routePorts := FreePorts(t, size)
	for i := range size {
		c.start(t, i, routePorts)
	}
	checkfor.Eventually(t, startTimeout, 50*time.Millisecond, c.jetStreamReady)
	return c
}

// start starts server i of the cluster.
func (c *Cluster) start(t testing.TB, i int, routePorts []int) {
	t.Helper()
	pub, _ := c.Issuer.PublicKey()
	dir := t.TempDir()
	conf := Config(ServerConfig{Name: fmt.Sprintf("s%d", i), StoreDir: filepath.Join(dir, "jetstream"),
		RoutePort: routePorts[i], RoutePorts: routePorts, Issuer: pub, AuthPassword: c.AuthPassword})
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats config %s: %v", path, err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server s%d: %v", i, err)
	}
	if os.Getenv("EDGESET_NATS_LOG") != "" {
		s.ConfigureLogger()
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	s.Start()
	if !s.ReadyForConnections(startTimeout) {
		t.Fatalf("nats server s%d not ready within %s", i, startTimeout)
	}
	c.Servers = append(c.Servers, s)
	c.opts = append(c.opts, opts)
}

// ServerConfig describes one server of a cluster.
type ServerConfig struct {
	Name     string
	StoreDir string // JetStream's
	// ClientPort, MQTTPort and MonitorPort are the NATS client, MQTT and
	// HTTP monitoring listeners: 0 lets the system choose (no monitoring
	// listener at all for MonitorPort 0). A server restarted on the same
	// store needs fixed ones.
	ClientPort, MQTTPort, MonitorPort int
	// ProfPort, when not 0, serves the server's Go profiles
	// (/debug/pprof/) on loopback.
	ProfPort int
	// RoutePort is this server's cluster listener, RoutePorts every
	// server's (its own included).
	RoutePort  int
	RoutePorts []int
	// Issuer is the auth callout issuer's public account key,
	// AuthPassword the auth user's password.
	Issuer, AuthPassword string
}

// Config is the configuration file of one server: JetStream, the cluster
// routes, an MQTT listener, the accounts and the auth callout, as
// docs/scale-out.md describes them.
func Config(sc ServerConfig) string {
	routes := make([]string, 0, len(sc.RoutePorts))
	for _, p := range sc.RoutePorts {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	monitor := ""
	if sc.MonitorPort != 0 {
		monitor = fmt.Sprintf("http: 127.0.0.1:%d\n", sc.MonitorPort)
	}
	if sc.ProfPort != 0 {
		monitor += fmt.Sprintf("prof_port: %d\n", sc.ProfPort)
	}
	return fmt.Sprintf(`server_name: %[1]s
listen: 127.0.0.1:%[10]s
%[12]sjetstream {
  store_dir: %[2]q
  max_memory_store: 64MB
  max_file_store: 10GB
}
cluster {
  name: edgeset
  listen: 127.0.0.1:%[3]d
  routes: [%[4]s]
}
mqtt {
  listen: 127.0.0.1:%[11]s
}
accounts {
  %[5]s { users: [ { user: %[6]s, password: %[7]q } ] }
  %[8]s { jetstream: enabled }
  SYS {}
}
system_account: SYS
authorization {
  timeout: 5
  auth_callout {
    issuer: %[9]s
    account: %[5]s
    auth_users: [ %[6]s ]
  }
}
`, sc.Name, sc.StoreDir, sc.RoutePort, strings.Join(routes, ", "), AuthAccount, AuthUser, sc.AuthPassword, Account, sc.Issuer,
		port(sc.ClientPort), port(sc.MQTTPort), monitor)
}

// port is a listener's port in a configuration: -1 lets the system choose.
func port(p int) string {
	if p == 0 {
		return "-1"
	}
	return strconv.Itoa(p)
}

// FreePorts returns n TCP ports free on loopback a moment ago: routes
// must be known before the servers start.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	return ports
}

// jetStreamReady reports an error until a meta leader is elected and every
// server is current with it.
func (c *Cluster) jetStreamReady() error {
	leader := false
	for _, s := range c.Servers {
		if !s.JetStreamIsCurrent() {
			return fmt.Errorf("jetstream of %s is not current", s.Name())
		}
		leader = leader || s.JetStreamIsLeader()
	}
	if !leader {
		return fmt.Errorf("jetstream has no meta leader")
	}
	return nil
}

// AuthCalloutSubject is where the servers send authorization requests.
const AuthCalloutSubject = "$SYS.REQ.USER.AUTH"

// WaitForResponder waits until every server knows of a subscriber to the
// auth callout subject: a responder subscribed on one server is known to
// the others only once its interest has crossed the routes, and until
// then their clients are refused at the auth timeout.
func (c *Cluster) WaitForResponder(t testing.TB) {
	t.Helper()
	checkfor.Eventually(t, startTimeout, 10*time.Millisecond, func() error {
		for _, s := range c.Servers {
			acc, err := s.LookupAccount(AuthAccount)
			if err != nil {
				return fmt.Errorf("%s: account %s: %w", s.Name(), AuthAccount, err)
			}
			if !acc.SubscriptionInterest(AuthCalloutSubject) {
				return fmt.Errorf("%s has no subscriber to %s yet", s.Name(), AuthCalloutSubject)
			}
		}
		return nil
	})
}

// MQTTURLs returns the MQTT listener of every server, as tcp://host:port.
func (c *Cluster) MQTTURLs() []string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("tcp://%s:%d", o.MQTT.Host, o.MQTT.Port)
	}
	return urls
}

// ClientURLs returns the NATS client URL of every server, joined by
// commas as nats.Connect takes them.
func (c *Cluster) ClientURLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// randomSuffix returns a few random characters.
func randomSuffix(t testing.TB) string {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatalf("random: %v", err)
	}
	pub, _ := kp.PublicKey()
	return pub[len(pub)-12:]
}
