package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
)

// TestCLIExec: exec runs the command on the node whose policy allows it,
// prints its output and exits with its code; a node that does not allow
// exec refuses, and nothing runs there.
func TestCLIExec(t *testing.T) {
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	<-c.Synced()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	url := "tcp://" + c.MQTTAddr().String()
	var mu sync.Mutex
	ran := map[string][]string{}
	for _, node := range []string{"gw-0", "gw-1"} {
		rt := fake.New()
		rt.ExecResult = func(st edgeagent.ContainerState, cmd []string) (int, []byte, error) {
			mu.Lock()
			ran[node] = cmd
			mu.Unlock()
			if cmd[0] == "fail" {
				return 7, []byte("failing as asked\n"), nil
			}
			return 0, []byte(fmt.Sprintf("%s in %s on %s\n", strings.Join(cmd, " "), st.Labels[edgeagent.LabelContainer], node)), nil
		}
		allow := node == "gw-0"
		startAgent(t, url, secret, node, rt, func(o *edgeagent.NodeOptions) { o.AllowExec = allow })
	}
	cl := cli{t: t, server: "http://" + c.APIAddr().String(), token: c.Token()}
	cl.ok("apply", "-f", manifest(t, "exporter:1"))

	var out, errOut string
	waitUntil(t, "exec on gw-0", func() bool {
		var code int
		code, out, errOut = cl.run("exec", "exporter", "-n", "monitoring", "--node", "gw-0", "--", "cat", "/etc/exporter.yaml")
		return code == 0
	})
	assert.Equal(t, "cat /etc/exporter.yaml in exporter on gw-0\n", out)
	assert.Empty(t, errOut)

	code, out, _ := cl.run("exec", "exporter", "-n", "monitoring", "--node", "gw-0", "--", "fail")
	assert.Equal(t, 7, code, "edgesetctl exits with the command's code")
	assert.Equal(t, "failing as asked\n", out)

	code, _, errOut = cl.run("exec", "exporter", "-n", "monitoring", "--node", "gw-1", "--", "id")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "allow-exec")
	assert.Contains(t, errOut, "forbidden")
	mu.Lock()
	assert.NotContains(t, ran, "gw-1", "nothing ran on the node that does not allow exec")
	mu.Unlock()

	code, _, errOut = cl.run("exec", "exporter", "-n", "monitoring", "--node", "gw-9", "--", "id")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "gw-9")

	for _, args := range [][]string{
		{"exec", "exporter", "--node", "gw-0"},
		{"exec", "exporter", "--node", "gw-0", "--"},
		{"exec", "exporter", "--", "id"},
		{"exec", "exporter", "--node", "gw-0", "--timeout", "2h", "--", "id"},
	} {
		code, _, errOut := cl.run(args...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}
