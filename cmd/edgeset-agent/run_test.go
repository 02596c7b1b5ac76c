package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// startBroker runs an embedded broker on loopback until the test ends and
// returns its address and fleet secret.
func startBroker(t *testing.T) (addr string, secret []byte) {
	t.Helper()
	dir := t.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	b, err := broker.New(broker.Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-b.Ready():
	case err := <-done:
		t.Fatalf("broker: %v", err)
	}
	return b.Addr().String(), secret
}

// watcher is a controller-identity client recording the latest payload of
// every topic under one node.
type watcher struct {
	mu     sync.Mutex // guards latest
	latest map[string][]byte
}

func watchNode(t *testing.T, addr string, secret []byte, node string) *watcher {
	t.Helper()
	w := &watcher{latest: map[string][]byte{}}
	c, err := mqttclient.New(mqttclient.Options{
		BrokerURL: "tcp://" + addr, ClientID: credential.ControllerUsername,
		Username: credential.ControllerUsername, Password: credential.ControllerToken(secret),
		Subscriptions:      []mqttclient.Subscription{{Filter: schema.NodeTopic(node, "#"), QoS: 1}},
		Handler:            w.handle,
		FirstConnectJitter: -1,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *watcher) handle(topic string, payload []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest[topic] = append([]byte(nil), payload...)
}

func (w *watcher) get(topic string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest[topic]
}

func (w *watcher) presence(node string) (schema.Presence, error) {
	b := w.get(schema.NodeTopic(node, schema.TopicOnline))
	if b == nil {
		return schema.Presence{}, fmt.Errorf("no presence of %s yet", node)
	}
	return schema.DecodePresence(b)
}

// testLog adapts t.Log to the agent's stderr.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }

// runAgent runs the edgeset-agent command with args until the returned
// stop function is called; stop returns the command's error.
func runAgent(t *testing.T, stderr io.Writer, args ...string) (stop func() error) {
	t.Helper()
	cmd := newRootCmd(stderr)
	cmd.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestAgentAnnouncesItselfToEmbeddedBroker(t *testing.T) {
	const node = "gw-1"
	addr, secret := startBroker(t)
	w := watchNode(t, addr, secret, node)
	stop := runAgent(t, testLog{t},
		"--node-name", node, "--broker-url", "tcp://"+addr, "--token", credential.NodeToken(secret, node),
		"--runtime", "fake", "--data-dir", t.TempDir(), "--labels", "site=lab,role=gateway",
		"--taints", "dedicated=camera:NoSchedule", "--keepalive", "5s", "--log-level", "warn")

	var status schema.NodeStatus
	checkfor.Eventually(t, 15*time.Second, 50*time.Millisecond, func() error {
		b := w.get(schema.NodeTopic(node, schema.TopicStatus))
		if b == nil {
			return fmt.Errorf("no status yet")
		}
		var err error
		status, err = schema.DecodeNodeStatus(b)
		return err
	})
	require.Equal(t, node, status.Node)
	for k, v := range map[string]string{
		"site": "lab", "role": "gateway", schema.LabelOS: runtime.GOOS, schema.LabelArch: runtime.GOARCH,
		schema.LabelRuntime: "fake", schema.LabelAgentVersion: schema.Version,
	} {
		require.Equal(t, v, status.Labels[k], "label %s", k)
	}
	require.NotEmpty(t, status.Labels[schema.LabelHostname])
	require.Equal(t, []schema.Taint{{Key: "dedicated", Value: "camera", Effect: schema.TaintNoSchedule}}, status.Taints)
	require.Len(t, status.Conditions, 5)
	require.Equal(t, "fake", status.Info.Runtime)
	require.NotEmpty(t, status.Capacity["cpu"])
	ready := false
	for _, c := range status.Conditions {
		if c.Type == schema.NodeReady {
			ready = c.Status == schema.ConditionTrue
		}
	}
	require.True(t, ready, "Ready condition: %+v", status.Conditions)

	checkfor.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		p, err := w.presence(node)
		if err == nil && !p.Online {
			err = fmt.Errorf("presence offline")
		}
		return err
	})

	require.NoError(t, stop(), "a cancelled agent exits cleanly")
	checkfor.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		p, err := w.presence(node)
		if err == nil && p.Online {
			err = fmt.Errorf("presence still online")
		}
		return err
	})
}

func TestAgentRefusesBadConfigBeforeConnecting(t *testing.T) {
	cmd := newRootCmd(io.Discard)
	cmd.SetArgs([]string{"--node-name", "gw-1", "--token", "t", "--runtime", "fake", "--labels", "kubernetes.io/hostname=other"})
	err := cmd.Execute()
	require.ErrorContains(t, err, `label "kubernetes.io/hostname" is set by the agent`)
}
