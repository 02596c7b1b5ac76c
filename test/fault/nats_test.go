package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// startNATSProcs starts a cluster of n nats-server processes (built once
// per test binary from the module the project requires: no registry, no
// Debian package, Debian's 2.9 being too old), with the auth callout
// configured for its issuer, once every member reports JetStream healthy.
func startNATSProcs(t *testing.T, n int) *natstest.Procs {
	return natstest.StartCluster(t, n)
}

// writeFiles writes each name's content (plus a newline, mode 0600) into
// a new directory and returns their paths by name.
func writeFiles(t *testing.T, contents map[string]string) map[string]string {
	dir := t.TempDir()
	paths := map[string]string{}
	for name, content := range contents {
		paths[name] = filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(paths[name], []byte(content+"\n"), 0o600))
	}
	return paths
}

// calloutFiles writes the callout user's password and the issuer's seed of
// c for a controller (nats-auth-password-file, nats-auth-issuer-seed-file).
func calloutFiles(t *testing.T, c *natstest.Procs) (passwordFile, seedFile string) {
	seed, err := c.Issuer.Seed()
	require.NoError(t, err)
	files := writeFiles(t, map[string]string{"auth.password": c.AuthPassword, "issuer.seed": string(seed)})
	return files["auth.password"], files["issuer.seed"]
}

// startControllerOnNATS runs the controller subprocess against the
// cluster's MQTT listeners, serving its auth callout (nats-auth-url).
func startControllerOnNATS(t *testing.T, grace time.Duration, c *natstest.Procs) *controllerProc {
	dir := t.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	pw, seed := calloutFiles(t, c)
	p := &controllerProc{t: t, dir: dir, mqttAddr: freeAddr(t), apiAddr: freeAddr(t), grace: grace, secret: secret,
		extBrokerURL: strings.Join(c.MQTTURLs(), ","),
		natsAuth:     natsAuthEnv{urls: strings.Join(c.Clients, ","), passwordFile: pw, seedFile: seed}}
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
	f := startFleet(t, ctl, n, natsAgents(agentOptions{startLatency: 300 * time.Millisecond}))
	t.Logf("%d agents online in %s; JetStream consumers: %s", n, time.Since(start).Round(time.Millisecond), consumers(cluster))
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
	cluster.Procs[1].Kill()
	time.Sleep(2 * time.Second)
	cluster.Procs[1].Start()
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
	t.Logf("JetStream consumers at the end: %s; %s in all", consumers(cluster), time.Since(start).Round(time.Millisecond))
}

// natsAgents are o with the agent settings docs/scale-out.md gives for a
// NATS cluster: subscriptions and publishes at QoS 0.
func natsAgents(o agentOptions) agentOptions {
	o.subscribeAtMostOnce, o.publishAtMostOnce = true, true
	return o
}

// consumers is the number of JetStream consumers each member reports
// (/jsz), for the log: agents subscribed at QoS 0 make none.
func consumers(c *natstest.Procs) string {
	var out []string
	for i, p := range c.Procs {
		var jsz struct {
			Consumers int `json:"consumers"`
		}
		resp, err := http.Get(p.Monitor("/jsz"))
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
	f := startFleet(t, ctl, 3, natsAgents(agentOptions{settle: settle}))
	a := f.agents[0]
	connects := a.node.Client().Stats().Connects

	// The late will: offline, retained, of a session the agent never had,
	// published through a member the agent may not be connected to.
	late, err := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: a.name, Online: false, Session: 1})
	require.NoError(t, err)
	publishAs(t, cluster.MQTTURLs()[0], credential.ControllerUsername, credential.ControllerToken(ctl.secret),
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
