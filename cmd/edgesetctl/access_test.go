package main

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
)

// mqttLogin connects to the broker at brokerURL as node with token, and
// disconnects; it returns the connect error.
func mqttLogin(brokerURL, node, token string) error {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return err
	}
	o := paho.NewClientOptions().AddBroker("tcp://" + u.Host).SetClientID(node).SetUsername(node).SetPassword(token).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second)
	cl := paho.NewClient(o)
	tok := cl.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		return errors.New("connect timed out")
	}
	if err := tok.Error(); err != nil {
		return err
	}
	cl.Disconnect(0)
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestCLIUsersAndAudit: user create prints the token alone on its last
// line; a viewer reads but is refused an apply with the missing
// permission named; user ls lists without tokens; revoke ends the token;
// audit shows who did what.
func TestCLIUsersAndAudit(t *testing.T) {
	c := startFleet(t, 0)
	out := c.ok("user", "create", "ops", "--role", "viewer", "--ttl", "30d")
	token := lastLine(out)
	require.True(t, strings.HasPrefix(token, "esu_"), out)
	assert.Contains(t, out, "user ops created (viewer)")

	viewer := cli{t: t, server: c.server, token: token}
	assert.Contains(t, viewer.ok("user", "whoami"), "user ops (viewer)")
	viewer.ok("get", "nodes")
	code, _, errOut := viewer.run("apply", "-f", manifest(t, "registry.local/x:1"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `forbidden: user "ops" (viewer) lacks daemonsets.apply`)

	ls := c.ok("user", "ls")
	assert.Contains(t, ls, "ops")
	assert.Contains(t, ls, "admin")
	assert.NotContains(t, ls, token)

	code, _, errOut = c.run("user", "create", "bad", "--role", "root")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `role: "root" is not one of viewer, operator, admin`)

	c.ok("user", "revoke", "ops")
	code, _, errOut = viewer.run("get", "nodes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "refused the API token")

	audit := c.ok("audit")
	for _, want := range []string{"POST", "/api/v1/users", "admin (admin)", "ops (viewer)", "403 Forbidden", "200 OK", "DELETE", "/api/v1/users/ops"} {
		assert.Contains(t, audit, want)
	}
	assert.NotContains(t, c.ok("audit", "--user", "ops"), "/api/v1/users/ops", "only ops's calls")
}

// TestCLITokenRotateAndReadmit: token rotate gives the node a new token
// and the broker refuses the old one; a revoked node is re-admitted with
// a new token, its old one staying refused.
func TestCLITokenRotateAndReadmit(t *testing.T) {
	c := startFleet(t, 0)
	secret, err := credential.LoadOrCreateFleetSecret(c.dataDir)
	require.NoError(t, err)
	old := credential.NodeToken(secret, "gw-r")
	require.NoError(t, mqttLogin(c.mqttURL, "gw-r", old))

	out := c.ok("token", "rotate", "gw-r")
	rotated := lastLine(out)
	assert.Contains(t, out, "epoch 1")
	assert.Equal(t, credential.NodeTokenAt(secret, "gw-r", 1), rotated)
	assert.Error(t, mqttLogin(c.mqttURL, "gw-r", old), "the old token is refused at once")
	assert.NoError(t, mqttLogin(c.mqttURL, "gw-r", rotated))
	assert.Equal(t, rotated, lastLine(c.ok("token", "create", "gw-r")), "create gives the current epoch's token")
	assert.Equal(t, rotated, lastLine(c.ok("token", "create", "gw-r", "--data-dir", c.dataDir)), "offline too")

	code, _, errOut := c.run("token", "readmit", "gw-r")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is not revoked")

	c.ok("token", "revoke", "gw-r", "--data-dir", c.dataDir)
	waitUntil(t, "the revocation in effect", func() bool { return mqttLogin(c.mqttURL, "gw-r", rotated) != nil })
	code, _, errOut = c.run("token", "rotate", "gw-r")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is revoked")

	readmitted := lastLine(c.ok("token", "readmit", "gw-r"))
	assert.Equal(t, credential.NodeTokenAt(secret, "gw-r", 2), readmitted)
	assert.NoError(t, mqttLogin(c.mqttURL, "gw-r", readmitted))
	assert.Error(t, mqttLogin(c.mqttURL, "gw-r", rotated), "the token of before the revocation stays refused")

	again := lastLine(c.ok("node", "token", "rotate", "gw-r"))
	assert.Equal(t, credential.NodeTokenAt(secret, "gw-r", 3), again, "node token rotate is token rotate")
	assert.NoError(t, mqttLogin(c.mqttURL, "gw-r", again))

	viewerToken := lastLine(c.ok("user", "create", "v", "--role", "operator"))
	code, _, errOut = cli{t: t, server: c.server, token: viewerToken}.run("token", "rotate", "gw-r")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "lacks nodes.token")
}
