// Package natstest runs a NATS server cluster for tests, each member a
// nats-server process built from the module the project requires (so that
// a test binary built with -race instruments edgeset's code and not the
// server's): JetStream (stores in t.TempDir()), an MQTT listener per
// server, routes between every pair of servers, and the auth callout
// configured for an account key it generates, so a
// broker/natsauth.Responder can admit edgeset clients. Its configuration
// is the one docs/scale-out.md describes. The members' state is read
// through their HTTP monitoring endpoints.
package natstest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
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

// AuthCalloutSubject is where the servers send authorization requests.
const AuthCalloutSubject = "$SYS.REQ.USER.AUTH"

// randomSuffix returns a few random characters.
func randomSuffix(t testing.TB) string {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatalf("random: %v", err)
	}
	pub, _ := kp.PublicKey()
	return pub[len(pub)-12:]
}
