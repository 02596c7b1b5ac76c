package controller

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// envCrashHelper makes the test binary run a controller on the data
// directory it names until killed (see TestKill9LosesNothing).
const envCrashHelper = "EDGESET_TEST_CONTROLLER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envCrashHelper); dir != "" {
		os.Exit(runHelperController(dir))
	}
	os.Exit(m.Run())
}

// runHelperController serves a controller and prints "ready MQTT API" once
// its first pass is done.
func runHelperController(dir string) int {
	c, err := New(Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	go func() {
		<-c.Synced()
		fmt.Printf("ready %s %s\n", c.MQTTAddr(), c.APIAddr())
	}()
	if err := c.Run(context.Background()); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// TestKill9LosesNothing: a controller process killed with SIGKILL right
// after accepting a change and publishing it restarts from its store with
// every daemonset and every node's desired state (same generation), and
// republishes them.
func TestKill9LosesNothing(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashHelper+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	fields := strings.Fields(line)
	require.Len(t, fields, 3, "helper said %q", line)

	token, err := loadOrCreateToken(dir + "/admin.token")
	require.NoError(t, err)
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	client := api.NewClient("http://"+fields[2], token, nil)
	_, err = client.Apply(context.Background(), "exporter.yaml", []byte(exporterYAML), false)
	require.NoError(t, err)
	n := startNode(t, "tcp://"+fields[1], secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	before, _ := n.lastDesired()

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	n.stop()

	tc := startController(t, Config{DataDir: dir})
	ds, err := tc.api.GetDaemonSet(context.Background(), exporter)
	require.NoError(t, err)
	assert.Equal(t, int64(1), ds.Generation)
	n2 := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n2.expectDaemonSets(exporter)
	after, _ := n2.lastDesired()
	assert.Equal(t, before.Generation, after.Generation, "the same desired state, republished after the crash")
	assert.Equal(t, before.Instances, after.Instances)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if got := counterValue(tc.metrics.republishes); got < 1 {
			return fmt.Errorf("no republish yet")
		}
		return nil
	})
}
