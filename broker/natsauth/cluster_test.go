package natsauth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker/natsauth"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// TestNodeReadsRetainedDesiredFromAnotherServer: the controller publishes
// a node's retained desired state through server 0; the node, connected
// with its token to any of the three servers and subscribed at QoS 0 or
// QoS 1, receives it, and a later update live. A subscriber on another
// server may miss a retained message published a moment before: the test
// first waits until it is visible there (fleet.awaitRetained).
func TestNodeReadsRetainedDesiredFromAnotherServer(t *testing.T) {
	f := startFleet(t, nil)
	ctx := context.Background()
	ctl := f.controller(t, 0, newInbox())
	for server := range 3 {
		for _, qos := range []byte{0, 1} {
			// Dotted names connect with schema.MQTTClientID (see TestDottedClientIDRejected).
			node := fmt.Sprintf("n%d-q%d.site-a", server, qos)
			if server == 1 {
				node = fmt.Sprintf("n%d-q%d", server, qos)
			}
			t.Run(node, func(t *testing.T) {
				topic := schema.NodeTopic(node, schema.TopicDesired)
				require.NoError(t, ctl.Publish(ctx, topic, []byte("v1"), true))
				if n := f.awaitRetained(t, server, node, topic, "v1"); n > 1 {
					t.Logf("retained message visible on server %d after %d attempts", server, n)
				}
				in := newInbox()
				runClient(t, mqttclient.Options{
					BrokerURL:     f.cluster.MQTTURLs()[server],
					ClientID:      schema.MQTTClientID(node),
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
	assert.Equal(t, f.warm, f.resp.Stats(), "refused before the callout")
	_, err = f.dial(t, 0, schema.MQTTClientID("n1.site-a"), "n1.site-a", f.token("n1.site-a"), nil)
	require.NoError(t, err)
}

// TestUserTTLCutsRevokedNode: with Options.UserTTL, nats-server closes a
// connection when its user JWT expires; the client must log in again, so a
// node revoked meanwhile is out within UserTTL. (Without UserTTL a revoked
// node keeps its connection until it drops: the responder cannot close it.)
func TestUserTTLCutsRevokedNode(t *testing.T) {
	f := startFleet(t, func(o *natsauth.Options) { o.UserTTL = time.Second })
	n1, err := f.dial(t, 0, "n1", "n1", f.token("n1"), nil)
	require.NoError(t, err)
	require.NoError(t, credential.Revoke(f.dataDir, "n1"))
	checkfor.Eventually(t, waitFor, 50*time.Millisecond, func() error {
		if n1.IsConnectionOpen() {
			return errors.New("revoked node still connected")
		}
		return nil
	})
	_, err = f.dial(t, 1, "n1", "n1", f.token("n1"), nil)
	assert.True(t, mqttclient.IsAuthRefused(err), "%v", err)
}

// TestConfigReloadDropsRetainedMessagesOfCalloutUsers pins two hazards
// of a configuration reload of nats-server v2.15.2 in server
// configuration mode: the server closes every connection whose user is
// not in its configuration file (reload.go clientHasMovedToDifferentAccount:
// "user/nkey no longer exists"), which is every auth callout user, and it
// deletes every retained message published through it by such a user
// (mqtt.go mqttCheckPubRetainedPerms). The controller's desired states and
// the nodes' status published through that server are gone until
// published again.
func TestConfigReloadDropsRetainedMessagesOfCalloutUsers(t *testing.T) {
	f := startFleet(t, nil)
	ctx := context.Background()
	ctl := f.controller(t, 0, newInbox())
	desired := schema.NodeTopic("n1", schema.TopicDesired)
	require.NoError(t, ctl.Publish(ctx, desired, []byte("v1"), true))
	witness, err := f.dial(t, 0, "n9", "n9", f.token("n9"), nil)
	require.NoError(t, err)
	f.cluster.Procs[0].Reload(t)
	checkfor.Eventually(t, waitFor, 20*time.Millisecond, func() error {
		if witness.IsConnectionOpen() {
			return errors.New("node still connected after the reload")
		}
		return nil
	})
	fence := schema.RevisionTopic("fence")
	checkfor.Eventually(t, waitFor, 50*time.Millisecond, func() error {
		return ctl.Publish(ctx, fence, []byte("after reload"), true) // once reconnected
	})
	checkfor.Eventually(t, waitFor, 100*time.Millisecond, func() error {
		in := newInbox()
		c, err := f.dial(t, 1, "n1", "n1", f.token("n1"), in)
		if err != nil {
			return err
		}
		defer c.Disconnect(0)
		tok := c.SubscribeMultiple(map[string]byte{desired: 0, fence: 0}, nil)
		if !tok.WaitTimeout(waitFor) || tok.Error() != nil {
			return fmt.Errorf("subscribe: %v", tok.Error())
		}
		got := in.await(t, fence, "after reload") // retained messages come in one batch
		for _, m := range got {
			if m.topic == desired {
				return errors.New("desired state still retained")
			}
		}
		return nil
	})
}
