package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/etcdtest"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// runningImages returns the images rt runs.
func runningImages(rt *fake.Runtime) []string {
	var out []string
	for _, c := range rt.Containers() {
		if c.Running {
			out = append(out, c.Image)
		}
	}
	return out
}

// TestHASigningFailover: two HA controllers on etcd with signing on, each
// with its own online key. One keys delegate (through the standby) signs
// a key set delegating both; an agent pinning the fleet root runs what
// the leader signed. The leader stops; the standby takes over, and the
// agent applies the desired states it signs (a new image), while an
// unsigned desired state published with the controller's MQTT credential
// is refused and changes nothing.
func TestHASigningFailover(t *testing.T) {
	etcd := etcdtest.Start(t)
	brokerDir := t.TempDir()
	b, err := broker.New(broker.Options{Addr: "127.0.0.1:0", DataDir: brokerDir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	brokerURL := "tcp://" + b.Addr().String()
	secret, err := credential.LoadOrCreateFleetSecret(brokerDir)
	require.NoError(t, err)

	cfg := func(dir string) controller.Config {
		return controller.Config{DataDir: dir, BrokerURLs: []string{brokerURL}, BrokerSettleInterval: -1, Signing: true}
	}
	dir1 := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir1, credential.SecretFile), fmt.Appendf(nil, "%x\n", secret), 0o600))
	url1, stop1 := startHASupervisor(t, "c1", etcd.Endpoint(), cfg(dir1))
	waitUntil(t, "c1 leads", func() bool { return strings.HasPrefix(readyz(url1), "ok\nrole: leader (c1)") })
	url2, _ := startHASupervisor(t, "c2", etcd.Endpoint(), cfg(t.TempDir()))
	waitUntil(t, "c2 forwards to c1", func() bool { return strings.Contains(readyz(url2), "forwarding to leader c1") })
	token := string(etcdtest.Get(t, etcd.Client(t), "/edgeset/secrets/api-token"))
	c := cli{t: t, server: url2, token: token}

	st, err := api.NewClient(url2, token, nil).Signing(context.Background())
	require.NoError(t, err)
	require.Len(t, st.Controllers, 2, "both controllers registered their online keys")
	require.NotEqual(t, st.Controllers[0].KeyID, st.Controllers[1].KeyID, "each controller has its own key")
	assert.Contains(t, c.ok("keys", "show"), "HA controller c2: key "+st.Controllers[1].KeyID+" NOT delegated")

	rootDir := filepath.Join(t.TempDir(), "root")
	root, err := signing.ParsePublicKey(lastLine(c.ok("keys", "init", "--out", rootDir)))
	require.NoError(t, err)
	out := c.ok("keys", "delegate", "--root-key", filepath.Join(rootDir, "root.key"))
	assert.Contains(t, out, "key set:     version 1")
	assert.Contains(t, out, "(this controller)", "the leader's key")
	assert.Contains(t, out, "(HA controller c2)", "the standby's key")
	assert.NotContains(t, out, "NOT delegated")

	rt := fake.New()
	startAgent(t, brokerURL, secret, "gw-0", rt, func(o *edgeagent.NodeOptions) { o.Agent.TrustRoot = root })
	c.ok("apply", "-f", manifest(t, "exporter:1"))
	checkfor.Eventually(t, 30*time.Second, 25*time.Millisecond, func() error {
		if got := runningImages(rt); !slices.Equal(got, []string{"exporter:1"}) {
			return fmt.Errorf("gw-0 runs %v, want exporter:1 as c1 signed it", got)
		}
		return nil
	})

	stop1()
	waitUntil(t, "c2 leads", func() bool { return strings.HasPrefix(readyz(url2), "ok\nrole: leader (c2)") })
	assert.Contains(t, c.ok("keys", "show"), "key set:     version 1", "the new leader has the key set c1 adopted (the replicated store)")
	c.ok("apply", "-f", manifest(t, "exporter:2"))
	checkfor.Eventually(t, 30*time.Second, 25*time.Millisecond, func() error {
		if got := runningImages(rt); !slices.Equal(got, []string{"exporter:2"}) {
			return fmt.Errorf("gw-0 runs %v, want exporter:2 as c2 signed it", got)
		}
		return nil
	})
	assert.Empty(t, refusalsOf(t, c, "gw-0"), "gw-0 refused nothing the new leader signed")

	// Whoever holds the controller's MQTT credential publishes an unsigned
	// desired state with no instances: refused, nothing stops.
	publishAsController(t, brokerURL, secret, schema.NodeTopic("gw-0", schema.TopicDesired),
		fmt.Appendf(nil, `{"schemaVersion":%d,"node":"gw-0","generation":1000000,"instances":[]}`, schema.WireVersion))
	checkfor.Eventually(t, 30*time.Second, 25*time.Millisecond, func() error {
		if n := refusalsOf(t, c, "gw-0")[signing.Reason(signing.ErrUnsigned)]; n == 0 {
			return fmt.Errorf("no %s refusal from gw-0 yet", signing.Reason(signing.ErrUnsigned))
		}
		return nil
	})
	assert.Equal(t, []string{"exporter:2"}, runningImages(rt), "the unsigned desired state changed nothing")
}

// refusalsOf returns node's refused documents by reason as the leader
// counts them.
func refusalsOf(t *testing.T, c cli, node string) map[string]int64 {
	t.Helper()
	st, err := api.NewClient(c.server, c.token, nil).Signing(context.Background())
	require.NoError(t, err)
	for _, r := range st.Refusals {
		if r.Node == node {
			return r.ByReason
		}
	}
	return nil
}

// publishAsController publishes payload retained on topic with the
// controller's MQTT credential (its own client ID), as an attacker who
// stole it would.
func publishAsController(t *testing.T, brokerURL string, secret []byte, topic string, payload []byte) {
	t.Helper()
	connected := make(chan struct{}, 1)
	cl, err := mqttclient.New(mqttclient.Options{
		BrokerURL: brokerURL, ClientID: "intruder", Username: credential.ControllerUsername,
		Password: credential.ControllerToken(secret), FirstConnectJitter: -1,
		OnConnect: func(context.Context) {
			select {
			case connected <- struct{}{}:
			default:
			}
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("the intruder did not connect")
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	require.NoError(t, cl.Publish(pctx, topic, payload, true))
}
