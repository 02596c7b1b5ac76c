package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/sealing"
)

// TestCLINodeKey: an admin registers a key read off a device, reads it
// back and forgets it; a malformed key is refused naming the field.
func TestCLINodeKey(t *testing.T) {
	dir := t.TempDir()
	ctl, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	<-ctl.Synced()
	c := cli{t: t, server: "http://" + ctl.APIAddr().String(), token: ctl.Token(), dataDir: dir}

	code, _, errOut := c.run("node", "key", "get", "gw-1")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "registered no sealing key")

	k, err := sealing.GenerateKey()
	require.NoError(t, err)
	out := c.ok("node", "key", "set", "gw-1", k.Public().String())
	assert.Contains(t, out, "key ID "+k.KeyID())
	assert.Contains(t, out, "admin")
	assert.Equal(t, k.Public().String(), lastLine(c.ok("node", "key", "get", "gw-1")))

	code, _, errOut = c.run("node", "key", "set", "gw-1", "ed25519:AAAA")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "publicKey")

	assert.Contains(t, c.ok("node", "key", "rm", "gw-1"), "forgot the key of node gw-1")
	code, _, _ = c.run("node", "key", "get", "gw-1")
	assert.NotEqual(t, 0, code)
}
