package natsauth_test

import (
	"errors"
	"time"

	"context"
	"fmt"
	"github.com/edgeset/edgeset/broker/natsauth"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// TestNodeReadsRetainedDesiredFromAnotherServer: the controller publishes
// a node's retained desired state through server 0; the node, connected
// with its token to any of the three servers and subscribed at QoS 0 or
// QoS 1, receives it, and a later update live.
func TestNodeReadsRetainedDesiredFromAnotherServer(t *testing.T) {
	f := startFleet(t, nil)
	ctx := context.Background()
	ctl := f.controller(t, 0, newInbox())
	for server := range 3 {
		for _, qos := range []byte{0, 1} {
			// Dotted names connect with natsauth.ClientID (see TestDottedClientIDRejected).
			node := fmt.Sprintf("n%d-q%d.site-a", server, qos)
			if server == 1 {
				node = fmt.Sprintf("n%d-q%d", server, qos)
			}
			t.Run(node, func(t *testing.T) {
				topic := schema.NodeTopic(node, schema.TopicDesired)
				require.NoError(t, ctl.Publish(ctx, topic, []byte("v1"), true))
				in := newInbox()
				runClient(t, mqttclient.Options{
					BrokerURL:     f.cluster.MQTTURLs()[server],
					ClientID:      natsauth.ClientID(node),
					Username:      node,
					Password:      f.token(node),
					Subscriptions: []mqttclient.Subscription{{Filter: topic, QoS: qos}},
				}, in)
				in.await(t, topic, "v1")
				require.NoError(t, ctl.Publish(ctx, topic, []byte("v2"), true))
				in.await(t, topic, "v2")
			})
		}
	}
	assert.Empty(t, f.resp.Stats().Denied)
	assert.GreaterOrEqual(t, f.resp.Stats().Allowed, uint64(7))
}

// TestConnectRefused: every login the embedded broker refuses is refused
// by the cluster too, at CONNACK, on every server.
func TestConnectRefused(t *testing.T) {
	f := startFleet(t, nil)
	require.NoError(t, credential.Revoke(f.dataDir, "gone"))
	checkfor.Eventually(t, waitFor, 20*time.Millisecond, func() error {
		// the responder polls the revocation list
		_, err := f.dial(t, 0, "gone", "gone", f.token("gone"), nil)
		if err == nil {
			return errors.New("revoked node still admitted")
		}
		return nil
	})
	tests := []struct {
		name, clientID, user, password, reason string
	}{
		{"anonymous", "n1", "", "", natsauth.ReasonAnonymous},
		{"no password", "n1", "n1", "", natsauth.ReasonAnonymous},
		{"wrong token", "n1", "n1", f.token("n2"), natsauth.ReasonBadPassword},
		{"node token as controller", "edgeset-controller", credential.ControllerUsername, f.token(credential.ControllerUsername), natsauth.ReasonBadPassword},
		{"revoked", "gone", "gone", f.token("gone"), natsauth.ReasonRevoked},
		{"other client id", "n2", "n1", f.token("n1"), natsauth.ReasonBadClientID},
		{"invalid node name", "N_1", "N_1", f.token("N_1"), natsauth.ReasonBadNodeName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for server := range 3 {
				before := f.resp.Stats().Denied[tc.reason]
				_, err := f.dial(t, server, tc.clientID, tc.user, tc.password, nil)
				require.Error(t, err, "server %d", server)
				assert.True(t, mqttclient.IsAuthRefused(err), "server %d: %v", server, err)
				t.Logf("server %d: %v", server, err)
				assert.Equal(t, before+1, f.resp.Stats().Denied[tc.reason], "server %d", server)
			}
		})
	}
}

// TestDottedClientIDRejected pins what nats-server v2.15.2 does with a
// client ID containing '.', as a node named like a DNS subdomain has: it
// refuses it at CONNECT (CONNACK 0x02, identifier rejected) before any
// authentication, so such a node must connect with natsauth.ClientID.
func TestDottedClientIDRejected(t *testing.T) {
	f := startFleet(t, nil)
	_, err := f.dial(t, 0, "n1.site-a", "n1.site-a", f.token("n1.site-a"), nil)
	require.ErrorIs(t, err, packets.ErrorRefusedIDRejected)
	assert.Zero(t, f.resp.Stats().Allowed+f.resp.Stats().Denied[natsauth.ReasonBadClientID], "refused before the callout")
	_, err = f.dial(t, 0, natsauth.ClientID("n1.site-a"), "n1.site-a", f.token("n1.site-a"), nil)
	require.NoError(t, err)
}
