package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/ha"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/etcdtest"
)

// startHAController runs an HA controller (controller/ha) in process
// and returns its API URL.
func startHAController(t *testing.T, id, etcdEndpoint, brokerURL, dir string) string {
	url, _ := startHASupervisor(t, id, etcdEndpoint, controller.Config{DataDir: dir, BrokerURLs: []string{brokerURL}, BrokerSettleInterval: -1})
	return url
}

// startHASupervisor runs an HA controller of configuration cfg in process
// and returns its API URL and a stop that ends it (also run at cleanup).
func startHASupervisor(t *testing.T, id, etcdEndpoint string, cfg controller.Config) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	cli := etcdtest.NewClient(t, etcdEndpoint)
	sup, err := ha.New(ha.Options{
		Controller: cfg,
		Client:     cli, Prepare: ha.Replicated(cli, ha.DefaultPrefix, nil),
		ID: id, AdvertiseURL: url, LeaseTTL: 2 * time.Second, Listener: ln,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
	t.Cleanup(stop)
	return url, stop
}

func readyz(url string) string {
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestCLIThroughStandby: edgesetctl pointed at a standby HA controller
// applies and reads through it (the standby forwards to the leader), and
// with a dead server first in --server it moves on to the standby.
func TestCLIThroughStandby(t *testing.T) {
	etcd := etcdtest.Start(t)
	brokerDir := t.TempDir()
	b, err := broker.New(broker.Options{Addr: "127.0.0.1:0", DataDir: brokerDir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	brokerURL := "tcp://" + b.Addr().String()

	dir1 := t.TempDir()
	secret, err := os.ReadFile(filepath.Join(brokerDir, credential.SecretFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir1, credential.SecretFile), secret, 0o600))
	leaderURL := startHAController(t, "c1", etcd.Endpoint(), brokerURL, dir1)
	waitUntil(t, "c1 leads", func() bool { return strings.HasPrefix(readyz(leaderURL), "ok\nrole: leader (c1)") })
	standbyURL := startHAController(t, "c2", etcd.Endpoint(), brokerURL, t.TempDir())
	waitUntil(t, "c2 forwards to c1", func() bool { return strings.Contains(readyz(standbyURL), "forwarding to leader c1") })

	token := string(etcdtest.Get(t, etcd.Client(t), ha.DefaultPrefix+"/secrets/api-token"))
	c := cli{t: t, server: standbyURL, token: token}
	assert.Equal(t, "daemonset/monitoring/exporter created\n", c.ok("apply", "-f", manifest(t, "exporter:1")))
	out := c.ok("get", "daemonsets", "-A")
	assert.Contains(t, out, "exporter")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	c.server = dead + "," + standbyURL
	out = c.ok("get", "daemonsets", "-A")
	assert.Contains(t, out, "exporter", "a dead first server, then the standby")
}
