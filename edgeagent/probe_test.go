package edgeagent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func testProber() *prober {
	return newProber(nil, func() {}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
}

func serverTarget(t *testing.T, srv *httptest.Server) (probeTarget, int) {
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(u.Host)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return probeTarget{id: "c1", host: host, ports: []schema.ContainerPort{{Name: "http", ContainerPort: int32(p)}}}, p
}

func TestHTTPProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			if r.Header.Get("X-Probe") != "yes" {
				w.WriteHeader(http.StatusBadRequest)
			}
		case "/moved":
			w.WriteHeader(http.StatusNotModified)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	target, port := serverTarget(t, srv)
	p := testProber()
	tests := []struct {
		name string
		get  schema.HTTPGetAction
		ok   bool
	}{
		{"200 by named port", schema.HTTPGetAction{Path: "/healthz", Port: schema.FromString("http"), HTTPHeaders: []schema.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}, true},
		{"3xx is success", schema.HTTPGetAction{Path: "moved", Port: schema.FromInt(int32(port))}, true},
		{"400 fails", schema.HTTPGetAction{Path: "/healthz", Port: schema.FromInt(int32(port))}, false},
		{"503 fails", schema.HTTPGetAction{Path: "/down", Port: schema.FromInt(int32(port))}, false},
		{"unknown port name", schema.HTTPGetAction{Path: "/healthz", Port: schema.FromString("metrics")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.check(context.Background(), target, withProbeDefaults(schema.Probe{HTTPGet: &tc.get, TimeoutSeconds: 5}))
			assert.Equal(t, tc.ok, err == nil, "err: %v", err)
		})
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	target := probeTarget{id: "c1", host: "127.0.0.1"}
	pr := withProbeDefaults(schema.Probe{TCPSocket: &schema.TCPSocketAction{Port: schema.FromInt(int32(port))}, TimeoutSeconds: 5})
	p := testProber()
	assert.NoError(t, p.check(context.Background(), target, pr))
	require.NoError(t, ln.Close())
	assert.Error(t, p.check(context.Background(), target, pr))
}

func TestProbeRecordThresholds(t *testing.T) {
	p := testProber()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	target := probeTarget{id: "c1", startedAt: t0}
	pr := withProbeDefaults(schema.Probe{SuccessThreshold: 2, FailureThreshold: 2})
	rk, lk := probeKey{id: "c1", kind: readiness}, probeKey{id: "c1", kind: liveness}
	p.workers[rk] = probeWorker{startedAt: t0, cancel: func() {}}
	p.workers[lk] = probeWorker{startedAt: t0, cancel: func() {}}
	p.ready["c1"] = readyState{startedAt: t0}

	p.record(rk, target, pr, 1, 0, nil)
	assert.False(t, p.isReady("c1", t0), "one success of two")
	p.record(rk, target, pr, 2, 0, nil)
	assert.True(t, p.isReady("c1", t0))
	assert.False(t, p.isReady("c1", t0.Add(time.Second)), "readiness belongs to one run")
	p.record(rk, target, pr, 0, 1, assert.AnError)
	assert.True(t, p.isReady("c1", t0), "one failure of two")
	p.record(rk, target, pr, 0, 2, assert.AnError)
	assert.False(t, p.isReady("c1", t0))

	assert.False(t, p.record(lk, target, pr, 0, 1, assert.AnError))
	assert.Empty(t, p.takeFailures())
	assert.True(t, p.record(lk, target, pr, 0, 2, assert.AnError), "worker ends at the threshold")
	f := p.takeFailures()
	require.Contains(t, f, "c1")
	assert.Equal(t, t0, f["c1"].startedAt)
	assert.Contains(t, f["c1"].message, "liveness probe failed 2 times")
}

func TestProbeDefaults(t *testing.T) {
	got := withProbeDefaults(schema.Probe{})
	assert.Equal(t, schema.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}, got)
}
