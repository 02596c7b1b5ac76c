package broker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// Environment of the idle-client benchmark.
const (
	envBenchScale   = "EDGESET_BENCH_SCALE"   // set to run BenchmarkIdleClients
	envBenchClients = "EDGESET_BENCH_CLIENTS" // clients to connect (default 5000)
	envHelper       = "EDGESET_BROKER_HELPER" // set in the broker subprocess
	envHelperDir    = "EDGESET_BROKER_DIR"    // its data dir
	envBenchPending = "EDGESET_BENCH_PENDING" // Limits.MaxPendingWrites (default: the package default)
	envBenchProfile = "EDGESET_BENCH_PROFILE" // directory for the broker's heap and goroutine profiles
)

// TestHelperBrokerProcess is not a test: BenchmarkIdleClients re-runs the
// test binary with EDGESET_BROKER_HELPER=1 so the broker lives in a process
// of its own whose memory can be read from /proc. It prints "addr HOST:PORT",
// then answers each "mem" line on stdin with "mem CONNECTED HEAP STACK
// GOROUTINES" after a full GC, and exits when stdin closes.
func TestHelperBrokerProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		t.Skip("helper process of BenchmarkIdleClients")
	}
	raiseFDLimit(t)
	if os.Getenv(envBenchProfile) != "" {
		runtime.MemProfileRate = 1 // every allocation, for an exact per-client breakdown
	}
	pending, _ := strconv.Atoi(os.Getenv(envBenchPending))
	b, err := New(Options{DataDir: os.Getenv(envHelperDir), Addr: "127.0.0.1:0",
		Limits: Limits{MaxPendingWrites: int32(pending), MaxPendingConnections: 1 << 20, // every client is on loopback
			ExemptSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	fmt.Printf("addr %s\n", b.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		// Several collections, each of which may halve a goroutine stack
		// that uses less than a quarter of it: the sample is the settled
		// cost of an idle client, not the peak of its connect.
		for range 6 {
			runtime.GC()
		}
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		writeProfiles(t, os.Getenv(envBenchProfile), b.Stats().Connected)
		fmt.Printf("mem %d %d %d %d\n", b.Stats().Connected, ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// writeProfiles writes the heap and goroutine profiles of the broker process
// into dir, named after the number of connected clients, if dir is set.
func writeProfiles(t *testing.T, dir string, connected int64) {
	if dir == "" {
		return
	}
	for _, name := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, connected)))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// brokerSample is the memory of the broker process at one moment.
type brokerSample struct {
	connected, heap, stack, goroutines, rss int64
}

// BenchmarkIdleClients measures the broker's memory per idle connected
// client. The broker runs in a subprocess; N paho clients (EDGESET_BENCH_CLIENTS,
// default 5000) connect with node tokens and subscribe to their desired
// topic, then the broker's VmRSS, Go heap and stack are compared with the
// empty broker after a full GC. It runs once whatever b.N; set
// EDGESET_BENCH_SCALE=1 to enable it:
//
//	EDGESET_BENCH_SCALE=1 go test -run '^$' -bench IdleClients -benchtime 1x ./broker/
func BenchmarkIdleClients(b *testing.B) {
	if os.Getenv(envBenchScale) == "" {
		b.Skip("set " + envBenchScale + "=1 to connect thousands of clients")
	}
	n := 5000
	if v, err := strconv.Atoi(os.Getenv(envBenchClients)); err == nil && v > 0 {
		n = v
	}
	raiseFDLimit(b)
	dir := b.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	if err != nil {
		b.Fatal(err)
	}
	h := startHelper(b, dir)
	before := h.sample(b)
	clients := connectIdle(b, h.addr, n, func(node string) string { return credential.NodeToken(secret, node) })
	after := h.sample(b)
	if after.connected < int64(n) {
		b.Fatalf("broker reports %d connected clients, want %d", after.connected, n)
	}
	per := func(a, z int64) float64 { return float64(z-a) / float64(n) / 1024 }
	b.ReportMetric(per(before.rss, after.rss), "rss-KiB/client")
	b.ReportMetric(per(before.heap, after.heap), "heap-KiB/client")
	b.ReportMetric(per(before.stack, after.stack), "stack-KiB/client")
	b.ReportMetric(float64(after.goroutines-before.goroutines)/float64(n), "goroutines/client")
	b.Logf("%d clients: broker RSS %d -> %d KiB, heap %d -> %d KiB, stacks %d -> %d KiB",
		n, before.rss>>10, after.rss>>10, before.heap>>10, after.heap>>10, before.stack>>10, after.stack>>10)
	for _, c := range clients {
		c.Disconnect(0)
	}
}

// BenchmarkIdleClientsMosquitto is BenchmarkIdleClients against Mosquitto,
// configured as edgeset configures it (password file, per-node ACL,
// persistence), for comparison: Mosquitto's VmRSS with the clients
// connected against the empty broker. Set EDGESET_BENCH_SCALE=1 to enable
// it:
//
//	EDGESET_BENCH_SCALE=1 go test -run '^$' -bench IdleClientsMosquitto -benchtime 1x ./broker/
func BenchmarkIdleClientsMosquitto(b *testing.B) {
	if os.Getenv(envBenchScale) == "" {
		b.Skip("set " + envBenchScale + "=1 to connect thousands of clients")
	}
	n := 5000
	if v, err := strconv.Atoi(os.Getenv(envBenchClients)); err == nil && v > 0 {
		n = v
	}
	raiseFDLimit(b)
	password := func(node string) string { return "pw-" + node }
	users := make(map[string]string, n)
	for i := range n {
		users[benchNode(i)] = password(benchNode(i))
	}
	srv := mosquitto.Start(b, mosquitto.Config{Users: users})
	before := vmRSS(b, srv.Pid())
	clients := connectIdle(b, srv.Addr(), n, password)
	after := vmRSS(b, srv.Pid())
	b.ReportMetric(float64(after-before)/float64(n)/1024, "rss-KiB/client")
	b.Logf("%d clients: mosquitto RSS %d -> %d KiB", n, before>>10, after>>10)
	for _, c := range clients {
		c.Disconnect(0)
	}
}

// helper is the broker subprocess.
type helper struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
}

// startHelper starts the broker subprocess on dataDir and reads its address.
func startHelper(b *testing.B, dataDir string) *helper {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBrokerProcess$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), envHelper+"=1", envHelperDir+"="+dataDir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	h := &helper{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	b.Cleanup(func() {
		h.in.Close()
		for h.out.Scan() { // drain so the child can exit
		}
		if err := h.cmd.Wait(); err != nil {
			b.Errorf("broker subprocess: %v", err)
		}
	})
	h.addr = strings.TrimPrefix(h.line(b, "addr "), "addr ")
	return h
}

// line returns the next output line of the helper that starts with prefix.
func (h *helper) line(b *testing.B, prefix string) string {
	for h.out.Scan() {
		if l := h.out.Text(); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	b.Fatalf("broker subprocess ended before printing %q: %v", prefix, h.out.Err())
	return ""
}

// sample asks the helper for its memory after a GC and reads its VmRSS.
func (h *helper) sample(b *testing.B) brokerSample {
	if _, err := fmt.Fprintln(h.in, "mem"); err != nil {
		b.Fatal(err)
	}
	var s brokerSample
	if _, err := fmt.Sscanf(h.line(b, "mem "), "mem %d %d %d %d", &s.connected, &s.heap, &s.stack, &s.goroutines); err != nil {
		b.Fatal(err)
	}
	s.rss = vmRSS(b, h.cmd.Process.Pid)
	return s
}

// vmRSS returns the resident set size of process pid in bytes.
func vmRSS(b *testing.B, pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc status")
	return 0
}

// benchNode is the name of the i-th benchmark client.
func benchNode(i int) string { return fmt.Sprintf("bench-%05d", i) }

// connectIdle connects n node clients (benchNode names, password from
// password) to addr, each subscribed to its desired topic, using a few
// parallel dialers.
func connectIdle(b *testing.B, addr string, n int, password func(node string) string) []paho.Client {
	clients := make([]paho.Client, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	const dialers = 16
	for w := range dialers {
		wg.Go(func() {
			for i := w; i < n; i += dialers {
				node := benchNode(i)
				c, err := connectNode(addr, node, password(node))
				if err != nil {
					errs <- err
					return
				}
				clients[i] = c
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return clients
}

// connectNode connects and subscribes one idle node.
func connectNode(addr, node, password string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(node).
		SetUsername(node).SetPassword(password).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(false).SetKeepAlive(5 * time.Minute).
		SetConnectTimeout(30 * time.Second)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("connect %s: %v", node, tok.Error())
	}
	tok := c.Subscribe(schema.NodeTopic(node, schema.TopicDesired), 1, func(paho.Client, paho.Message) {})
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("subscribe %s: %v", node, tok.Error())
	}
	return c, nil
}

// raiseFDLimit raises the soft open-file limit to the hard one.
func raiseFDLimit(tb testing.TB) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
}
