package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// lockedBuffer is an io.Writer that tests read while the agent writes.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var metricsAddrLine = regexp.MustCompile(`msg=metrics addr=(\S+)`)

// startAgentWithMetrics runs the agent with its metrics server on a free
// loopback port and returns the server's address.
func startAgentWithMetrics(t *testing.T) string {
	t.Helper()
	const node = "gw-metrics"
	addr, secret := startBroker(t)
	var log lockedBuffer
	runAgent(t, &log, "--node-name", node, "--broker-url", "tcp://"+addr, "--token", credential.NodeToken(secret, node),
		"--runtime", "fake", "--data-dir", t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	var metricsAddr string
	checkfor.Eventually(t, 15*time.Second, 20*time.Millisecond, func() error {
		m := metricsAddrLine.FindStringSubmatch(log.String())
		if m == nil {
			return fmt.Errorf("no metrics line in the log yet:\n%s", log.String())
		}
		metricsAddr = m[1]
		return nil
	})
	return metricsAddr
}

// TestMetricsServerLimits checks that no client can hold the agent's
// metrics server: a body sent a byte at a time is cut (the server would
// otherwise wait for it for ever before closing or reusing the
// connection), and an oversized header block is refused.
func TestMetricsServerLimits(t *testing.T) {
	addr := startAgentWithMetrics(t)

	t.Run("slow body is cut", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: agent\r\nContent-Length: 100000\r\n\r\nx")
		require.NoError(t, err)

		// Send a body byte every 100 ms for at most the body's length
		// (10,000 s) or until the server closes the connection.
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_, _ = bufio.NewReader(conn).ReadString(0) // returns when the server closes
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		bound := time.After(2 * metricsReadTimeout)
		for sent := 1; sent < 100000; sent++ {
			select {
			case <-closed:
				t.Logf("server closed the connection after %d body bytes", sent)
				return
			case <-bound:
				t.Fatalf("the server still reads a slow body %v after its headers (%d bytes sent)", 2*metricsReadTimeout, sent)
			case <-tick.C:
				if _, err := conn.Write([]byte("x")); err != nil {
					<-closed
					t.Logf("server closed the connection after %d body bytes", sent)
					return
				}
			}
		}
		t.Fatal("the whole slow body was sent")
	})

	t.Run("oversized header block is refused", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
		require.NoError(t, err)
		req.Header.Set("X-Padding", strings.Repeat("p", 2*metricsMaxHeaderBytes))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

		resp, err = http.Get("http://" + addr + "/healthz")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "a normal request is still served")
	})
}
