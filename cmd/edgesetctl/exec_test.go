package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

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

// runWithInput is run with in as edgesetctl's standard input.
func (c cli) runWithInput(in io.Reader, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	all := append([]string{"--server", c.server, "--token", c.token}, args...)
	code = run(all, in, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCLIExecStreamsInput: exec -i sends standard input to the command as
// it comes (the command answers each line before the input ends), its
// end closes the command's input, and the session ends with the command's
// exit code. The audit log records the session with its node and command,
// and none of its input calls. -t without a terminal says so and runs
// without one, as kubectl does.
func TestCLIExecStreamsInput(t *testing.T) {
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
	rt := fake.New()
	sessions := make(chan edgeagent.ExecOptions, 4)
	rt.ExecInteractive = func(ctx context.Context, _ edgeagent.ContainerState, opts edgeagent.ExecOptions, stdin io.Reader,
		stdout, _ io.Writer, _ <-chan edgeagent.TerminalSize) (int, error) {
		sessions <- opts
		sc := bufio.NewScanner(stdin)
		n := 0
		for sc.Scan() {
			n++
			fmt.Fprintf(stdout, "> %s\n", sc.Text())
		}
		return 10 + n, ctx.Err()
	}
	startAgent(t, "tcp://"+c.MQTTAddr().String(), secret, "gw-0", rt, func(o *edgeagent.NodeOptions) { o.AllowExec = true })
	cl := cli{t: t, server: "http://" + c.APIAddr().String(), token: c.Token()}
	cl.ok("apply", "-f", manifest(t, "exporter:1"))

	// The answer to each line comes while the input is still open: the
	// reader hands out the second line only after the first was answered.
	stdout := &lockedBuffer{}
	in := &gatedReader{lines: []string{"one\n", "two\n"}, before: func(i int) bool {
		return i == 0 || strings.Contains(stdout.String(), "> one\n")
	}}
	var code int
	var errOut string
	waitUntil(t, "an exec session on gw-0", func() bool {
		var out, errb bytes.Buffer
		in.reset()
		stdout.reset()
		code = run([]string{"--server", cl.server, "--token", cl.token, "exec", "exporter", "-n", "monitoring", "--node", "gw-0", "-i", "--", "sh"},
			in, io.MultiWriter(&out, stdout), &errb)
		errOut = errb.String()
		return !strings.Contains(errOut, "no instance") && !strings.Contains(errOut, "not running")
	})
	assert.Equal(t, 12, code, "the command's exit code; stderr: %s", errOut)
	assert.Equal(t, "> one\n> two\n", stdout.String())
	assert.Equal(t, edgeagent.ExecOptions{Cmd: []string{"sh"}}, <-sessions)

	code, out, errOut := cl.runWithInput(strings.NewReader("x\n"), "exec", "exporter", "-n", "monitoring", "--node", "gw-0", "-i", "-t", "--", "sh")
	assert.Equal(t, 11, code, errOut)
	assert.Equal(t, "> x\n", out)
	assert.Contains(t, errOut, "Unable to use a TTY - input is not a terminal")

	audit := cl.ok("audit", "-o", "json")
	assert.Contains(t, audit, `node=gw-0 container=\"\" command=[\"sh\"] stdin`, "the session's node and command are audited")
	assert.NotContains(t, audit, "/input", "input calls are not audited")
	assert.Contains(t, cl.ok("audit"), `node=gw-0 container="" command=["sh"] stdin`, "the table shows it too")
}

// gatedReader yields lines one Read at a time, line i once before(i)
// holds (polled), then EOF.
type gatedReader struct {
	mu     sync.Mutex
	lines  []string
	next   int
	before func(i int) bool
}

func (g *gatedReader) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next = 0
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.mu.Lock()
	i := g.next
	g.mu.Unlock()
	if i >= len(g.lines) {
		return 0, io.EOF
	}
	deadline := time.Now().Add(30 * time.Second)
	for !g.before(i) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("line %d never due", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.mu.Lock()
	g.next++
	g.mu.Unlock()
	return copy(p, g.lines[i]), nil
}

func (l *lockedBuffer) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}
