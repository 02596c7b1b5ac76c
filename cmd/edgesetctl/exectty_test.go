//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// envAsMain makes the test binary run edgesetctl itself (TestMain): the
// terminal tests run it as a child process on a pseudo-terminal, whose
// controlling terminal it becomes, as a shell would start it.
const envAsMain = "EDGESETCTL_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// openPTY opens a pseudo-terminal pair (the Linux /dev/ptmx interface,
// with x/sys/unix rather than a pty package): what is written to master
// is typed on the terminal, what a program writes to the terminal is read
// from master.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	fd := int(master.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0), "unlock the pty")
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tty.Close(); _ = master.Close() })
	return master, tty
}

// terminalRaw reports whether tty is in raw mode (no line editing, no echo).
func terminalRaw(t *testing.T, tty *os.File) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	return tio.Lflag&(unix.ICANON|unix.ECHO) == 0
}

func resizePTY(t *testing.T, tty *os.File, cols, rows int) {
	t.Helper()
	require.NoError(t, unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}))
}

// ttySession is edgesetctl exec -it running as a child on a pty.
type ttySession struct {
	t      *testing.T
	master *os.File
	tty    *os.File
	cmd    *exec.Cmd
	out    *lockedBuffer // all the terminal showed
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// startTTYSession runs edgesetctl with args on a new pty of cols x rows.
func startTTYSession(t *testing.T, cols, rows int, args ...string) *ttySession {
	t.Helper()
	master, tty := openPTY(t)
	resizePTY(t, tty, cols, rows)
	s := &ttySession{t: t, master: master, tty: tty, out: &lockedBuffer{}, exited: make(chan struct{})}
	go func() { _, _ = io.Copy(s.out, master) }() // ends with EIO once the pty's last holder closes it
	s.cmd = exec.Command(os.Args[0], args...)
	s.cmd.Env = append(os.Environ(), envAsMain+"=1")
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = tty, tty, tty
	// A session of its own with the pty as its controlling terminal: a
	// resize of the pty signals it (SIGWINCH), as a terminal emulator's does.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, s.cmd.Start())
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("terminal output:\n%q", s.out.String())
		}
	})
	return s
}

func (s *ttySession) typeIn(text string) {
	s.t.Helper()
	_, err := s.master.Write([]byte(text))
	require.NoError(s.t, err)
}

func (s *ttySession) waitFor(want string) {
	s.t.Helper()
	checkfor.Eventually(s.t, 40*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(s.out.String(), want) {
			return fmt.Errorf("the terminal shows no %q yet", want)
		}
		return nil
	})
}

// exitCode waits for edgesetctl to end and returns its exit code.
func (s *ttySession) exitCode() int {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(40 * time.Second):
		s.t.Fatal("edgesetctl did not exit")
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(s.t, s.err)
	return 0
}

// startDockerExecFleet runs a controller and one agent on the local
// Docker engine that allows exec, and a daemonset of the test image on
// it; it returns the cli for the controller and the node, once the
// instance runs.
func startDockerExecFleet(t *testing.T) (cli, string) {
	cliDocker := testimage.RequireDocker(t)
	image := testimage.Build(t)
	dir := t.TempDir()
	ctl, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	<-ctl.Synced()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)

	node := testimage.Node(t, cliDocker) // removes the node's containers after the agent stops
	rt, err := docker.New(t.Context(), docker.Options{})
	require.NoError(t, err)
	n, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: node, DataDir: t.TempDir(), ResyncInterval: 250 * time.Millisecond},
		MQTT: mqttclient.Options{BrokerURL: "tcp://" + ctl.MQTTAddr().String(), Password: credential.NodeToken(secret, node),
			FirstConnectJitter: time.Millisecond, Backoff: mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}},
		Status: func(context.Context) schema.NodeStatus {
			return schema.NodeStatus{Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}}}
		},
		AllowExec: true,
	}, rt)
	require.NoError(t, err)
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan error, 1)
	go func() { adone <- n.Run(actx) }()
	t.Cleanup(func() { acancel(); require.NoError(t, <-adone); require.NoError(t, rt.Close()) })

	c := cli{t: t, server: "http://" + ctl.APIAddr().String(), token: ctl.Token()}
	manifestPath := t.TempDir() + "/repl.yaml"
	require.NoError(t, os.WriteFile(manifestPath, []byte(fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: repl, namespace: e2e}
spec:
  selector: {matchLabels: {app: repl}}
  template:
    metadata: {labels: {app: repl}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - {name: main, image: %q, imagePullPolicy: Never, args: [sleep]}
`, image)), 0o644))
	c.ok("apply", "-f", manifestPath)
	checkfor.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		code, _, errOut := c.run("exec", "repl", "-n", "e2e", "--node", node, "--", "/app", "check", "/app")
		if code != 0 {
			return fmt.Errorf("exec not possible yet: %d %s", code, errOut)
		}
		return nil
	})
	return c, node
}

// TestExecInteractiveTerminal (the real Docker engine, edgesetctl on a
// pseudo-terminal): exec -it puts the local terminal in raw mode, starts
// the command on a remote terminal of the local one's size, sends what is
// typed as it is typed (the remote terminal echoes it), follows a resize
// of the local terminal (SIGWINCH), merges stderr into the output, and
// ends with the command's exit code, the local terminal restored. Ctrl-D
// ends a shell-like command's input as on a local terminal (exit 0). A
// SIGTERM to edgesetctl mid-session restores the terminal too.
func TestExecInteractiveTerminal(t *testing.T) {
	c, node := startDockerExecFleet(t)
	args := func(extra ...string) []string {
		return append([]string{"--server", c.server, "--token", c.token, "exec", "repl", "-n", "e2e", "--node", node, "-it"}, extra...)
	}

	s := startTTYSession(t, 100, 30, args("--", "/app", "repl")...)
	s.waitFor("app> ")
	assert.True(t, terminalRaw(t, s.tty), "the local terminal is raw during the session")
	s.typeIn("size\r")
	s.waitFor("size\r\n") // the remote terminal's echo of what was typed
	s.waitFor("size 100x30")
	resizePTY(t, s.tty, 120, 40)
	checkfor.Eventually(t, 40*time.Second, 300*time.Millisecond, func() error {
		if strings.Contains(s.out.String(), "size 120x40") {
			return nil
		}
		s.typeIn("size\r")
		return fmt.Errorf("the remote terminal is not 120x40 yet")
	})
	s.typeIn("err to stderr\r")
	s.waitFor("to stderr\r\n")
	s.typeIn("exit 7\r")
	assert.Equal(t, 7, s.exitCode(), "edgesetctl exits with the command's code")
	assert.False(t, terminalRaw(t, s.tty), "the local terminal is restored")

	s = startTTYSession(t, 80, 24, args("--", "/app", "repl")...)
	s.waitFor("app> ")
	s.typeIn("hello\r")
	s.waitFor("echo: hello")
	s.typeIn("\x04") // Ctrl-D at the start of a line
	assert.Equal(t, 0, s.exitCode(), "the end of the command's input ends it")
	assert.False(t, terminalRaw(t, s.tty))

	s = startTTYSession(t, 80, 24, args("--idle-timeout", "1h", "--", "/app", "repl")...)
	s.waitFor("app> ")
	require.True(t, terminalRaw(t, s.tty))
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	assert.NotEqual(t, 0, s.exitCode(), "a terminated session is no success")
	assert.False(t, terminalRaw(t, s.tty), "the terminal is restored after a signal")
}
