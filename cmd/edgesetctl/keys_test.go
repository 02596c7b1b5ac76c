package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/signing"
)

// startSigningController runs a controller with signing on and returns a
// cli for it.
func startSigningController(t *testing.T) cli {
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", Signing: true}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	<-c.Synced()
	return cli{t: t, server: "http://" + c.APIAddr().String(), token: c.Token(), dataDir: dir, mqttURL: "tcp://" + c.MQTTAddr().String()}
}

// TestCLIKeys: keys init makes the root offline, delegate and revoke
// publish key sets an agent pinning the root accepts, and it runs what the
// controller signed.
func TestCLIKeys(t *testing.T) {
	c := startSigningController(t)
	rootDir := filepath.Join(t.TempDir(), "root")
	out := c.ok("keys", "init", "--out", rootDir)
	rootValue := lastLine(out)
	root, err := signing.ParsePublicKey(rootValue)
	require.NoError(t, err)
	assert.Contains(t, out, signing.KeyID(root))
	fi, err := os.Stat(filepath.Join(rootDir, "root.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fromFile, err := signing.LoadPublicKey(filepath.Join(rootDir, "root.pub"))
	require.NoError(t, err)
	assert.True(t, root.Equal(fromFile))
	code, _, errOut := c.run("keys", "init", "--out", rootDir)
	assert.NotEqual(t, 0, code, "init never overwrites a root")
	assert.Contains(t, errOut, "root.key")

	assert.Contains(t, c.ok("keys", "show"), "key set:     none")
	rootKey := filepath.Join(rootDir, "root.key")
	out = c.ok("keys", "delegate", "--root-key", rootKey, "--expires", "30d")
	assert.Contains(t, out, "key set:     version 1")
	assert.Contains(t, out, "(this controller)")

	secret, err := credential.LoadOrCreateFleetSecret(c.dataDir)
	require.NoError(t, err)
	rt := fake.New()
	startAgent(t, c.mqttURL, secret, "gw-0", rt, func(o *edgeagent.NodeOptions) { o.Agent.TrustRoot = root })
	c.ok("apply", "-f", manifest(t, "exporter:1"))
	waitUntil(t, "gw-0 to run the signed daemon", func() bool {
		for _, ct := range rt.Containers() {
			if ct.Running && ct.Image == "exporter:1" {
				return true
			}
		}
		return false
	})

	other := signing.KeyID(root) // any key ID but the controller's
	out = c.ok("keys", "revoke", other, "--root-key", rootKey)
	assert.Contains(t, out, "key set:     version 2")
	assert.Contains(t, out, "revoked "+other)
	ownID := strings.Fields(strings.SplitN(c.ok("keys", "show"), "\n", 2)[0])[2]
	code, _, errOut = c.run("keys", "revoke", ownID, "--root-key", rootKey)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "rotate it first")

	otherRoot := filepath.Join(t.TempDir(), "other")
	c.ok("keys", "init", "--out", otherRoot)
	code, _, errOut = c.run("keys", "delegate", "--root-key", filepath.Join(otherRoot, "root.key"))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "is not this root's")

	code, _, errOut = c.run("keys", "delegate")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "--root-key")
}

func TestParseDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "36h": 36 * time.Hour} {
		got, err := parseDays(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "d", "-1d", "0d", "x", "90 d", "0s"} {
		_, err := parseDays(bad)
		assert.Error(t, err, bad)
	}
}
