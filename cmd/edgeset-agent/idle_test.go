package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// countingProxy forwards TCP connections to a target and counts the bytes
// (and reads, roughly the packets) in each direction.
type countingProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	up, down           atomic.Int64 // bytes agent->broker, broker->agent
	upReads, downReads atomic.Int64
}

func startProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &countingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

func (p *countingProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *countingProxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() { pipe(server, client, &p.up, &p.upReads); done <- struct{}{} }()
	go func() { pipe(client, server, &p.down, &p.downReads); done <- struct{}{} }()
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
}

// pipe copies src to dst, counting bytes and reads, until either side fails.
func pipe(dst, src net.Conn, bytes, reads *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			bytes.Add(int64(n))
			reads.Add(1)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *countingProxy) snapshot() [4]int64 {
	return [4]int64{p.up.Load(), p.down.Load(), p.upReads.Load(), p.downReads.Load()}
}

func envDuration(t *testing.T, key string, def time.Duration) time.Duration {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, key)
	return d
}

// TestIdleTraffic measures the MQTT bytes an idle agent (fake runtime, no
// daemons) exchanges with its broker, through a counting proxy. It runs only
// with EDGESET_BENCH_IDLE=1; EDGESET_BENCH_IDLE_WINDOW (default 3m),
// EDGESET_BENCH_IDLE_KEEPALIVE (default 60s) and
// EDGESET_BENCH_IDLE_SETTLE (default 10s) tune it. It reports figures and
// asserts nothing about them.
func TestIdleTraffic(t *testing.T) {
	if os.Getenv("EDGESET_BENCH_IDLE") != "1" {
		t.Skip("set EDGESET_BENCH_IDLE=1 to measure idle traffic (takes minutes)")
	}
	window := envDuration(t, "EDGESET_BENCH_IDLE_WINDOW", 3*time.Minute)
	keepalive := envDuration(t, "EDGESET_BENCH_IDLE_KEEPALIVE", 60*time.Second)
	settle := envDuration(t, "EDGESET_BENCH_IDLE_SETTLE", 10*time.Second)
	const node = "idle-1"
	addr, secret := startBroker(t)
	w := watchNode(t, addr, secret, node)
	proxy := startProxy(t, addr)
	stop := runAgent(t, io.Discard,
		"--node-name", node, "--broker-url", "tcp://"+proxy.ln.Addr().String(), "--token", credential.NodeToken(secret, node),
		"--runtime", "fake", "--data-dir", t.TempDir(), "--keepalive", keepalive.String(), "--log-level", "warn")

	checkfor.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		p, err := w.presence(node)
		if err == nil && !p.Online {
			err = errors.New("offline")
		}
		return err
	})
	time.Sleep(settle) // let the connection's start-up exchange finish
	before := proxy.snapshot()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	<-ctx.Done()
	elapsed := time.Since(start)
	after := proxy.snapshot()
	require.NoError(t, stop())

	up, down := after[0]-before[0], after[1]-before[1]
	perMin := float64(up+down) / elapsed.Minutes()
	report := fmt.Sprintf("idle agent, keepalive %s, window %s: %d B agent->broker (%d reads), %d B broker->agent (%d reads), %.1f B/min of MQTT payload",
		keepalive, elapsed.Round(time.Second), up, after[2]-before[2], down, after[3]-before[3], perMin)
	t.Log(report)
	fmt.Println(report)
}
