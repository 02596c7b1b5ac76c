package broker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// fakeClock is a settable clock for the gate and the log limiter.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// idleConn opens a TCP connection to addr that never sends CONNECT.
func idleConn(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr.String(), wait)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// closedByServer waits up to wait for the server to close conn and returns
// an error if it is still open then.
func closedByServer(conn net.Conn) error {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	var buf [1]byte
	_, err := conn.Read(buf[:])
	var ne net.Error
	switch {
	case err == nil:
		return errors.New("server sent data instead of closing")
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("connection from %s still open after %v", conn.LocalAddr(), wait)
	}
	return nil // EOF or reset: closed
}

// pendingIs polls until the broker counts n pending connections.
func pendingIs(tb *testBroker, n int) func() error {
	return func() error {
		if got, _ := tb.gate.counts(); got != n {
			return fmt.Errorf("pending connections = %d, want %d", got, n)
		}
		return nil
	}
}

// counter reads a broker counter.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestConnectTimeoutClosesIdleConnections: 300 connections that never send
// CONNECT are closed once the connect timeout passes and counted; a client
// that authenticated before is not, and a new client connects afterwards.
func TestConnectTimeoutClosesIdleConnections(t *testing.T) {
	const idle = 300
	tb := startBroker(t, Options{Limits: Limits{ConnectTimeout: 300 * time.Millisecond,
		MaxPendingConnections: 2 * idle, MaxConnectionsPerSource: 2 * idle}})
	early := mustDial(t, tb.Addr(), tb.node("node-early"))

	conns := make([]net.Conn, idle)
	for i := range conns {
		conns[i] = idleConn(t, tb.Addr())
	}
	for i, conn := range conns {
		if err := closedByServer(conn); err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, pendingIs(tb, 0))
	if got := counter(t, tb.metrics.connectTimeout); got != idle {
		t.Errorf("edgeset_broker_connect_timeouts_total = %v, want %d", got, idle)
	}
	// Every idle connection outlived the timeout; the authenticated one,
	// older still, is served.
	if !early.IsConnectionOpen() {
		t.Error("an authenticated client was closed by the connect timeout")
	}
	publish(t, early, "edgeset/v1/nodes/node-early/events", 1, false, "still here")
	mustDial(t, tb.Addr(), tb.node("node-late"))
}

// TestConnectTimeoutCoversTLSHandshake: a connection to the TLS listener
// that never starts its handshake is closed by the connect timeout too.
func TestConnectTimeoutCoversTLSHandshake(t *testing.T) {
	certFile, keyFile := writePEM(t, t.TempDir(), newTestCA(t, "edgeset test CA").issue(t, "broker", true))
	tb := startBroker(t, Options{TLSAddr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile,
		Limits: Limits{ConnectTimeout: 200 * time.Millisecond}})
	if err := closedByServer(idleConn(t, tb.TLSAddr())); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, pendingIs(tb, 0))
}

// TestPendingConnectionCap: past MaxPendingConnections connections that
// have not authenticated, new ones are closed at accept and counted; once
// the pending ones go, clients connect again.
func TestPendingConnectionCap(t *testing.T) {
	const limit = 5
	tb := startBroker(t, Options{Limits: Limits{MaxPendingConnections: limit, ConnectTimeout: time.Hour}})
	var pending []net.Conn
	for range limit {
		pending = append(pending, idleConn(t, tb.Addr()))
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, pendingIs(tb, limit))
	if err := closedByServer(idleConn(t, tb.Addr())); err != nil {
		t.Fatalf("connection past the pending cap: %v", err)
	}
	if _, err := dial(t, tb.Addr(), tb.node("node-a")); err == nil {
		t.Error("a client connected past the pending cap")
	}
	if got := counter(t, tb.metrics.refused.WithLabelValues(refusedPending)); got != 2 {
		t.Errorf(`connections_refused_total{reason="pending_limit"} = %v, want 2`, got)
	}
	for _, c := range pending {
		_ = c.Close()
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, pendingIs(tb, 0))
	mustDial(t, tb.Addr(), tb.node("node-a"))
}

// TestConnectionsPerSourceCap: one address holds at most
// MaxConnectionsPerSource connections, authenticated or not; ExemptSources
// lifts the cap.
func TestConnectionsPerSourceCap(t *testing.T) {
	tb := startBroker(t, Options{Limits: Limits{MaxConnectionsPerSource: 3}})
	mustDial(t, tb.Addr(), tb.node("node-a"))
	mustDial(t, tb.Addr(), tb.node("node-b"))
	idleConn(t, tb.Addr())
	checkfor.Eventually(t, wait, 10*time.Millisecond, pendingIs(tb, 1))
	if _, err := dial(t, tb.Addr(), tb.node("node-c")); err == nil {
		t.Fatal("a fourth connection from one address was accepted")
	}
	if got := counter(t, tb.metrics.refused.WithLabelValues(refusedSource)); got != 1 {
		t.Errorf(`connections_refused_total{reason="source_limit"} = %v, want 1`, got)
	}

	exempt := startBroker(t, Options{Limits: Limits{MaxConnectionsPerSource: 1,
		ExemptSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		mustDial(t, exempt.Addr(), exempt.node(n))
	}
}

// TestAuthFailuresBackOff: failed logins are counted by reason; after
// AuthFailureLimit of them within the window the source is refused at
// accept, even with good credentials, until the back-off ends.
func TestAuthFailuresBackOff(t *testing.T) {
	clock := newFakeClock()
	tb := startBroker(t, Options{now: clock.Now, Limits: Limits{AuthFailureLimit: 3,
		AuthFailureWindow: time.Minute, AuthFailureBackoff: 5 * time.Minute}})
	bad := tb.node("node-a")
	bad.pass = "wrong"
	for i := range 2 {
		if _, err := dial(t, tb.Addr(), bad); err == nil {
			t.Fatalf("attempt %d: wrong password accepted", i)
		}
	}
	// The window ends: the two failures no longer count.
	clock.Advance(time.Minute)
	for i := range 2 {
		if _, err := dial(t, tb.Addr(), bad); err == nil {
			t.Fatalf("attempt %d: wrong password accepted", i)
		}
	}
	mustDial(t, tb.Addr(), tb.node("node-b"))
	anonymous := client{id: "x"}
	if _, err := dial(t, tb.Addr(), anonymous); err == nil {
		t.Fatal("anonymous client accepted")
	}
	if got := counter(t, tb.metrics.authFailures.WithLabelValues("bad_password")); got != 4 {
		t.Errorf(`auth_failures_total{reason="bad_password"} = %v, want 4`, got)
	}
	if got := counter(t, tb.metrics.authFailures.WithLabelValues("anonymous")); got != 1 {
		t.Errorf(`auth_failures_total{reason="anonymous"} = %v, want 1`, got)
	}
	// Third failure in the window: good credentials are refused now.
	if _, err := dial(t, tb.Addr(), tb.node("node-c")); err == nil {
		t.Fatal("a source past its failed-login limit connected")
	}
	if got := counter(t, tb.metrics.refused.WithLabelValues(refusedBackoff)); got != 1 {
		t.Errorf(`connections_refused_total{reason="auth_backoff"} = %v, want 1`, got)
	}
	clock.Advance(5 * time.Minute)
	mustDial(t, tb.Addr(), tb.node("node-c"))
}

// TestFailedLoginLogIsLimited: a flood of failed logins from one source is
// one warning per LogInterval, the next one saying how many were
// suppressed.
func TestFailedLoginLogIsLimited(t *testing.T) {
	clock := newFakeClock()
	logs := &logRecorder{}
	tb := startBroker(t, Options{now: clock.Now, Logger: slog.New(logs),
		Limits: Limits{AuthFailureLimit: 1000, LogInterval: time.Minute}})
	bad := tb.node("node-a")
	bad.pass = "wrong"
	for range 20 {
		if _, err := dial(t, tb.Addr(), bad); err == nil {
			t.Fatal("wrong password accepted")
		}
	}
	if got := logs.matching(`WARN "connection refused"`); len(got) != 1 {
		t.Fatalf("want one refusal logged for 20 failed logins, got %d: %q", len(got), got)
	}
	clock.Advance(time.Minute)
	if _, err := dial(t, tb.Addr(), bad); err == nil {
		t.Fatal("wrong password accepted")
	}
	got := logs.matching(`WARN "connection refused"`)
	if len(got) != 2 || !strings.Contains(got[1], "suppressed=19") {
		t.Errorf("want a second refusal saying suppressed=19, got %q", got)
	}
	if got := tb.Stats().AuthFailures; got != 21 {
		t.Errorf("Stats().AuthFailures = %d, want 21", got)
	}
}

// fdListener is a net.Listener whose Accept fails with EMFILE while
// exhausted is set.
type fdListener struct {
	net.Listener
	mu        sync.Mutex
	exhausted bool // guarded by mu
	failures  int  // guarded by mu
}

func (l *fdListener) set(exhausted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exhausted = exhausted
}

func (l *fdListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.exhausted {
		l.failures++
		l.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestRetryListenerSurvivesEMFILE: Accept failing with EMFILE is retried
// with a back-off and reported; once descriptors are free again the next
// connection is accepted and the fault is cleared. Close ends a waiting
// Accept.
func TestRetryListenerSurvivesEMFILE(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &fdListener{Listener: raw, exhausted: true}
	var health listenerHealth
	var mu sync.Mutex
	var delays []time.Duration
	ln := newRetryListener(fake, func(err error, d time.Duration) {
		health.set("tcp", err)
		mu.Lock()
		delays = append(delays, d)
		mu.Unlock()
	}, func() { health.set("tcp", nil) })
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			t.Errorf("Accept: %v", err)
		}
		accepted <- conn
	}()
	checkfor.Eventually(t, wait, time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(delays) < 4 {
			return fmt.Errorf("%d accept errors so far", len(delays))
		}
		return nil
	})
	if err := health.err(); err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Errorf("health while EMFILE = %v, want the accept error", err)
	}
	fake.set(false)
	client := idleConn(t, raw.Addr())
	conn := <-accepted
	defer conn.Close()
	if conn.RemoteAddr().String() != client.LocalAddr().String() {
		t.Errorf("accepted %s, want %s", conn.RemoteAddr(), client.LocalAddr())
	}
	if err := health.err(); err != nil {
		t.Errorf("health after recovery = %v, want nil", err)
	}
	mu.Lock()
	for i, d := range delays {
		want := min(minAcceptDelay<<i, maxAcceptDelay)
		if d != want {
			t.Errorf("delay %d = %v, want %v", i, d, want)
		}
	}
	before := len(delays)
	mu.Unlock()

	fake.set(true)
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	checkfor.Eventually(t, wait, time.Millisecond, func() error {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		if fake.failures <= before {
			return errors.New("no new accept error yet")
		}
		return nil
	})
	_ = ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
}

// TestHealthReportsStoppedListener: a listener whose accept loop ends
// while the broker is running is a fault Health reports; the others still
// serve.
func TestHealthReportsStoppedListener(t *testing.T) {
	tb := startBroker(t, Options{})
	<-tb.Ready()
	tb.serving.Add(1)
	joined{stoppedListener{}, tb.Broker}.Serve(nil)
	if err := tb.Health(); err == nil || !strings.Contains(err.Error(), "listener gone: stopped accepting connections") {
		t.Errorf("Health = %v, want the stopped listener's fault", err)
	}
	mustDial(t, tb.Addr(), tb.node("node-a"))
}

// stoppedListener is a mochi listener whose accept loop ends at once.
type stoppedListener struct{ listeners.Listener }

func (stoppedListener) ID() string                            { return "gone" }
func (stoppedListener) Address() string                       { return "nowhere" }
func (stoppedListener) Serve(establish listeners.EstablishFn) {}

// TestWebSocketAddressTaken: a WebSocket address that cannot be bound fails
// New, naming the listener, instead of a listener that silently never
// serves.
func TestWebSocketAddressTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, err = New(Options{DataDir: t.TempDir(), Addr: "127.0.0.1:0", WebSocketAddr: taken.Addr().String(),
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "listen ws on "+taken.Addr().String()) {
		t.Errorf("New = %v, want an error naming the ws listener and its address", err)
	}
}

// envFDChild runs TestListenerSurvivesFDExhaustion's child.
const envFDChild = "EDGESET_TEST_FD_CHILD"

// TestListenerSurvivesFDExhaustion runs a broker in a child process with a
// low RLIMIT_NOFILE and uses up its descriptors: the listener reports the
// failure in Health and a metric, keeps retrying, and accepts again once
// descriptors are released; a real client then connects.
func TestListenerSurvivesFDExhaustion(t *testing.T) {
	if os.Getenv(envFDChild) == "" {
		out, err := runChild(t, "^TestListenerSurvivesFDExhaustion$", envFDChild+"=1")
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if !strings.Contains(out, "fd exhaustion survived") {
			t.Fatalf("child did not finish:\n%s", out)
		}
		return
	}
	fdExhaustionChild(t)
}

// fdExhaustionChild is the child of TestListenerSurvivesFDExhaustion.
func fdExhaustionChild(t *testing.T) {
	lowerFDLimit(t, 256)
	tb := startBroker(t, Options{Limits: Limits{ConnectTimeout: time.Hour}})
	<-tb.Ready()
	// Take every free descriptor, then free one for a client socket: the
	// broker's accept has none left.
	var files []*os.File
	for range 1024 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		files = append(files, f)
	}
	if len(files) == 0 || len(files) == 1024 {
		t.Fatalf("opened %d files under a limit of 256", len(files))
	}
	_ = files[len(files)-1].Close()
	files = files[:len(files)-1]
	conn, err := net.Dial("tcp", tb.Addr().String())
	if err != nil {
		t.Fatalf("dial with one free descriptor: %v", err)
	}
	defer conn.Close()
	checkfor.Eventually(t, wait, 5*time.Millisecond, func() error {
		if tb.Health() == nil {
			return errors.New("Health is nil while accept fails")
		}
		return nil
	})
	if got := counter(t, tb.metrics.acceptErrors.WithLabelValues(listenerTCP)); got < 1 {
		t.Errorf("accept_errors_total = %v, want at least 1", got)
	}
	t.Logf("health while exhausted: %v", tb.Health())
	for _, f := range files {
		_ = f.Close()
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error { return tb.Health() })
	mustDial(t, tb.Addr(), tb.node("node-a"))
	fmt.Println("fd exhaustion survived")
}

// lowerFDLimit sets this process's RLIMIT_NOFILE soft limit to n.
func lowerFDLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
}

// runChild runs this test binary on the tests matching run with env added
// and returns its output.
func runChild(t *testing.T, run string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestWebSocketConnectTimeout: a WebSocket client that upgrades but never
// sends CONNECT is closed by the connect timeout and counted as pending
// meanwhile, like a TCP one; so is a connection that never finishes its
// upgrade request.
func TestWebSocketConnectTimeout(t *testing.T) {
	tb := startBroker(t, Options{Addr: "127.0.0.1:0", WebSocketAddr: "127.0.0.1:0",
		Limits: Limits{ConnectTimeout: 300 * time.Millisecond}})
	<-tb.Ready()
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: wait}
	ws, _, err := d.Dial("ws://"+tb.WebSocketAddr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	checkfor.Eventually(t, wait, 5*time.Millisecond, pendingIs(tb, 1))
	_ = ws.SetReadDeadline(time.Now().Add(wait))
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Fatal("server sent a message instead of closing")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("WebSocket connection still open after %v", wait)
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, pendingIs(tb, 0))
	if got := counter(t, tb.metrics.connectTimeout); got != 1 {
		t.Errorf("connect_timeouts_total = %v, want 1", got)
	}

	slow := idleConn(t, tb.WebSocketAddr())
	if _, err := slow.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := closedByServer(slow); err != nil {
		t.Fatalf("unfinished upgrade request: %v", err)
	}
}

// TestWebSocketServesMQTT: a node connects over MQTT-over-WebSocket,
// subscribes to its desired state and publishes its status.
func TestWebSocketServesMQTT(t *testing.T) {
	tb := startBroker(t, Options{Addr: "127.0.0.1:0", WebSocketAddr: "127.0.0.1:0"})
	<-tb.Ready()
	ctl := mustDial(t, tb.Addr(), tb.controller())
	var status inbox
	subscribe(t, ctl, "edgeset/v1/nodes/+/status", &status)

	c := tb.node("node-ws")
	o := paho.NewClientOptions().AddBroker("ws://" + tb.WebSocketAddr().String() + "/").
		SetClientID(c.id).SetUsername(c.user).SetPassword(c.pass).SetProtocolVersion(4).
		SetAutoReconnect(false).SetConnectTimeout(wait)
	node := paho.NewClient(o)
	if tok := node.Connect(); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("connect over WebSocket: %v", tok.Error())
	}
	defer node.Disconnect(0)
	var desired inbox
	subscribe(t, node, "edgeset/v1/nodes/node-ws/desired", &desired)
	publish(t, ctl, "edgeset/v1/nodes/node-ws/desired", 1, true, "spec")
	checkfor.Eventually(t, wait, 10*time.Millisecond, desired.has("edgeset/v1/nodes/node-ws/desired", "spec"))
	publish(t, node, "edgeset/v1/nodes/node-ws/status", 1, true, strings.Repeat("s", 100_000))
	checkfor.Eventually(t, wait, 10*time.Millisecond, status.has("edgeset/v1/nodes/node-ws/status", strings.Repeat("s", 100_000)))
}

// TestWebSocketBeforeUpgradeBounded: the WebSocket listener's HTTP server
// answers anything but an upgrade and closes the connection (it kept it
// alive with no idle timeout: a GET without upgrade headers held a file
// descriptor for good, outside every cap), and the connections that have
// not completed their upgrade are bounded by MaxPendingConnections, the
// next one closed at accept and counted, as on the TCP listener.
func TestWebSocketBeforeUpgradeBounded(t *testing.T) {
	tb := startBroker(t, Options{Addr: "127.0.0.1:0", WebSocketAddr: "127.0.0.1:0",
		Limits: Limits{ConnectTimeout: 3 * wait, MaxPendingConnections: 2}})
	<-tb.Ready()

	plain := idleConn(t, tb.WebSocketAddr())
	if _, err := plain.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = plain.SetReadDeadline(time.Now().Add(wait))
	if _, err := io.ReadAll(plain); err != nil {
		t.Fatalf("a request that is not an upgrade: connection not closed after its answer: %v", err)
	}

	held := []net.Conn{idleConn(t, tb.WebSocketAddr()), idleConn(t, tb.WebSocketAddr())}
	checkfor.Eventually(t, wait, 5*time.Millisecond, func() error {
		third := idleConn(t, tb.WebSocketAddr())
		defer third.Close()
		_ = third.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := third.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			return fmt.Errorf("a third connection before its upgrade is served (err %v)", err)
		}
		return nil
	})
	if got := counter(t, tb.metrics.refused.WithLabelValues(refusedPending)); got < 1 {
		t.Errorf("connections_refused_total{reason=pending_limit} = %v, want at least 1", got)
	}
	for _, c := range held {
		_ = c.Close()
	}
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: wait}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		ws, _, err := d.Dial("ws://"+tb.WebSocketAddr().String()+"/", nil)
		if err != nil {
			return err
		}
		return ws.Close()
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
