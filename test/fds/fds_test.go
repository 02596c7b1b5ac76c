// Package fds is the full file-descriptor exhaustion case of issue 13
// (make fault-fds), against a controller limited to 20,000 files, from
// separate attacker processes on loopback:
//
//   - 20,000 idle TCP connections to the MQTT port: a genuine node still
//     connects and /readyz reflects the listener's state;
//   - 20,000 connections to the API port, each sending a request's headers
//     and then one body byte every 3 s, half with the admin token and half
//     without: a genuine client still gets answers, the unauthenticated
//     requests get their 401 at once, the slow bodies are cut after
//     api-read-timeout, and the controller's descriptors return to what
//     they were.
//
// It runs only with EDGESET_FAULT_FDS=1.
package fds

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
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

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/credential"
)

// Environment of the test and of its child processes.
const (
	envRun    = "EDGESET_FAULT_FDS"       // 1: run TestFaultFDs
	envConns  = "EDGESET_FAULT_FDS_CONNS" // idle connections (default 20000)
	envRole   = "EDGESET_FDS_ROLE"        // controller or attacker
	envConfig = "EDGESET_FDS_CONFIG"      // controller: JSON of controller.Config
	envTarget = "EDGESET_FDS_TARGET"      // attacker: MQTT address
	envCount  = "EDGESET_FDS_COUNT"       // attacker: connections to open
	envSource = "EDGESET_FDS_SOURCE"      // attackers: local IP addresses, separated by commas
	envToken  = "EDGESET_FDS_TOKEN"       // api-attacker: bearer token to send; empty: none
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
	case "api-attacker":
		os.Exit(runAPIAttacker())
	}
	os.Exit(m.Run())
}

// TestFaultFDs runs the MQTT attack twice: with the default limits (the
// caps refuse most connections at accept; descriptors never run out) and
// with the caps raised so the descriptors do run out (accept fails with
// EMFILE, /readyz turns 503, the connect timeout frees them, the listener
// accepts again). Then the API attack (attackAPI), with the default limits
// and with the connection caps raised, and slow bodies with the token from
// many sources, which exhaust the descriptors once the cap on
// unauthenticated connections is raised (attackAPIExhausted).
//
// Each case uses source addresses of its own: a connection the server
// closed first leaves its port pair in TIME_WAIT for a minute, and 20,000
// of them would leave the next case no ports on the same address.
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
	t.Run("mqtt default limits", func(t *testing.T) {
		attack(t, total, "127.0.0.1", controller.Config{})
	})
	t.Run("mqtt caps raised, descriptors exhausted", func(t *testing.T) {
		// The long API idle timeout keeps the test's /readyz connection
		// alive while no new one can be accepted.
		attack(t, total, "127.0.0.3", controller.Config{MQTTConnectTimeout: time.Minute,
			MQTTMaxPendingConnections: 1 << 20, MQTTMaxConnectionsPerSource: 1 << 20, APIIdleTimeout: time.Hour})
	})
	t.Run("api default limits", func(t *testing.T) {
		attackAPI(t, total, [2]string{"127.0.0.4", "127.0.0.5"}, controller.Config{})
	})
	t.Run("api caps raised", func(t *testing.T) {
		attackAPI(t, total, [2]string{"127.0.0.6", "127.0.0.7"}, controller.Config{
			APIMaxUnauthenticatedConns: 1 << 20, APIMaxConnsPerSource: 1 << 20})
	})
	t.Run("api token from many sources, unauthenticated cap raised, descriptors exhausted", func(t *testing.T) {
		attackAPIExhausted(t, total, [2]string{"127.1", "127.2"})
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
	api := newAPIClient(apiAddr, fields["token"])
	if code, body := api.readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before the attack = %d %s", code, body)
	}
	secret, err := credential.LoadOrCreateFleetSecret(cfg.DataDir)
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

	// Only a 503 is the controller reporting; 0 is a request that failed.
	sawUnready := false
	code, body := api.readyz()
	t.Logf("/readyz during the attack: %d %s", code, strings.TrimSpace(body))
	if code == http.StatusServiceUnavailable {
		sawUnready = true
	}
	t.Logf("metrics during the attack: %s", api.brokerMetrics())

	node := "node-genuine"
	connectStart := time.Now()
	attempts := 0
	deadline := time.Now().Add(recoverWait)
	for {
		attempts++
		err := connectNode(mqttAddr, node, credential.NodeToken(secret, node))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a genuine node never connected in %v (%d attempts): %v", recoverWait, attempts, err)
		}
		if code, body := api.readyz(); code != http.StatusOK {
			sawUnready = sawUnready || code == http.StatusServiceUnavailable
			t.Logf("/readyz while the node cannot connect: %d %s", code, strings.TrimSpace(body))
		}
	}
	t.Logf("genuine node connected after %v, %d attempt(s)", time.Since(connectStart).Round(time.Millisecond), attempts)
	checkReady(t, api)
	t.Logf("metrics after: %s", api.brokerMetrics())
	t.Logf("controller log lines: %s", ctl.logs.summary())
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
// The API keeps a connection alive only once it has carried a request with
// the token, so each read is preceded by one.
type apiClient struct {
	base, token string
	http        *http.Client
}

func newAPIClient(addr, token string) *apiClient {
	return &apiClient{base: "http://" + addr, token: token,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}}
}

func (a *apiClient) get(path string) (int, string) {
	if code, body := a.getAuthenticated("/api/v1/version"); code != http.StatusOK {
		return code, body
	}
	return a.getAuthenticated(path)
}

func (a *apiClient) getAuthenticated(path string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, a.base+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.http.Do(req)
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
	fmt.Printf("ready mqtt=%s api=%s token=%s\n", c.MQTTAddr(), c.APIAddr(), c.Token())
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
	var mu sync.Mutex
	var conns []net.Conn
	failed := dialAll(os.Getenv(envTarget), os.Getenv(envSource), count, func(conn net.Conn) {
		mu.Lock()
		conns = append(conns, conn)
		mu.Unlock()
	})
	fmt.Printf("opened opened=%d failed=%d\n", len(conns), failed)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		_ = c.Close()
	}
	return 0
}

// dialAll opens count TCP connections to target, 64 at a time, from the
// addresses of sources (separated by commas) in turn, and hands each to
// opened. It returns how many failed to connect.
func dialAll(target, sources string, count int, opened func(net.Conn)) int {
	var locals []*net.TCPAddr
	for _, ip := range strings.Split(sources, ",") {
		locals = append(locals, &net.TCPAddr{IP: net.ParseIP(ip)})
	}
	var dials, failed atomic.Int64
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: locals[int(dials.Add(1))%len(locals)]}
				conn, err := d.Dial("tcp", target)
				if err != nil {
					failed.Add(1)
					continue
				}
				opened(conn)
			}
		}()
	}
	for range count {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return int(failed.Load())
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
	logs  *logCounter // its stderr
}

// startChild runs this test binary as role with env; it is killed when the
// test ends if stop was not called.
func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"="+role), env...)
	logs := &logCounter{out: os.Stderr, byMsg: map[string]int{}}
	cmd.Stderr = logs
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
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16), logs: logs}
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

// logCounter passes a child's stderr on to out and counts its slog lines
// by message.
type logCounter struct {
	out io.Writer

	mu      sync.Mutex // guards the fields below
	partial []byte     // an unfinished line
	total   int
	byMsg   map[string]int
}

var logMsg = regexp.MustCompile(`msg=("(?:[^"\\]|\\.)*"|\S+)`)

func (l *logCounter) Write(p []byte) (int, error) {
	_, _ = l.out.Write(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.partial[:i]
		l.partial = l.partial[i+1:]
		l.total++
		msg := "(not slog)"
		if m := logMsg.FindSubmatch(line); m != nil {
			msg = strings.Trim(string(m[1]), `"`)
		}
		l.byMsg[msg]++
	}
}

// snapshot returns the lines counted so far, in total and by message.
func (l *logCounter) snapshot() (int, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, maps.Clone(l.byMsg)
}

// summary is "N map[msg:n ...]": the lines counted so far, in total and by
// message.
func (l *logCounter) summary() string {
	total, byMsg := l.snapshot()
	return fmt.Sprintf("%d %v", total, byMsg)
}
