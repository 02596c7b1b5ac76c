package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/natstest"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// envCluster gates the broker-cluster scenario: it builds nats-server and
// runs three of them as processes (make test-cluster).
const envCluster = "EDGESET_TEST_CLUSTER"

// natsBinary is the nats-server built once per test binary from the
// module the project requires (no registry, no Debian package: Debian's
// 2.9 is too old).
var natsBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "edgeset-nats-")
	if err != nil {
		return "", err
	}
	natsBinaryDir.Store(&dir)
	bin := filepath.Join(dir, "nats-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build nats-server: %v\n%s", err, out)
	}
	return bin, nil
})

// natsBinaryDir is where natsBinary built it, removed when the tests end.
var natsBinaryDir atomic.Pointer[string]

// removeNATSBinary removes what natsBinary built, if anything.
func removeNATSBinary() {
	if dir := natsBinaryDir.Load(); dir != nil {
		_ = os.RemoveAll(*dir)
	}
}

// natsProc is one nats-server process on fixed ports and a fixed store,
// so it can be killed with SIGKILL and started again as the same member.
type natsProc struct {
	t       *testing.T
	bin     string
	conf    string
	monitor int
	mqtt    int

	mu  sync.Mutex // guards cmd
	cmd *exec.Cmd
}

// natsProcs is a cluster of nats-server processes with the auth callout
// configured for Issuer (its responder is the controller: nats-auth-url).
type natsProcs struct {
	procs        []*natsProc
	clients      []string // nats:// URLs
	issuer       nkeys.KeyPair
	authPassword string
}

// startNATSProcs starts a cluster of n nats-server processes and waits
// until every member reports JetStream healthy.
func startNATSProcs(t *testing.T, n int) *natsProcs {
	bin, err := natsBinary()
	require.NoError(t, err)
	issuer, err := nkeys.CreateAccount()
	require.NoError(t, err)
	pub, err := issuer.PublicKey()
	require.NoError(t, err)
	ports := natstest.FreePorts(t, 4*n) // route, client, MQTT, monitor per member
	routes := ports[:n]
	c := &natsProcs{issuer: issuer, authPassword: "auth-" + pub[len(pub)-10:]}
	for i := range n {
		dir := t.TempDir()
		sc := natstest.ServerConfig{Name: fmt.Sprintf("s%d", i), StoreDir: filepath.Join(dir, "jetstream"),
			ClientPort: ports[n+i], MQTTPort: ports[2*n+i], MonitorPort: ports[3*n+i],
			RoutePort: routes[i], RoutePorts: routes, Issuer: pub, AuthPassword: c.authPassword}
		conf := filepath.Join(dir, "nats.conf")
		require.NoError(t, os.WriteFile(conf, []byte(natstest.Config(sc)), 0o600))
		p := &natsProc{t: t, bin: bin, conf: conf, monitor: sc.MonitorPort, mqtt: sc.MQTTPort}
		p.start()
		t.Cleanup(p.kill)
		c.procs = append(c.procs, p)
		c.clients = append(c.clients, fmt.Sprintf("nats://127.0.0.1:%d", sc.ClientPort))
	}
	for _, p := range c.procs {
		p.waitHealthy()
	}
	return c
}

// mqttURLs are the members' MQTT listeners.
func (c *natsProcs) mqttURLs() []string {
	urls := make([]string, len(c.procs))
	for i, p := range c.procs {
		urls[i] = fmt.Sprintf("tcp://127.0.0.1:%d", p.mqtt)
	}
	return urls
}

func (p *natsProc) start() {
	p.t.Helper()
	cmd := exec.Command(p.bin, "-c", p.conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Getenv(envLog) != "" {
		cmd.Stderr = os.Stderr
	}
	require.NoError(p.t, cmd.Start())
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
}

// kill sends SIGKILL and reaps the process; safe to call twice.
func (p *natsProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// waitHealthy waits until the member's /healthz says its JetStream is
// current with the cluster.
func (p *natsProc) waitHealthy() {
	p.t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", p.monitor)
	checkfor.Eventually(p.t, time.Minute, 100*time.Millisecond, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}

// startControllerOnNATS runs the controller subprocess against the
// cluster's MQTT listeners, serving its auth callout (nats-auth-url).
func startControllerOnNATS(t *testing.T, grace time.Duration, c *natsProcs) *controllerProc {
	dir := t.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	seed, err := c.issuer.Seed()
	require.NoError(t, err)
	files := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(files, name)
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o600))
		return path
	}
	p := &controllerProc{t: t, dir: dir, mqttAddr: freeAddr(t), apiAddr: freeAddr(t), grace: grace, secret: secret,
		extBrokerURL: strings.Join(c.mqttURLs(), ","),
		natsAuth: natsAuthEnv{urls: strings.Join(c.clients, ","), passwordFile: write("auth.password", c.authPassword),
			seedFile: write("issuer.seed", string(seed))}}
	p.start()
	t.Cleanup(p.kill)
	return p
}

// TestNATSServerKilledDuringRollout: the controller and the agents use a
// cluster of three nats-server processes, the agents with all three URLs.
// During a rolling update (maxUnavailable 20%) one member is killed with
// SIGKILL and restarted on its store, then the controller is killed with
// SIGKILL and restarted. The invariants hold throughout (one instance per
// daemonset per device, the budget), the fleet converges to the new
// revision, and it does so within the bound the harness gives a
// convergence. Run by make test-cluster (EDGESET_TEST_CLUSTER=1;
// EDGESET_FAULT_NODES agents, 1,000 there).
func TestNATSServerKilledDuringRollout(t *testing.T) {
	if os.Getenv(envCluster) != "1" {
		t.Skip("a broker-cluster scenario (builds nats-server, three processes): make test-cluster, or " + envCluster + "=1")
	}
	n := fleetSize(t)
	cluster := startNATSProcs(t, 3)
	ctl := startControllerOnNATS(t, grace, cluster)
	start := time.Now()
	f := startFleet(t, ctl, n, agentOptions{startLatency: 300 * time.Millisecond, subscribeAtMostOnce: true})
	t.Logf("%d agents online in %s; JetStream consumers: %s", n, time.Since(start).Round(time.Millisecond), cluster.consumers())
	ctl.apply(manifest("exporter:1", "20%", "0", ""))
	ds := f.converged(func(ds api.DaemonSet) string { return ds.CurrentHash })
	s := &scenario{t: t, ctl: ctl, f: f, v1: ds.CurrentHash, chk: startChecker(t, f)}
	s.chk.forward(s.v1)

	v2 := s.rollTo(manifest("exporter:2", "20%", "0", ""), percent(20, n), false)
	logRollout := func(what string) {
		if ds, err := ctl.daemonSet(); err == nil && ds.Status.Rollout != nil {
			r := ds.Status.Rollout
			t.Logf("%s: %d of %d updated, %d updating, complete %v", what, r.Updated, r.Total, r.Updating, r.Complete)
		}
	}
	time.Sleep(600 * time.Millisecond)
	logRollout("killing broker member s1")
	cluster.procs[1].kill()
	time.Sleep(2 * time.Second)
	cluster.procs[1].start()
	logRollout("broker member s1 restarted")
	time.Sleep(time.Second)
	logRollout("killing the controller")
	ctl.kill()
	ctl.start()
	logRollout("controller restarted")
	ds, err := ctl.daemonSet()
	require.NoError(t, err)
	assert.Equal(t, v2, ds.CurrentHash, "the revision survives a broker member's and the controller's SIGKILL")
	s.f.converged(is(v2))
	t.Logf("JetStream consumers at the end: %s; %s in all", cluster.consumers(), time.Since(start).Round(time.Millisecond))
}

// consumers is the number of JetStream consumers each member reports
// (/jsz), for the log: agents subscribed at QoS 0 make none.
func (c *natsProcs) consumers() string {
	var out []string
	for i, p := range c.procs {
		var jsz struct {
			Consumers int `json:"consumers"`
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", p.monitor))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&jsz)
			resp.Body.Close()
		}
		if err != nil {
			out = append(out, fmt.Sprintf("s%d: %v", i, err))
			continue
		}
		out = append(out, fmt.Sprintf("s%d: %d", i, jsz.Consumers))
	}
	return strings.Join(out, ", ")
}

// TestNATSLateWillOfUnseenSession: a will of a session the controller
// never saw online arrives after the node's online message, as a cluster
// member delivers the will of a connection that died before announcing
// itself (it stores the retained will first, waiting out its JetStream API
// timeout while the stream has no leader). The controller takes it for
// the newest session and lists the connected node offline; the agent's
// second announcement, broker-settle-interval after it connected, brings
// the node back online without a reconnection, and a controller started
// afterwards reads it online from the retained presence. Run by make
// test-cluster.
func TestNATSLateWillOfUnseenSession(t *testing.T) {
	if os.Getenv(envCluster) != "1" {
		t.Skip("a broker-cluster scenario (builds nats-server, three processes): make test-cluster, or " + envCluster + "=1")
	}
	cluster := startNATSProcs(t, 3)
	ctl := startControllerOnNATS(t, grace, cluster)
	const settle = 8 * time.Second
	f := startFleet(t, ctl, 3, agentOptions{subscribeAtMostOnce: true, settle: settle})
	a := f.agents[0]
	connects := a.node.Client().Stats().Connects

	// The late will: offline, retained, of a session the agent never had,
	// published through a member the agent may not be connected to.
	late, err := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: a.name, Online: false, Session: 1})
	require.NoError(t, err)
	publishAs(t, cluster.mqttURLs()[0], credential.ControllerUsername, credential.ControllerToken(ctl.secret),
		schema.NodeTopic(a.name, schema.TopicOnline), late)
	checkfor.Eventually(t, settle, 20*time.Millisecond, func() error {
		return f.nodeOnline(a.name, false)
	})
	checkfor.Eventually(t, 2*settle, 100*time.Millisecond, func() error {
		return f.nodeOnline(a.name, true)
	})
	require.Equal(t, connects, a.node.Client().Stats().Connects, "back online on the same connection")

	ctl.kill()
	ctl.start()
	f.waitOnline()
}

// nodeOnline reports an error unless the controller lists node with the
// given online state.
func (f *fleet) nodeOnline(node string, online bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := f.ctl.api.GetNode(ctx, node)
	if err != nil {
		return err
	}
	if n.Online != online {
		return fmt.Errorf("node %s online %v, want %v", node, n.Online, online)
	}
	return nil
}

// publishAs publishes one retained message through the broker at url as
// user, and disconnects.
func publishAs(t *testing.T, url, user, password, topic string, payload []byte) {
	t.Helper()
	connected := make(chan struct{}, 1)
	c, err := mqttclient.New(mqttclient.Options{BrokerURL: url, ClientID: "late-will", Username: user, Password: password,
		FirstConnectJitter: -1, Logger: slog.New(slog.DiscardHandler),
		OnConnect: func(context.Context) {
			select {
			case connected <- struct{}{}:
			default:
			}
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatalf("no connection to %s", url)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	require.NoError(t, c.Publish(pctx, topic, payload, true))
}
