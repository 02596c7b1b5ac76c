package natsauth_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker/natsauth"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/natstest"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// waitFor bounds every wait for a message or a connection in these tests.
const waitFor = 15 * time.Second

// TestMain removes the nats-server that natstest.StartCluster built once
// the tests ran.
func TestMain(m *testing.M) {
	code := m.Run()
	natstest.RemoveBinary()
	os.Exit(code)
}

// fleet is a cluster of three nats-server processes whose auth callout a
// Responder serves, for one fleet secret. The servers run outside the
// test binary, so that -race instruments the responder, the controller
// and the agents, not nats-server.
type fleet struct {
	cluster *natstest.Procs
	resp    *natsauth.Responder
	secret  []byte
	dataDir string         // holds revoked-tokens
	warm    natsauth.Stats // the responder's counters after warmUp
}

// startFleet starts the cluster and the responder; both stop, joined, when
// the test ends. opts may adjust the responder's options.
func startFleet(t *testing.T, adjust func(*natsauth.Options)) *fleet {
	t.Helper()
	f := &fleet{cluster: natstest.StartCluster(t, 3), dataDir: t.TempDir()}
	var err error
	f.secret, err = credential.LoadOrCreateFleetSecret(f.dataDir) // as the controller's data dir
	require.NoError(t, err)
	opts := natsauth.Options{
		URL:            strings.Join(f.cluster.Clients, ","),
		User:           natstest.AuthUser,
		Password:       f.cluster.AuthPassword,
		Issuer:         f.cluster.Issuer,
		Account:        natstest.Account,
		Secret:         f.secret,
		RevokedFile:    filepath.Join(f.dataDir, credential.RevokedFile),
		RevocationPoll: 20 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if adjust != nil {
		adjust(&opts)
	}
	var r *natsauth.Responder
	r, err = natsauth.New(opts)
	require.NoError(t, err)
	f.resp = r
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("responder ended before it was ready: %v", err)
	case <-time.After(waitFor):
		t.Fatalf("responder not ready within %s", waitFor)
	}
	f.cluster.WaitForResponder(t)
	f.warmUp(t)
	return f
}

// warmUp connects the controller to each server in turn: the first MQTT
// connection of an account on a server sets up its MQTT streams and
// session manager, which takes seconds on a cold cluster (more under the
// race detector) and may time out ("lookup sessions stream ... timeout").
func (f *fleet) warmUp(t *testing.T) {
	t.Helper()
	for i := range f.cluster.Procs {
		checkfor.Eventually(t, 4*waitFor, 10*time.Millisecond, func() error {
			c, err := f.connect(i, credential.ControllerUsername, credential.ControllerUsername, credential.ControllerToken(f.secret), nil)
			if err != nil {
				return fmt.Errorf("warm up server %d: %w", i, err)
			}
			c.Disconnect(0)
			return nil
		})
	}
	f.warm = f.resp.Stats()
}

// token returns node's token; controller the controller's login.
func (f *fleet) token(node string) string { return credential.NodeToken(f.secret, node) }

// inbox collects the messages a client receives.
type inbox struct {
	mu   sync.Mutex
	msgs []received
	more chan struct{}
}

type received struct {
	topic   string
	payload string
}

func newInbox() *inbox { return &inbox{more: make(chan struct{}, 1)} }

func (in *inbox) add(topic string, payload []byte) {
	in.mu.Lock()
	in.msgs = append(in.msgs, received{topic, string(payload)})
	in.mu.Unlock()
	select {
	case in.more <- struct{}{}:
	default:
	}
}

// await waits until a message on topic with payload arrived and returns
// every message received so far.
func (in *inbox) await(t *testing.T, topic, payload string) []received {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		in.mu.Lock()
		msgs := append([]received(nil), in.msgs...)
		in.mu.Unlock()
		for _, m := range msgs {
			if m.topic == topic && m.payload == payload {
				return msgs
			}
		}
		select {
		case <-in.more:
		case <-deadline:
			t.Fatalf("no message %q on %s within %s; got %v", payload, topic, waitFor, msgs)
		}
	}
}

// has reports whether a message on topic with payload arrived within d.
func (in *inbox) has(topic, payload string, d time.Duration) bool {
	deadline := time.After(d)
	for {
		in.mu.Lock()
		for _, m := range in.msgs {
			if m.topic == topic && m.payload == payload {
				in.mu.Unlock()
				return true
			}
		}
		in.mu.Unlock()
		select {
		case <-in.more:
		case <-deadline:
			return false
		}
	}
}

// awaitRetained polls, as node on server i, until the retained message
// payload on topic is delivered on subscription: nats-server copies
// retained messages to the other servers asynchronously, so a subscriber
// on another server can miss one published a moment before. It returns
// the attempts made.
func (f *fleet) awaitRetained(t *testing.T, i int, node, topic, payload string) int {
	t.Helper()
	attempts := 0
	checkfor.Eventually(t, waitFor, 10*time.Millisecond, func() error {
		attempts++
		in := newInbox()
		c, err := f.dial(t, i, schema.MQTTClientID(node), node, f.token(node), in)
		if err != nil {
			return err
		}
		defer c.Disconnect(0)
		subscribeCode(t, c, topic, 0)
		if !in.has(topic, payload, 250*time.Millisecond) {
			return fmt.Errorf("retained %q on %s not delivered on server %d", payload, topic, i)
		}
		return nil
	})
	return attempts
}

// runClient runs an mqttclient.Client with opts (Handler set to in) until
// the test ends, and waits until it is connected.
func runClient(t *testing.T, opts mqttclient.Options, in *inbox) *mqttclient.Client {
	t.Helper()
	connected := make(chan struct{}, 1)
	opts.Handler = in.add
	opts.OnConnect = func(context.Context) {
		select {
		case connected <- struct{}{}:
		default:
		}
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := mqttclient.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-connected:
	case <-time.After(waitFor):
		t.Fatalf("%s not connected to %s within %s", opts.ClientID, opts.BrokerURL, waitFor)
	}
	return c
}

// controller runs the controller's client on server i.
func (f *fleet) controller(t *testing.T, i int, in *inbox, subs ...mqttclient.Subscription) *mqttclient.Client {
	t.Helper()
	return runClient(t, mqttclient.Options{
		BrokerURL:     f.cluster.MQTTURLs()[i],
		ClientID:      credential.ControllerUsername,
		Username:      credential.ControllerUsername,
		Password:      credential.ControllerToken(f.secret),
		Subscriptions: subs,
	}, in)
}

// dial connects a bare paho client (for CONNACK and SUBACK codes) to server
// i and disconnects it when the test ends.
func (f *fleet) dial(t *testing.T, i int, clientID, user, password string, in *inbox) (mqtt.Client, error) {
	t.Helper()
	c, err := f.connect(i, clientID, user, password, in)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Disconnect(0) })
	return c, nil
}

// connect connects a bare paho client to server i; safe on any goroutine.
func (f *fleet) connect(i int, clientID, user, password string, in *inbox) (mqtt.Client, error) {
	opts := mqtt.NewClientOptions().
		AddBroker(f.cluster.MQTTURLs()[i]).
		SetClientID(clientID).
		SetUsername(user).
		SetPassword(password).
		SetProtocolVersion(4).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(waitFor).
		SetOrderMatters(true)
	if in != nil {
		opts.SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) { in.add(m.Topic(), m.Payload()) })
	}
	c := mqtt.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(waitFor) {
		return nil, fmt.Errorf("connect %s: no CONNACK within %s", clientID, waitFor)
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	return c, nil
}

// subscribeCode subscribes c to filter and returns the SUBACK code.
func subscribeCode(t *testing.T, c mqtt.Client, filter string, qos byte) byte {
	t.Helper()
	tok := c.Subscribe(filter, qos, nil)
	require.True(t, tok.WaitTimeout(waitFor), "SUBACK of %s", filter)
	require.NoError(t, tok.Error(), filter)
	codes := tok.(*mqtt.SubscribeToken).Result()
	key := filter
	if parts := strings.SplitN(filter, "/", 3); parts[0] == "$share" && len(parts) == 3 {
		key = parts[2] // paho keys a shared subscription's code by its topic filter
	}
	code, ok := codes[key]
	require.True(t, ok, "SUBACK of %s: no code for the filter in %v", filter, codes)
	return code
}

// publish publishes with paho and waits for the broker's acknowledgement
// (at QoS 1) or the write (at QoS 0).
func publish(t *testing.T, c mqtt.Client, topic string, qos byte, retained bool, payload string) {
	t.Helper()
	tok := c.Publish(topic, qos, retained, payload)
	require.True(t, tok.WaitTimeout(waitFor), "publish %s", topic)
	require.NoError(t, tok.Error(), topic)
}
