package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
)

// deadServer is an http:// URL on which nothing listens.
func deadServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	return url
}

// countingServer answers every request with handler and counts them.
func countingServer(t *testing.T, handler http.HandlerFunc) (string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

// TestCLIServerListFailsOver: with a dead first server, edgesetctl asks the
// second, a live controller.
func TestCLIServerListFailsOver(t *testing.T) {
	c := startFleet(t, 0)
	dead := deadServer(t)
	c.server = dead + "," + c.server
	out := c.ok("version")
	assert.Contains(t, out, "Controller: ")
}

// TestCLIAllServersDead: when no server can be reached the error names
// every URL tried.
func TestCLIAllServersDead(t *testing.T) {
	dead1, dead2 := deadServer(t), deadServer(t)
	c := cli{t: t, server: dead1 + ", " + dead2 + "/", token: "x"}
	code, _, errOut := c.run("get", "nodes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, dead1+": ")
	assert.Contains(t, errOut, dead2+": ")
	assert.Contains(t, errOut, "connection refused")
	assert.Contains(t, errOut, "is edgeset-controller running?", "a failure to connect is explained as one")
}

// TestFailoverOn503ReplaysTheBody: a 503 (a standby) passes the request,
// body and all, to the next server.
func TestFailoverOn503ReplaysTheBody(t *testing.T) {
	standby, standbyHits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"standby: not the leader"}`, http.StatusServiceUnavailable)
	})
	var got string
	primary, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = r.Method + " " + r.URL.Path + " " + string(b)
		w.WriteHeader(http.StatusNoContent)
	})
	hc := newFailoverClient([]string{standby, primary}, 10*time.Second)
	req, err := http.NewRequest(http.MethodPost, standby+"/api/v1/x", strings.NewReader("payload"))
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "POST /api/v1/x payload", got)
	assert.Equal(t, int32(1), standbyHits.Load())
}

// TestFailoverAllUnavailable: every server failing, by 503 or refusal,
// yields one error naming each, that is still api.ErrUnavailable.
func TestFailoverAllUnavailable(t *testing.T) {
	standby, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"standby: not the leader"}`, http.StatusServiceUnavailable)
	})
	dead := deadServer(t)
	hc := newFailoverClient([]string{dead, standby}, 10*time.Second)
	_, err := api.NewClient(dead, "t", hc).Version(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), dead+": ")
	assert.Contains(t, err.Error(), standby+": unavailable (HTTP 503): standby: not the leader")
	assert.ErrorIs(t, err, api.ErrUnavailable)
}

// TestFailoverNeverResendsAfterConnecting: a request that got a connection
// and then failed (the server may have received it) is not sent to the
// next server, whether the connection broke or the answer timed out.
func TestFailoverNeverResendsAfterConnecting(t *testing.T) {
	next, nextHits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	release := make(chan struct{})
	hung, _ := countingServer(t, func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the request is received ...
		<-release                 // ... and never answered
	})
	t.Cleanup(func() { close(release) }) // before the server's Close

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Read(make([]byte, 1024)) // take the request, answer nothing
			conn.Close()
		}
	}()
	closing := "http://" + ln.Addr().String()

	for _, tc := range []struct{ name, first string }{{"connection closed", closing}, {"answer timed out", hung}} {
		t.Run(tc.name, func(t *testing.T) {
			hc := newFailoverClient([]string{tc.first, next}, 300*time.Millisecond)
			req, err := http.NewRequest(http.MethodPost, tc.first+"/api/v1/daemonsets", strings.NewReader("apply"))
			require.NoError(t, err)
			_, err = hc.Do(req)
			require.Error(t, err)
			var all *allServersFailed
			assert.False(t, errors.As(err, &all), "not a failover error: %v", err)
			assert.Zero(t, nextHits.Load(), "the request reached the next server")
		})
	}
}

// TestServerSetting: --server and the client config's server take one URL
// or several (comma-separated or a YAML list), trimmed and with http://
// added when no scheme is given.
func TestServerSetting(t *testing.T) {
	list := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(list, []byte("server:\n  - https://ctl-1:8443/\n  - ctl-2:8080\n"), 0o600))
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{name: "default", want: []string{defaultServer}},
		{name: "one", args: []string{"--server", "ctl:8080"}, want: []string{"http://ctl:8080"}},
		{name: "comma-separated", args: []string{"--server", "http://a:8080, b:8080/"}, want: []string{"http://a:8080", "http://b:8080"}},
		{name: "config file list", args: []string{"--client-config", list}, want: []string{"https://ctl-1:8443", "http://ctl-2:8080"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadTestClientConfig(t, tc.args...)
			assert.Equal(t, tc.want, cfg.Servers)
			assert.Equal(t, strings.Join(tc.want, ","), cfg.Server)
		})
	}

	_, err := parseServers("http://a,,http://b")
	assert.ErrorContains(t, err, "server: entry 1")
	_, err = parseServers(strings.Repeat("a,", maxServers))
	assert.ErrorContains(t, err, "at most 16")
}

// loadTestClientConfig loads the client config of a command given args,
// with no config file of the user's and no token file.
func loadTestClientConfig(t *testing.T, args ...string) clientConfig {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	cmd := &cobra.Command{Use: "edgesetctl"}
	addClientFlags(cmd.Flags())
	require.NoError(t, cmd.ParseFlags(args))
	cfg, err := loadClientConfig(cmd)
	require.NoError(t, err)
	return cfg
}
