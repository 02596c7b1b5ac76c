package natsauth_test

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker/natsauth"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/natstest"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// TestWillChecked: nats-server publishes a will with its client's
// permissions, so a node's will on another node's topic is dropped while
// one on its own online topic reaches the controller. The allowed will,
// published after the forbidden one through the same server, is the
// fence; the server's error line of the refused will, in its log, says it
// was tried.
func TestWillChecked(t *testing.T) {
	f := startFleet(t, nil)
	in := newInbox()
	f.controller(t, 0, in, mqttclient.Subscription{Filter: "edgeset/v1/nodes/+/online", QoS: 1})
	forger := f.dialWithWill(t, 1, "n3", schema.NodeTopic("n2", schema.TopicOnline))
	honest := f.dialWithWill(t, 1, "n4", schema.NodeTopic("n4", schema.TopicOnline))
	require.NoError(t, forger.Close()) // no DISCONNECT: the will is due
	violation := fmt.Sprintf("Publish Violation - Subject %q", natsauth.Subject(schema.NodeTopic("n2", schema.TopicOnline)))
	checkfor.Eventually(t, waitFor, 10*time.Millisecond, func() error {
		return loggedError(f.cluster.Procs[1], violation)
	})
	require.NoError(t, honest.Close())
	own := schema.NodeTopic("n4", schema.TopicOnline)
	got := in.await(t, own, "will of n4")
	assert.Equal(t, []received{{own, "will of n4"}}, got)
}

// dialWithWill connects node to server i with a QoS 1 will on topic and
// returns its TCP connection, to break without DISCONNECT.
func (f *fleet) dialWithWill(t *testing.T, i int, node, topic string) net.Conn {
	t.Helper()
	var conn net.Conn
	opts := mqtt.NewClientOptions().
		AddBroker(f.cluster.MQTTURLs()[i]).
		SetClientID(node).SetUsername(node).SetPassword(f.token(node)).
		SetProtocolVersion(4).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(waitFor).
		SetBinaryWill(topic, []byte("will of "+node), 1, true).
		SetCustomOpenConnectionFn(func(u *url.URL, _ mqtt.ClientOptions) (net.Conn, error) {
			c, err := net.DialTimeout("tcp", u.Host, waitFor)
			conn = c
			return c, err
		})
	c := mqtt.NewClient(opts)
	tok := c.Connect()
	require.True(t, tok.WaitTimeout(waitFor), "connect %s", node)
	require.NoError(t, tok.Error(), node)
	t.Cleanup(func() { c.Disconnect(0) })
	return conn
}

// loggedError returns nil once server s has logged an error line (level
// [ERR]) containing text.
func loggedError(s *natstest.Proc, text string) error {
	log, err := s.Log()
	if err != nil {
		return err
	}
	for line := range strings.Lines(log) {
		if strings.Contains(line, "[ERR]") && strings.Contains(line, text) {
			return nil
		}
	}
	return fmt.Errorf("server %s logged no error %s", s.Name(), text)
}
