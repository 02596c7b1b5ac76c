package controller

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadyzReflectsMQTTListener: an embedded broker listener that cannot
// accept connections (here the WebSocket listener, whose address is taken)
// makes /readyz fail naming it, while the controller keeps serving.
func TestReadyzReflectsMQTTListener(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	tc := startController(t, Config{MQTTWSAddr: taken.Addr().String()})
	checkFor(t, wait, 10*time.Millisecond, func() error {
		code, body := readyz(t, tc)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "mqtt listener") || !strings.Contains(body, "ws") {
			return fmt.Errorf("/readyz = %d %q, want 503 naming the mqtt listener ws", code, body)
		}
		return nil
	})
}

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
	checkFor(t, wait, 10*time.Millisecond, func() error {
		body := metricsText(t, tc)
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

// metricsText fetches /metrics.
func metricsText(t *testing.T, tc *testController) string {
	t.Helper()
	resp, err := http.Get("http://" + tc.APIAddr().String() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
