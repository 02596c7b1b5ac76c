package controller

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestReadyzReflectsMQTTListener: when the embedded broker cannot accept
// connections because the process has no file descriptor left, the
// controller is not ready, naming the mqtt listener; once descriptors are
// free it is ready again. It runs in a child process
// with a low RLIMIT_NOFILE.
func TestReadyzReflectsMQTTListener(t *testing.T) {
	if os.Getenv(envFDChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReadyzReflectsMQTTListener$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envFDChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	lim.Cur = 256
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	tc := startController(t, Config{})
	require.NoError(t, tc.Ready(context.Background()))

	var files []*os.File
	for range 1024 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		files = append(files, f)
	}
	require.NotEmpty(t, files)
	_ = files[len(files)-1].Close() // one descriptor, for the client socket
	files = files[:len(files)-1]
	conn, err := net.Dial("tcp", tc.MQTTAddr().String())
	require.NoError(t, err)
	defer conn.Close()
	checkfor.Eventually(t, wait, 5*time.Millisecond, func() error {
		err := tc.Ready(context.Background())
		if err == nil || !strings.Contains(err.Error(), "mqtt listener") || !strings.Contains(err.Error(), "too many open files") {
			return fmt.Errorf("Ready = %v, want the mqtt listener's accept error", err)
		}
		return nil
	})
	for _, f := range files {
		_ = f.Close()
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error { return tc.Ready(context.Background()) })
	code, body := readyz(t, tc)
	require.Equal(t, http.StatusOK, code, body)
}

// envFDChild runs TestReadyzReflectsMQTTListener's child.
const envFDChild = "EDGESET_TEST_FD_CHILD"

// TestBrokerMetricsServed: the embedded broker's connection metrics are on
// the controller's /metrics, and a failed MQTT login is counted there.
func TestBrokerMetricsServed(t *testing.T) {
	tc := startController(t, Config{})
	conn, err := net.Dial("tcp", tc.MQTTAddr().String())
	require.NoError(t, err)
	defer conn.Close()
	// CONNECT, MQTT 3.1.1, clean session, username and password, keepalive
	// 30s: client "node-a", user "node-a", password "wrong".
	connect := []byte{0x10, 33, 0, 4, 'M', 'Q', 'T', 'T', 4, 0xC2, 0, 30,
		0, 6, 'n', 'o', 'd', 'e', '-', 'a', 0, 6, 'n', 'o', 'd', 'e', '-', 'a', 0, 5, 'w', 'r', 'o', 'n', 'g'}
	_, err = conn.Write(connect)
	require.NoError(t, err)
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		body := mustMetricsText(t, tc.APIAddr().String())
		for _, want := range []string{
			`edgeset_broker_auth_failures_total{reason="bad_password"} 1`,
			"edgeset_broker_pending_connections 0",
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("/metrics lacks %q", want)
			}
		}
		return nil
	})
}

// TestUnconnectedSessionsEndAfterRestart: a node whose retained presence
// reads online but which no connection holds (its broker was killed and
// published no will) is marked offline once the recheck comes, with a
// warning that says why; a node that is connected stays online, and the
// node offline comes back when it reconnects with a new session.
func TestUnconnectedSessionsEndAfterRestart(t *testing.T) {
	const recheck = 3 * time.Second
	tc := startController(t, Config{presenceRecheck: recheck})
	// "gone" as the broker's store replays it after a SIGKILL: online,
	// retained, with no client behind it.
	payload, err := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: "gone", Online: true, Session: 7})
	require.NoError(t, err)
	require.NoError(t, tc.embeddedBroker(t).Publish(schema.NodeTopic("gone", schema.TopicOnline), payload, true))
	startNode(t, tc.brokerURL(), tc.secret, gateway("back", nil))
	online := func(node string) bool {
		st, ok := tc.registry.State(node)
		return ok && st.Online
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if !online("gone") || !online("back") {
			return fmt.Errorf("gone online %v, back online %v; want both, before the recheck", online("gone"), online("back"))
		}
		return nil
	})

	checkfor.Eventually(t, recheck+wait, 20*time.Millisecond, func() error {
		if online("gone") {
			return fmt.Errorf("gone still online")
		}
		evs, err := tc.api.Events(context.Background(), api.EventFilter{Object: "node/gone"})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == "NodeOffline" && e.Type == schema.EventWarning && strings.Contains(e.Message, "broker restarted") {
				return nil
			}
		}
		return fmt.Errorf("no NodeOffline warning for gone in %+v", evs)
	})
	assert.True(t, online("back"), "a connected node stays online")

	// The node comes back with a new session.
	startNode(t, tc.brokerURL(), tc.secret, gateway("gone", nil))
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if !online("gone") {
			return fmt.Errorf("gone not back online with a new session")
		}
		return nil
	})
}
