// Package etcdtest runs a real, embedded, single-member etcd for tests, and a
// TCP proxy in front of it that a test can cut to partition one client from
// etcd while the others still reach it.
//
// The server listens on loopback ports chosen by the kernel, keeps its data
// in t.TempDir() and logs only errors, to the test's log. Its raft ticks are short (10 ms
// heartbeat, 100 ms election), which lowers etcd's minimum lease TTL to one
// second, so tests can use leases of 1-2 s.
package etcdtest

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// readyTimeout bounds how long Start waits for the server to serve.
const readyTimeout = 30 * time.Second

// Server is one embedded etcd member, stopped when the test ends.
type Server struct {
	etcd *embed.Etcd
}

// Start starts an embedded etcd and registers its shutdown with t.Cleanup.
// It fails the test when etcd does not start or does not become ready.
func Start(t testing.TB) *Server {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"
	logs := &testLog{t: t}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.AddSync(logs), zapcore.ErrorLevel)))
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcdtest: start etcd in %s: %v", cfg.Dir, err)
	}
	t.Cleanup(func() {
		logs.mute() // shutting down logs errors of its own closed listeners
		e.Close()
	})
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(readyTimeout):
		t.Fatalf("etcdtest: etcd in %s not ready within %s", cfg.Dir, readyTimeout)
	case err := <-e.Err():
		t.Fatalf("etcdtest: etcd in %s: %v", cfg.Dir, err)
	}
	return &Server{etcd: e}
}

// testLog writes etcd's error logs to the test's log (shown when a test
// fails, or with -v) until muted.
type testLog struct {
	t     testing.TB
	mu    sync.Mutex // guards muted
	muted bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.muted {
		l.t.Logf("etcd: %s", p)
	}
	return len(p), nil
}

func (l *testLog) mute() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.muted = true
}

// Endpoint is the server's client address, host:port on loopback.
func (s *Server) Endpoint() string {
	return s.etcd.Clients[0].Addr().String()
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, s.Endpoint())
}

// NewClient returns a client of the etcd at endpoint (the server's, or a
// Proxy's), closed when the test ends. It dials lazily, so it succeeds even
// when the endpoint is cut, and redials within half a second (not gRPC's
// default of up to two minutes), so a test sees a healed partition soon.
func NewClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		t.Fatalf("etcdtest: client of %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Get reads key from etcd for a test's assertion, failing the test on error.
// It returns nil when the key does not exist.
func Get(t testing.TB, cli *clientv3.Client, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("etcdtest: get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	return resp.Kvs[0].Value
}
