package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeset/edgeset/credential"
)

// wait is the timeout of every paho operation and checkfor.Eventually in these tests.
const wait = 10 * time.Second

// testBroker is a running broker and what tests need to talk to it.
type testBroker struct {
	*Broker
	dataDir string
	secret  []byte
	stop    func() // stops Run and checks its result; idempotent
}

// startBroker runs a broker on 127.0.0.1:0 with opts (DataDir defaults to a
// temporary directory) until the test ends or stop is called.
func startBroker(t *testing.T, opts Options) *testBroker {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Addr == "" && opts.TLSAddr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &testBroker{Broker: b, dataDir: opts.DataDir, secret: b.secret, stop: stop}
}

// client describes a test connection.
type client struct {
	user, pass, id string
	tls            *tls.Config
	will           *will
	conn           *net.Conn // if set, receives the raw connection
}

// will is a test will message.
type will struct {
	topic, payload string
	retained       bool
}

// node returns the credentials of node.
func (tb *testBroker) node(name string) client {
	return client{user: name, pass: credential.NodeToken(tb.secret, name), id: name}
}

// controller returns the credentials of the controller.
func (tb *testBroker) controller() client {
	return client{user: credential.ControllerUsername, pass: credential.ControllerToken(tb.secret), id: "controller"}
}

// dial connects c to addr and returns the client or the connect error. The
// client is disconnected when the test ends.
func dial(t *testing.T, addr net.Addr, c client) (paho.Client, error) {
	t.Helper()
	scheme := "tcp://"
	if c.tls != nil {
		scheme = "ssl://"
	}
	o := paho.NewClientOptions().AddBroker(scheme + addr.String()).
		SetClientID(c.id).SetUsername(c.user).SetPassword(c.pass).
		SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectTimeout(wait).SetKeepAlive(30 * time.Second).SetTLSConfig(c.tls)
	if c.will != nil {
		o.SetWill(c.will.topic, c.will.payload, 1, c.will.retained)
	}
	if c.conn != nil {
		o.SetCustomOpenConnectionFn(func(uri *url.URL, _ paho.ClientOptions) (net.Conn, error) {
			conn, err := net.DialTimeout("tcp", uri.Host, wait)
			*c.conn = conn
			return conn, err
		})
	}
	cl := paho.NewClient(o)
	tok := cl.Connect()
	if !tok.WaitTimeout(wait) {
		return nil, errors.New("connect timed out")
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { cl.Disconnect(0) })
	return cl, nil
}

// mustDial is dial that fails the test on error.
func mustDial(t *testing.T, addr net.Addr, c client) paho.Client {
	t.Helper()
	cl, err := dial(t, addr, c)
	if err != nil {
		t.Fatalf("connect %s: %v", c.user, err)
	}
	return cl
}

// inbox records the messages a client receives.
type inbox struct {
	mu   sync.Mutex
	msgs []message // guarded by mu
}

// message is one received message.
type message struct {
	topic, payload string
	retained       bool
}

// handle is a paho message handler appending to the inbox.
func (in *inbox) handle(_ paho.Client, m paho.Message) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.msgs = append(in.msgs, message{m.Topic(), string(m.Payload()), m.Retained()})
}

// all returns a copy of the received messages.
func (in *inbox) all() []message {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]message(nil), in.msgs...)
}

// has returns nil once a message with topic and payload was received.
func (in *inbox) has(topic, payload string) func() error {
	return func() error {
		for _, m := range in.all() {
			if m.topic == topic && m.payload == payload {
				return nil
			}
		}
		return fmt.Errorf("no message %q on %s; got %v", payload, topic, in.all())
	}
}

// subscribe subscribes cl to filter at QoS 1 into in and returns the SUBACK
// return code.
func subscribe(t *testing.T, cl paho.Client, filter string, in *inbox) byte {
	t.Helper()
	tok := cl.Subscribe(filter, 1, in.handle)
	if !tok.WaitTimeout(wait) {
		t.Fatalf("subscribe %s: timed out", filter)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("subscribe %s: %v", filter, err)
	}
	// paho keys the result by the filter without any $share/{group}/ prefix.
	for _, code := range tok.(*paho.SubscribeToken).Result() {
		return code
	}
	t.Fatalf("subscribe %s: no SUBACK return code", filter)
	return 0
}

// publish publishes and waits for completion.
func publish(t *testing.T, cl paho.Client, topic string, qos byte, retained bool, payload string) {
	t.Helper()
	tok := cl.Publish(topic, qos, retained, payload)
	if !tok.WaitTimeout(wait) {
		t.Fatalf("publish %s: timed out", topic)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
}
