package natsauth

import (
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/credential"
)

func TestSubject(t *testing.T) {
	for topic, want := range map[string]string{
		"edgeset/v1/nodes/n1/desired":         "edgeset.v1.nodes.n1.desired",
		"edgeset/v1/nodes/n1.site-a/status":   "edgeset.v1.nodes.n1//site-a.status",
		"edgeset/v1/nodes/n1/logs/request":    "edgeset.v1.nodes.n1.logs.request",
		"edgeset/v1/revisions/0123abcd":       "edgeset.v1.revisions.0123abcd",
		"edgeset/v1/nodes/a.b.c/secrets/f00d": "edgeset.v1.nodes.a//b//c.secrets.f00d",
	} {
		assert.Equal(t, want, Subject(topic), topic)
	}
}

func TestNodePermissions(t *testing.T) {
	p := nodePermissions("n1.site")
	assert.ElementsMatch(t, jwt.StringList{
		"edgeset.v1.nodes.n1//site.status",
		"edgeset.v1.nodes.n1//site.online",
		"edgeset.v1.nodes.n1//site.observed",
		"edgeset.v1.nodes.n1//site.events",
		"edgeset.v1.nodes.n1//site.telemetry",
		"edgeset.v1.nodes.n1//site.logs.response",
		"edgeset.v1.nodes.n1//site.exec.response",
	}, p.Pub.Allow)
	assert.ElementsMatch(t, jwt.StringList{
		"edgeset.v1.nodes.n1//site.desired",
		"edgeset.v1.nodes.n1//site.logs.request",
		"edgeset.v1.nodes.n1//site.exec.request",
		"edgeset.v1.nodes.n1//site.secrets.*",
		"edgeset.v1.nodes.n1//site.exec.input.*",
		"edgeset.v1.revisions.*",
		"edgeset.v1.configmaps.*",
		"edgeset.v1.keys",
	}, p.Sub.Allow)
	assert.Empty(t, p.Pub.Deny)
	assert.Empty(t, p.Sub.Deny)
	assert.Nil(t, p.Resp)
}

func TestAuthorize(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	revoked := func(node string) bool { return node == "gone" }
	mqtt := func(clientID string) jwt.ClientInformation {
		return jwt.ClientInformation{Type: "mqtt", MQTT: clientID}
	}
	login := func(user, password string) jwt.ConnectOptions {
		return jwt.ConnectOptions{Username: user, Password: password}
	}
	tests := []struct {
		name     string
		ci       jwt.ClientInformation
		co       jwt.ConnectOptions
		reason   string
		fullPerm bool
	}{
		{"node", mqtt("n1"), login("n1", credential.NodeToken(secret, "n1")), "", false},
		{"controller", mqtt("edgeset-controller"), login(credential.ControllerUsername, credential.ControllerToken(secret)), "", true},
		{"controller with any client id", mqtt("other"), login(credential.ControllerUsername, credential.ControllerToken(secret)), "", true},
		{"anonymous", mqtt("n1"), login("", ""), ReasonAnonymous, false},
		{"no password", mqtt("n1"), login("n1", ""), ReasonAnonymous, false},
		{"wrong token", mqtt("n1"), login("n1", credential.NodeToken(secret, "n2")), ReasonBadPassword, false},
		{"node token as controller", mqtt("edgeset-controller"), login(credential.ControllerUsername, credential.NodeToken(secret, credential.ControllerUsername)), ReasonBadPassword, false},
		{"controller token as node", mqtt("n1"), login("n1", credential.ControllerToken(secret)), ReasonBadPassword, false},
		{"invalid node name", mqtt("N/1"), login("N/1", credential.NodeToken(secret, "N/1")), ReasonBadNodeName, false},
		{"wildcard node name", mqtt("+"), login("+", credential.NodeToken(secret, "+")), ReasonBadNodeName, false},
		{"revoked", mqtt("gone"), login("gone", credential.NodeToken(secret, "gone")), ReasonRevoked, false},
		{"dotted node, its NATS client id", mqtt("n1_site"), login("n1.site", credential.NodeToken(secret, "n1.site")), "", false},
		{"dotted node, its name as client id", mqtt("n1.site"), login("n1.site", credential.NodeToken(secret, "n1.site")), "", false},
		{"dotted node, another node's client id", mqtt("n1_other"), login("n1.site", credential.NodeToken(secret, "n1.site")), ReasonBadClientID, false},
		{"other client id", mqtt("n2"), login("n1", credential.NodeToken(secret, "n1")), ReasonBadClientID, false},
		{"nats protocol", jwt.ClientInformation{Type: "nats"}, login("n1", credential.NodeToken(secret, "n1")), ReasonNotMQTT, false},
		{"nats websocket", jwt.ClientInformation{Type: "websocket"}, login(credential.ControllerUsername, credential.ControllerToken(secret)), ReasonNotMQTT, false},
		{"rotated node, its new token", mqtt("rot"), login("rot", credential.NodeTokenAt(secret, "rot", 2)), "", false},
		{"rotated node, its epoch-0 token", mqtt("rot"), login("rot", credential.NodeToken(secret, "rot")), ReasonBadPassword, false},
		{"rotated node, its epoch-1 token", mqtt("rot"), login("rot", credential.NodeTokenAt(secret, "rot", 1)), ReasonBadPassword, false},
		{"another node's epoch token", mqtt("n1"), login("n1", credential.NodeTokenAt(secret, "n1", 2)), ReasonBadPassword, false},
	}
	epoch := func(node string) uint64 {
		if node == "rot" {
			return 2
		}
		return 0
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := authorize(secret, revoked, epoch, tc.ci, tc.co)
			assert.Equal(t, tc.reason, v.reason)
			assert.Equal(t, tc.co.Username, v.identity)
			switch {
			case tc.reason != "":
				assert.Equal(t, jwt.Permissions{}, v.permissions)
			case tc.fullPerm:
				assert.Equal(t, jwt.Permissions{}, v.permissions, "empty permissions: everything")
			default:
				assert.Equal(t, nodePermissions(tc.co.Username), v.permissions)
			}
		})
	}
}
