package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// logLines is the fake log of every container: "NODE CONTAINER line N". A
// follow stream then stays open until closed, which is counted in closed.
func logLines(node string, closed *atomic.Int32) func(edgeagent.ContainerState, edgeagent.LogOptions) (io.ReadCloser, error) {
	return func(c edgeagent.ContainerState, opts edgeagent.LogOptions) (io.ReadCloser, error) {
		tail := opts.Tail
		const lines = 20
		start := 0
		if tail > 0 {
			start = max(0, lines-tail)
		}
		var b strings.Builder
		for i := start; i < lines; i++ {
			fmt.Fprintf(&b, "%s %s line %d\n", node, c.Labels[edgeagent.LabelContainer], i)
		}
		if !opts.Follow {
			return io.NopCloser(strings.NewReader(b.String())), nil
		}
		pr, pw := io.Pipe()
		go func() { _, _ = io.WriteString(pw, b.String()) }()
		return &countingCloser{Reader: pr, close: func() { pr.Close(); pw.Close(); closed.Add(1) }}, nil
	}
}

type countingCloser struct {
	io.Reader
	once  sync.Once
	close func()
}

func (c *countingCloser) Close() error {
	c.once.Do(c.close)
	return nil
}

// startLogFleet runs a controller and nodes gw-0 and gw-1 whose fake
// runtimes log logLines; it returns the CLI and the MQTT URL and secret.
func startLogFleet(t *testing.T, closed *atomic.Int32) (cli, string, []byte) {
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	<-c.Synced()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	url := "tcp://" + c.MQTTAddr().String()
	for _, name := range []string{"gw-0", "gw-1"} {
		rt := fake.New()
		rt.LogOutput = logLines(name, closed)
		node, err := edgeagent.NewNode(edgeagent.NodeOptions{
			Agent: edgeagent.Config{NodeName: name, Ephemeral: true, ResyncInterval: 200 * time.Millisecond},
			MQTT: mqttclient.Options{BrokerURL: url, Password: credential.NodeToken(secret, name), FirstConnectJitter: time.Millisecond,
				Backoff: mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}},
			Status: func(context.Context) schema.NodeStatus {
				return schema.NodeStatus{Labels: map[string]string{"role": "gateway"},
					Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}}}
			},
		}, rt)
		require.NoError(t, err)
		nctx, ncancel := context.WithCancel(context.Background())
		ndone := make(chan error, 1)
		go func() { ndone <- node.Run(nctx) }()
		t.Cleanup(func() { ncancel(); <-ndone })
	}
	return cli{t: t, server: "http://" + c.APIAddr().String(), token: c.Token()}, url, secret
}

func TestCLILogs(t *testing.T) {
	var followsClosed atomic.Int32
	c, url, secret := startLogFleet(t, &followsClosed)
	waitUntil(t, "2 nodes", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Count(out, "node/") == 2
	})
	c.ok("apply", "-f", manifest(t, "exporter:1"))

	var out string
	waitUntil(t, "the exporter's log on gw-1", func() bool {
		var code int
		code, out, _ = c.run("logs", "exporter", "-n", "monitoring", "--node", "gw-1")
		return code == 0
	})
	assert.Equal(t, 20, strings.Count(out, "gw-1 exporter line "), out)
	assert.True(t, strings.HasPrefix(out, "gw-1 exporter line 0\n"), out)

	assert.Equal(t, "gw-0 exporter line 18\ngw-0 exporter line 19\n",
		c.ok("logs", "exporter", "-n", "monitoring", "--node", "gw-0", "--tail", "2"))
	assert.Equal(t, "gw-1 exporter line 19\n",
		c.ok("logs", "exporter", "-n", "monitoring", "--node", "gw-1", "--tail", "1", "-c", "exporter"))

	// A follow streams until the reader goes away, which cancels it on
	// the node.
	ac := api.NewClient(c.server, c.token, nil)
	fctx, fcancel := context.WithCancel(context.Background())
	rc, err := ac.Logs(fctx, api.LogsRequest{DaemonSet: "monitoring/exporter", Node: "gw-1", Tail: 1, Follow: true})
	require.NoError(t, err)
	line := make([]byte, len("gw-1 exporter line 19\n"))
	_, err = io.ReadFull(rc, line)
	require.NoError(t, err)
	assert.Equal(t, "gw-1 exporter line 19\n", string(line))
	fcancel()
	rc.Close()
	waitUntil(t, "the follow to be cancelled on the node", func() bool { return followsClosed.Load() == 1 })

	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown daemonset", []string{"logs", "exporte", "-n", "monitoring", "--node", "gw-1"}, exitFailure, "did you mean monitoring/exporter?"},
		{"unknown node", []string{"logs", "exporter", "-n", "monitoring", "--node", "gw-7"}, exitFailure, `node "gw-7"`},
		{"unknown container", []string{"logs", "exporter", "-n", "monitoring", "--node", "gw-1", "-c", "sidecar"}, exitFailure, `has no container "sidecar"`},
		{"no node", []string{"logs", "exporter", "-n", "monitoring"}, exitUsage, "--node"},
		{"no previous run", []string{"logs", "exporter", "-n", "monitoring", "--node", "gw-1", "--previous"}, exitFailure,
			`container "exporter" of daemonset monitoring/exporter has no terminated run on this node`},
		{"previous and follow", []string{"logs", "exporter", "-n", "monitoring", "--node", "gw-1", "-p", "-f"}, exitUsage, "--previous and --follow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := c.run(tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.msg)
		})
	}

	var spy *mqttclient.Client
	// A node cannot listen to another node's log requests.
	spy, err = mqttclient.New(mqttclient.Options{BrokerURL: url, ClientID: "gw-spy", Username: "gw-spy",
		Password: credential.NodeToken(secret, "gw-spy"), Handler: func(string, []byte) {}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = spy.Run(ctx) }()
	waitUntil(t, "the spy to connect", spy.Connected)
	err = spy.Subscribe(ctx, mqttclient.Subscription{Filter: schema.NodeTopic("gw-1", schema.TopicLogsRequest), QoS: 1})
	assert.ErrorIs(t, err, mqttclient.ErrSubscriptionRefused)
}
