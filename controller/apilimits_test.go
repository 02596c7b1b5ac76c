package controller

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// TestAPILimitsDefaults: every API limit has a default, and a negative one
// is refused naming its key.
func TestAPILimitsDefaults(t *testing.T) {
	var cfg Config
	cfg.ApplyDefaults()
	l := cfg.APILimits()
	assert.Equal(t, DefaultAPIReadHeaderTimeout, l.ReadHeaderTimeout)
	assert.Equal(t, DefaultAPIReadTimeout, l.ReadTimeout)
	assert.Equal(t, DefaultAPIWriteTimeout, l.WriteTimeout)
	assert.Equal(t, DefaultAPIIdleTimeout, l.IdleTimeout)
	assert.Equal(t, DefaultAPIMaxHeaderBytes, l.MaxHeaderBytes)
	assert.Equal(t, DefaultAPIMaxUnauthenticatedConns, l.MaxUnauthenticatedConns)
	assert.Equal(t, DefaultAPIMaxConnsPerSource, l.MaxConnsPerSource)
	assert.Equal(t, DefaultAPIAuthFailureLimit, l.AuthFailures)
	assert.Equal(t, DefaultAPIAuthFailureWindow, l.AuthFailureWindow)
	assert.Equal(t, DefaultAPIAuthLogInterval, l.AuthLogInterval)

	cfg.APIReadTimeout = -time.Second
	cfg.APIMaxConnsPerSource = -1
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "api-read-timeout: must not be negative")
	assert.Contains(t, err.Error(), "api-max-connections-per-source: must not be negative")
}

// TestAPIServedWithinLimits: the controller's API listener applies the
// configured read timeout and counts failed authentications, throttled
// requests and refused connections in /metrics.
func TestAPIServedWithinLimits(t *testing.T) {
	tc := startController(t, Config{APIReadTimeout: 300 * time.Millisecond, APIAuthFailureLimit: 2, APIMaxConnsPerSource: 3})
	addr := tc.APIAddr().String()

	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /api/v1/apply HTTP/1.1\r\nHost: edgeset\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\nkind:", tc.Token())
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(wait)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "a stalled body is answered once api-read-timeout passes")
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	conn.Close()

	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	get := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, get("/api/v1/nodes", "wrong"))
	assert.Equal(t, http.StatusUnauthorized, get("/api/v1/nodes", "wrong"))
	assert.Equal(t, http.StatusTooManyRequests, get("/api/v1/nodes", tc.Token()))

	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, extra.SetReadDeadline(time.Now().Add(wait)))
	_, err = extra.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "a fourth connection of the source is closed at once")
	extra.Close()
	for _, c := range held {
		c.Close()
	}

	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		m, err := metricsText(addr)
		if err != nil {
			return err
		}
		for _, want := range []string{
			"edgeset_api_auth_failures_total 2",
			"edgeset_api_auth_throttled_total 1",
			`edgeset_api_connections_refused_total{reason="unauthenticated"} 0`,
		} {
			if !strings.Contains(m, want) {
				return fmt.Errorf("/metrics lacks %q", want)
			}
		}
		// At least the fourth connection; a probe of this loop may be
		// refused too while the held ones are being closed.
		if !regexp.MustCompile(`edgeset_api_connections_refused_total\{reason="per-source"\} [1-9]`).MatchString(m) {
			return fmt.Errorf("/metrics counts no per-source refusal")
		}
		return nil
	})
}

// metricsText reads /metrics on a connection of its own.
// mustMetricsText is metricsText that fails the test on an error.
func mustMetricsText(t *testing.T, addr string) string {
	t.Helper()
	text, err := metricsText(addr)
	require.NoError(t, err)
	return text
}

func metricsText(addr string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestApplyRefusesTrailingJSON: a JSON manifest followed by anything but
// another document is refused whole; nothing is applied.
func TestApplyRefusesTrailingJSON(t *testing.T) {
	tc := startController(t, Config{})
	ds := `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"a"}},` +
		`"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"a","image":"nginx:1"}]}}}}`
	ctx := context.Background()
	for _, trailing := range []string{`{"kind":"DaemonSet"}`, " garbage"} {
		_, err := tc.api.Apply(ctx, "ds.json", []byte(ds+trailing), false)
		require.Error(t, err, "trailing %q", trailing)
		assert.Contains(t, err.Error(), "ds.json")
	}
	list, err := tc.api.ListDaemonSets(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
}
