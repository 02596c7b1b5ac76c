// Package fds is the full file-descriptor exhaustion case of issue 13
// (make fault-fds): 20,000 idle TCP connections to the MQTT port of a
// controller limited to 20,000 files, opened from separate processes. It
// shows that a genuine node still connects and that /readyz reflects the
// listener's state. It runs only with EDGESET_FAULT_FDS=1.
package fds

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller"
)

// Environment of the test and of its child processes.
const (
	envRun    = "EDGESET_FAULT_FDS"       // 1: run TestFaultFDs
	envConns  = "EDGESET_FAULT_FDS_CONNS" // idle connections (default 20000)
	envRole   = "EDGESET_FDS_ROLE"        // controller or attacker
	envConfig = "EDGESET_FDS_CONFIG"      // controller: JSON of controller.Config
	envTarget = "EDGESET_FDS_TARGET"      // attacker: MQTT address
	envCount  = "EDGESET_FDS_COUNT"       // attacker: connections to open
	envSource = "EDGESET_FDS_SOURCE"      // attacker: local IP address
)

// controllerFiles is the controller's RLIMIT_NOFILE, as in the report.
const controllerFiles = 20_000

// Bounds of every wait: generous, the machine is shared.
const (
	attackWait  = 5 * time.Minute
	recoverWait = 3 * time.Minute
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "controller":
		os.Exit(runController())
	case "attacker":
		os.Exit(runAttacker())
	}
	os.Exit(m.Run())
}

// TestFaultFDs runs the attack twice: with the default limits (the caps
// refuse most connections at accept; descriptors never run out) and with
// the caps raised so the descriptors do run out (accept fails with EMFILE,
// /readyz turns 503, the connect timeout frees them, the listener accepts
// again).
func TestFaultFDs(t *testing.T) {
	if os.Getenv(envRun) == "" {
		t.Skip("the 20,000-connection case; run with make fault-fds")
	}
	total := 20_000
	if v := os.Getenv(envConns); v != "" {
		var err error
		if total, err = strconv.Atoi(v); err != nil {
			t.Fatalf("%s: %v", envConns, err)
		}
	}
	t.Run("default limits", func(t *testing.T) {
		attack(t, total, "127.0.0.1", controller.Config{})
	})
	t.Run("caps raised, descriptors exhausted", func(t *testing.T) {
		attack(t, total, "127.0.0.3", controller.Config{MQTTConnectTimeout: time.Minute,
			MQTTMaxPendingConnections: 1 << 20, MQTTMaxConnectionsPerSource: 1 << 20})
	})
}

// attack starts a controller with cfg, opens total idle connections from
// source in two attacker processes, and checks a genuine node from another
// address connects and /readyz follows the listener.
func attack(t *testing.T, total int, source string, cfg controller.Config) {
	cfg.DataDir = t.TempDir()
	ctl := startChild(t, "controller", envConfig+"="+mustJSON(t, cfg))
	ready := ctl.line(t, "ready ", time.Minute)
	fields := parseFields(ready)
	mqttAddr, apiAddr := fields["mqtt"], fields["api"]
	api := &apiClient{base: "http://" + apiAddr,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}}
	if code, body := api.readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before the attack = %d %s", code, body)
	}
	secret, err := broker.LoadOrCreateFleetSecret(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var attackers []*child
	for i := range 2 {
		n := total / 2
		if i == 1 {
			n = total - total/2
		}
		attackers = append(attackers, startChild(t, "attacker", envTarget+"="+mqttAddr,
			envCount+"="+strconv.Itoa(n), envSource+"="+source))
	}
	opened, failed := 0, 0
	for _, a := range attackers {
		f := parseFields(a.line(t, "opened ", attackWait))
		o, _ := strconv.Atoi(f["opened"])
		e, _ := strconv.Atoi(f["failed"])
		opened, failed = opened+o, failed+e
	}
	t.Logf("attack: %d connections opened, %d failed, in %v", opened, failed, time.Since(start).Round(time.Millisecond))

	sawUnready := false
	code, body := api.readyz()
	t.Logf("/readyz during the attack: %d %s", code, strings.TrimSpace(body))
	if code != http.StatusOK {
		sawUnready = true
	}
	t.Logf("metrics during the attack: %s", api.brokerMetrics())

	node := "node-genuine"
	connectStart := time.Now()
	attempts := 0
	deadline := time.Now().Add(recoverWait)
	for {
		attempts++
		err := connectNode(mqttAddr, node, broker.NodeToken(secret, node))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a genuine node never connected in %v (%d attempts): %v", recoverWait, attempts, err)
		}
		if code, body := api.readyz(); code != http.StatusOK {
			sawUnready = true
			t.Logf("/readyz while the node cannot connect: %d %s", code, strings.TrimSpace(body))
		}
	}
	t.Logf("genuine node connected after %v, %d attempt(s)", time.Since(connectStart).Round(time.Millisecond), attempts)
	checkReady(t, api)
	t.Logf("metrics after: %s", api.brokerMetrics())
	if exhausts := cfg.MQTTMaxConnectionsPerSource > 0 && total >= controllerFiles; exhausts && !sawUnready {
		t.Errorf("descriptors were exhausted but /readyz never reported it")
	}
	for _, a := range attackers {
		a.stop(t)
	}
	ctl.stop(t)
}

// checkReady polls /readyz until it is 200.
func checkReady(t *testing.T, api *apiClient) {
	t.Helper()
	deadline := time.Now().Add(recoverWait)
	for {
		code, body := api.readyz()
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %s after %v", code, body, recoverWait)
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a bounded loop
	}
}

// connectNode connects and disconnects a node from 127.0.0.2, an address
// none of the attackers uses.
func connectNode(addr, node, token string) error {
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(node).SetUsername(node).SetPassword(token).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second).
		SetCustomOpenConnectionFn(func(uri *url.URL, _ paho.ClientOptions) (net.Conn, error) {
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			return d.Dial("tcp", uri.Host)
		})
	cl := paho.NewClient(o)
	tok := cl.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		return errors.New("connect timed out")
	}
	if err := tok.Error(); err != nil {
		return err
	}
	cl.Disconnect(0)
	return nil
}

// apiClient reads the controller's /readyz and /metrics over kept-alive
// connections, which need no new descriptor while the controller has none.
type apiClient struct {
	base string
	http *http.Client
}

func (a *apiClient) get(path string) (int, string) {
	resp, err := a.http.Get(a.base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (a *apiClient) readyz() (int, string) { return a.get("/readyz") }

var brokerMetric = regexp.MustCompile(`(?m)^edgeset_broker_(accept_errors|connections_refused|connect_timeouts|auth_failures|pending_connections)[^ ]* [0-9.e+]+$`)

// brokerMetrics returns the broker's connection metrics, one line.
func (a *apiClient) brokerMetrics() string {
	code, body := a.get("/metrics")
	if code != http.StatusOK {
		return fmt.Sprintf("(/metrics: %d %s)", code, body)
	}
	return strings.Join(brokerMetric.FindAllString(body, -1), "; ")
}

// runController is the controller child: RLIMIT_NOFILE controllerFiles,
// the config of envConfig, a "ready" line, until stdin closes.
func runController() int {
	if err := setFileLimit(controllerFiles); err != nil {
		fmt.Println("error", err)
		return 1
	}
	var cfg controller.Config
	if err := json.Unmarshal([]byte(os.Getenv(envConfig)), &cfg); err != nil {
		fmt.Println("error", err)
		return 1
	}
	cfg.MQTTAddr, cfg.APIAddr = "127.0.0.1:0", "127.0.0.1:0"
	c, err := controller.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-c.Synced()
	fmt.Printf("ready mqtt=%s api=%s\n", c.MQTTAddr(), c.APIAddr())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	if err := <-done; err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// runAttacker is an attacker child: it opens envCount idle connections to
// envTarget from envSource, prints "opened N failed M" and holds them until
// stdin closes.
func runAttacker() int {
	if err := setFileLimit(0); err != nil {
		fmt.Println("error", err)
		return 1
	}
	count, _ := strconv.Atoi(os.Getenv(envCount))
	target, source := os.Getenv(envTarget), os.Getenv(envSource)
	var mu sync.Mutex
	var conns []net.Conn
	var failed atomic.Int64
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
			for range next {
				conn, err := d.Dial("tcp", target)
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				conns = append(conns, conn)
				mu.Unlock()
			}
		}()
	}
	for range count {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	fmt.Printf("opened opened=%d failed=%d\n", len(conns), failed.Load())
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		_ = c.Close()
	}
	return 0
}

// setFileLimit sets RLIMIT_NOFILE's soft limit to n (0: the hard limit).
func setFileLimit(n uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = lim.Max
	if n > 0 && n < lim.Max {
		lim.Cur = n
	}
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// child is a child process of this test binary in a role.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startChild runs this test binary as role with env; it is killed when the
// test ends if stop was not called.
func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// line waits for an output line starting with prefix.
func (c *child) line(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, "error ") {
				t.Fatalf("child: %s", l)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no %q line from the child in %v", prefix, timeout)
		}
	}
}

// stop closes the child's stdin and waits for it to exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	_ = c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("child: %v", err)
		}
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		t.Errorf("child did not stop")
	}
}

// parseFields parses "word k=v k=v".
func parseFields(line string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
