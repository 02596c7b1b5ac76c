package controller

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

func TestStaleState(t *testing.T) {
	obs := schema.NodeTopic("gw", schema.TopicObserved)
	online := schema.NodeTopic("gw", schema.TopicOnline)
	tests := []struct {
		name              string
		topic             string
		pending, incoming string
		stale             bool
	}{
		{"older observed", obs, `{"observedGeneration":5}`, `{"observedGeneration":4}`, true},
		{"same observed", obs, `{"observedGeneration":5}`, `{"observedGeneration":5}`, false},
		{"newer observed", obs, `{"observedGeneration":5}`, `{"observedGeneration":6}`, false},
		// Sessions are the device's clock: they order nothing. The last
		// presence to arrive wins, except a will of another session
		// arriving after an online (a late will of the connection the
		// online replaced) and an online of a session after its will.
		{"lower session online after a will (device clock behind)", online, `{"online":false,"session":20}`, `{"online":true,"session":10}`, false},
		{"higher session online after a will", online, `{"online":false,"session":20}`, `{"online":true,"session":30}`, false},
		{"late will of another session after an online", online, `{"online":true,"session":10}`, `{"online":false,"session":20}`, true},
		{"will of the pending online's session", online, `{"online":true,"session":20}`, `{"online":false,"session":20}`, false},
		{"online of a session after its will", online, `{"online":false,"session":20}`, `{"online":true,"session":20}`, true},
		{"garbage incoming", obs, `{"observedGeneration":5}`, `nope`, false},
		{"status is never stale", schema.NodeTopic("gw", schema.TopicStatus), `{"observedGeneration":5}`, `{"observedGeneration":4}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := staleState(tc.topic, []byte(tc.pending), []byte(tc.incoming)); got != tc.stale {
				t.Fatalf("staleState = %t, want %t", got, tc.stale)
			}
		})
	}
}

// TestExternalBroker: with broker-url the controller is a client of a
// broker it does not run (here the broker package serving on its own): it
// listens for no MQTT, names the broker in Version, and a node on that
// broker gets its desired state and reports back through it.
func TestExternalBroker(t *testing.T) {
	brokerDir := t.TempDir()
	b, err := broker.New(broker.Options{Addr: "127.0.0.1:0", DataDir: brokerDir, Logger: testLogger(t)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	secret, err := credential.LoadOrCreateFleetSecret(brokerDir)
	require.NoError(t, err)
	passwordFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(passwordFile, []byte(credential.ControllerToken(secret)+"\n"), 0o600))
	url := "tcp://" + b.Addr().String()

	tc := startController(t, Config{BrokerURL: url, BrokerPasswordFile: passwordFile})
	assert.Nil(t, tc.MQTTAddr(), "no MQTT listener of its own")
	assert.Equal(t, url, tc.Version(context.Background()).Broker)
	n := startNode(t, url, secret, gateway("gw", nil))
	tc.applyYAML(t, exporterYAML)
	n.expectDaemonSets("monitoring/exporter")
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		_, err := tc.GetNode(context.Background(), "gw")
		return err
	})
	assert.Positive(t, counterValue(tc.metrics.messagesOut))
	assert.Zero(t, counterValue(tc.metrics.publishErrors))
}

// TestEmbeddedBrokerDescribed: the embedded broker is named in Version by
// its configured address, and serves on the address it bound.
func TestEmbeddedBrokerDescribed(t *testing.T) {
	tc := startController(t, Config{})
	assert.Equal(t, "embedded 127.0.0.1:0", tc.Version(context.Background()).Broker)
	assert.Equal(t, tc.embeddedBroker(t).Addr(), tc.MQTTAddr())
}

// TestExternalTransportHandsOnFleetMessages: every topic but the drop
// counter goes to the controller; with the drop counter off, that topic
// too.
func TestExternalTransportHandsOnFleetMessages(t *testing.T) {
	tests := []struct {
		name, dropTopic, topic string
		handed                 bool
	}{
		{"node status", DefaultBrokerDropTopic, schema.NodeTopic("gw", schema.TopicStatus), true},
		{"drop counter", DefaultBrokerDropTopic, DefaultBrokerDropTopic, false},
		{"drop counter off", "", DefaultBrokerDropTopic, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var handed bool
			e := &externalTransport{
				dropTopic: tc.dropTopic, log: slog.New(slog.DiscardHandler), metrics: newMetrics(), resync: make(chan struct{}, 1),
				hooks: transportHooks{message: func(string, []byte) { handed = true }, republish: func() {}, reject: func(string, error) {}},
			}
			e.handle(tc.topic, []byte("1"))
			assert.Equal(t, tc.handed, handed)
		})
	}
}

// TestNewFailsOnABusyMQTTAddress: a broker that cannot listen fails New
// with the address, and the resources opened before it are released.
func TestNewFailsOnABusyMQTTAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := t.TempDir()
	_, err = New(Config{DataDir: dir, MQTTAddr: ln.Addr().String(), APIAddr: "127.0.0.1:0"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), ln.Addr().String())
	c, err := New(Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err, "the store was closed")
	c.closeResources()
}

// TestSubscribeQoSOnNATS: the node subscriptions are QoS 0 when the
// controller serves a NATS cluster's callout, QoS 1 on any other broker.
func TestSubscribeQoSOnNATS(t *testing.T) {
	if got := subscribeQoS(Config{NATSAuthURLs: []string{"nats://n1:4222"}}); got != 0 {
		t.Errorf("with nats-auth-url: QoS %d, want 0", got)
	}
	if got := subscribeQoS(Config{BrokerURLs: []string{"tcp://mosquitto:1883"}}); got != 1 {
		t.Errorf("without: QoS %d, want 1", got)
	}
}
