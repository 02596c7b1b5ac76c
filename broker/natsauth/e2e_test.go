package natsauth_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

const exporterManifest = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: exporter
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: exporter}
  template:
    metadata:
      labels: {app: exporter}
    spec:
      nodeSelector:
        role: gateway
      containers:
      - name: exporter
        image: registry.local/exporter:1.0
`

// TestFleetOnCluster runs the real controller (external broker: server 0
// of the cluster, its token in a password file) and a real agent
// (edgeagent.Node over the fake runtime, on server 2, with its node token):
// the node registers, a daemonset is applied, and the node runs it and
// reports it ready.
func TestFleetOnCluster(t *testing.T) {
	f := startFleet(t, nil)
	ctx := context.Background()
	pwFile := filepath.Join(t.TempDir(), "controller.password")
	require.NoError(t, os.WriteFile(pwFile, []byte(credential.ControllerToken(f.secret)+"\n"), 0o600))
	ctl, err := controller.New(controller.Config{
		DataDir:            f.dataDir,
		BrokerURL:          f.cluster.MQTTURLs()[0],
		BrokerPasswordFile: pwFile,
		APIAddr:            "127.0.0.1:0",
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	runUntilCleanup(t, ctl.Run)
	select {
	case <-ctl.Synced():
	case <-time.After(waitFor):
		t.Fatal("controller made no reconcile pass")
	}
	client := api.NewClient("http://"+ctl.APIAddr().String(), ctl.Token(), nil)

	// A dotted name: nats-server refuses '.' in a client ID, and the
	// agent connects with schema.MQTTClientID, unchanged.
	const nodeName = "gw-1.site-a"
	rt := runAgent(t, f.cluster.MQTTURLs()[2], nodeName, f.token(nodeName),
		map[string]string{schema.LabelHostname: nodeName, "role": "gateway"})

	checkfor.Eventually(t, 2*waitFor, 50*time.Millisecond, func() error {
		n, err := client.GetNode(ctx, nodeName)
		if err != nil {
			return fmt.Errorf("node not registered: %w", err)
		}
		if !n.Online || n.Labels["role"] != "gateway" {
			return fmt.Errorf("node online=%t labels=%v", n.Online, n.Labels)
		}
		return nil
	})
	_, err = client.Apply(ctx, "exporter.yaml", []byte(exporterManifest), false)
	require.NoError(t, err)
	checkfor.Eventually(t, 2*waitFor, 50*time.Millisecond, func() error {
		var running []string
		for _, c := range rt.Containers() {
			if c.Running {
				running = append(running, c.Image)
			}
		}
		if len(running) != 1 || running[0] != "registry.local/exporter:1.0" {
			return fmt.Errorf("node runs %v", running)
		}
		ds, err := client.GetDaemonSet(ctx, "monitoring/exporter")
		if err != nil {
			return err
		}
		if s := ds.Status; s.NumberReady != 1 || s.NumberAvailable != 1 {
			return fmt.Errorf("daemonset status %+v, want 1 ready and available", s)
		}
		return nil
	})
}

// runAgent runs a real agent (edgeagent.Node over a fake runtime, which it
// returns) for node on brokerURL with token and labels, until the test
// ends.
func runAgent(t *testing.T, brokerURL, node, token string, labels map[string]string) *fake.Runtime {
	t.Helper()
	rt := fake.New()
	n, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: node, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)},
		MQTT: mqttclient.Options{
			BrokerURL:          brokerURL,
			Password:           token,
			FirstConnectJitter: -1,
			Backoff:            mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		},
		Status: func(context.Context) schema.NodeStatus {
			return schema.NodeStatus{
				Labels:     labels,
				Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}},
			}
		},
	}, rt)
	require.NoError(t, err)
	runUntilCleanup(t, n.Run)
	return rt
}

// runUntilCleanup runs run until the test ends, then cancels it and waits
// for it to return nil.
func runUntilCleanup(t *testing.T, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}
