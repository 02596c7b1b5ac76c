package mosquitto_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// BenchmarkIdleClientsMosquitto is broker.BenchmarkIdleClients against
// Mosquitto, configured as edgeset configures it (password file, per-node
// ACL, persistence): N node clients connect with their own passwords and
// subscribe to their desired topic at QoS 1, and Mosquitto's VmRSS is
// compared with that of the empty broker. It runs once whatever b.N; set
// EDGESET_BENCH_SCALE=1 to enable it (EDGESET_BENCH_CLIENTS, default 5000):
//
//	EDGESET_BENCH_SCALE=1 go test -run '^$' -bench IdleClientsMosquitto -benchtime 1x ./test/mosquitto/
func BenchmarkIdleClientsMosquitto(b *testing.B) {
	if os.Getenv("EDGESET_BENCH_SCALE") == "" {
		b.Skip("set EDGESET_BENCH_SCALE=1 to connect thousands of clients")
	}
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("EDGESET_BENCH_CLIENTS")); err == nil && v > 0 {
		n = v
	}
	raiseFDLimit(b)
	users := make(map[string]string, n)
	for i := range n {
		users[benchNode(i)] = "pw-" + benchNode(i)
	}
	srv := mosquitto.Start(b, mosquitto.Config{Users: users})
	before := vmRSS(b, srv.Pid())
	clients := connectIdle(b, srv.Addr(), n)
	after := vmRSS(b, srv.Pid())
	b.ReportMetric(float64(after-before)/float64(n)/1024, "rss-KiB/client")
	b.Logf("%d clients: mosquitto RSS %d -> %d KiB", n, before>>10, after>>10)
	for _, c := range clients {
		c.Disconnect(0)
	}
}

func benchNode(i int) string { return fmt.Sprintf("bench-%05d", i) }

// connectIdle connects n node clients to addr, each subscribed to its desired
// topic, using a few parallel dialers.
func connectIdle(b *testing.B, addr string, n int) []paho.Client {
	clients := make([]paho.Client, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	const dialers = 16
	for w := range dialers {
		wg.Go(func() {
			for i := w; i < n; i += dialers {
				c, err := connectNode(addr, benchNode(i))
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
func connectNode(addr, node string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(node).
		SetUsername(node).SetPassword("pw-" + node).SetProtocolVersion(4).
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

// vmRSS returns the resident set size of process pid in bytes.
func vmRSS(b *testing.B, pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
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
