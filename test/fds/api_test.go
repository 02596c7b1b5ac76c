package fds

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/credential"
)

// A slow request: headers with a Content-Length, then one body byte every
// slowByteEvery. The body would take 50 minutes: only the server can end
// it in the time of the test.
const (
	slowBodyBytes = 1000
	slowByteEvery = 3 * time.Second
)

// genuineSource is the genuine client's address, none of the attackers'.
const genuineSource = "127.0.0.2"

// attackAPI starts a controller with cfg and two attacker processes that
// open total connections to its API, half from sources[0] without a token,
// half from sources[1] with the admin token, each a slow POST /apply.
// While the attackers hold what the controller lets them hold, a genuine
// client from genuineSource lists nodes and applies a daemonset on fresh
// connections, /readyz answers, and a genuine node connects over MQTT.
// The unauthenticated requests must get 401 (or 429 once their source is
// blocked) before their body is sent, the authenticated ones 408 once
// api-read-timeout passes, and the controller must end with the
// descriptors it had.
func attackAPI(t *testing.T, total int, sources [2]string, cfg controller.Config) {
	cfg.DataDir = t.TempDir()
	ctl := startChild(t, "controller", envConfig+"="+mustJSON(t, cfg))
	fields := parseFields(ctl.line(t, "ready ", time.Minute))
	mqttAddr, apiAddr, token := fields["mqtt"], fields["api"], fields["token"]
	api := newAPIClient(apiAddr, token)
	genuine := newGenuineClient(apiAddr, token)
	if code, body := api.readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before the attack = %d %s", code, body)
	}
	genuine.mustDo(t, "before the attack", http.MethodGet, "/api/v1/nodes", "")
	secret, err := credential.LoadOrCreateFleetSecret(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	pid := ctl.cmd.Process.Pid
	fdsBefore := countFDs(t, pid)
	logsBefore, _ := ctl.logs.snapshot()

	start := time.Now()
	noToken := startChild(t, "api-attacker", envTarget+"="+apiAddr, envCount+"="+strconv.Itoa(total/2),
		envSource+"="+sources[0])
	withToken := startChild(t, "api-attacker", envTarget+"="+apiAddr, envCount+"="+strconv.Itoa(total-total/2),
		envSource+"="+sources[1], envToken+"="+token)
	tokenOpen := 0
	for _, a := range []struct {
		name string
		c    *child
	}{{"without a token", noToken}, {"with the token", withToken}} {
		f := parseFields(a.c.line(t, "opened ", attackWait))
		t.Logf("attacker %s: %s connections opened, %s failed to connect, %s still open", a.name, f["opened"], f["failed"], f["open"])
		tokenOpen, _ = strconv.Atoi(f["open"])
	}
	t.Logf("attack: connections opened in %v; controller descriptors %d before, %d at most during",
		time.Since(start).Round(time.Millisecond), fdsBefore, peakFDs(t, pid, fdsBefore+tokenOpen, 2*time.Second))

	duringAttack(t, genuine, api, mqttAddr, secret)
	held := parseFields(withToken.request(t, "status", "status ", time.Minute))
	t.Logf("slow bodies with the token still held after the genuine requests: %s", held["open"])
	if n, _ := strconv.Atoi(held["open"]); n == 0 {
		t.Errorf("no slow body was held any more when the genuine client was answered: the attack was over")
	}

	unauth := noToken.report(t)
	authed := withToken.report(t)
	t.Logf("attack over after %v", time.Since(start).Round(time.Millisecond))
	unauth.log(t, "without a token")
	authed.log(t, "with the token")
	checkUnauthenticated(t, unauth)
	checkCut(t, authed)

	noToken.stop(t)
	withToken.stop(t)
	recovered(t, genuine, api, pid, fdsBefore)
	logsAfter, byMsg := ctl.logs.snapshot()
	t.Logf("metrics after: %s", api.apiMetrics())
	t.Logf("controller log lines during the attack: %d (since start: %v)", logsAfter-logsBefore, byMsg)
	if n := logsAfter - logsBefore; n > 100 {
		t.Errorf("%d controller log lines for %d connections: the log grows with the attack", n, total)
	}
	ctl.stop(t)
}

// duringAttack checks that the genuine client is answered on fresh
// connections, /readyz answers and a genuine node connects.
func duringAttack(t *testing.T, genuine *genuineClient, api *apiClient, mqttAddr string, secret []byte) {
	t.Helper()
	took := genuine.mustDo(t, "during the attack", http.MethodGet, "/api/v1/nodes", "")
	t.Logf("genuine GET /api/v1/nodes during the attack: 200 in %v", took.Round(time.Millisecond))
	took = genuine.mustDo(t, "during the attack", http.MethodPost, "/api/v1/apply", genuineManifest("genuine-during"))
	t.Logf("genuine POST /api/v1/apply during the attack: 200 in %v", took.Round(time.Millisecond))
	took = genuine.mustDo(t, "during the attack", http.MethodGet, "/readyz", "")
	t.Logf("genuine GET /readyz during the attack: 200 in %v", took.Round(time.Millisecond))
	connectStart := time.Now()
	node := "node-genuine"
	if err := connectNode(mqttAddr, node, credential.NodeToken(secret, node)); err != nil {
		t.Errorf("a genuine node cannot connect over MQTT during the API attack: %v", err)
	} else {
		t.Logf("genuine node connected over MQTT during the attack in %v", time.Since(connectStart).Round(time.Millisecond))
	}
	t.Logf("metrics during the attack: %s", api.apiMetrics())
}

// checkUnauthenticated: every request without a token that the controller
// accepted was refused (401, or 429 once its source was blocked) before
// its body was sent, so its body was never waited for.
func checkUnauthenticated(t *testing.T, r slowReport) {
	t.Helper()
	if r.Open > 0 {
		t.Errorf("%d requests without a token are still open", r.Open)
	}
	answered := 0
	for key, o := range r.Outcomes {
		switch key {
		case outcomeClosed:
		case "401", "429":
			answered += o.Count
			if o.MaxSent >= slowBodyBytes {
				t.Errorf("a %s came only after the whole body (%d bytes)", key, o.MaxSent)
			}
		default:
			t.Errorf("%d requests without a token were answered %s (%s), want 401 or 429", o.Count, key, o.Message)
		}
	}
	if answered == 0 {
		t.Errorf("no request without a token was answered: %+v", r.Outcomes)
	}
}

// checkCut: every request with the token that the controller accepted was
// answered 408 for its unfinished body.
func checkCut(t *testing.T, r slowReport) {
	t.Helper()
	if r.Open > 0 {
		t.Errorf("%d slow bodies with the token are still open", r.Open)
	}
	cut, ok := r.Outcomes["408"]
	if !ok {
		t.Fatalf("no slow body with the token was cut with 408: %+v", r.Outcomes)
	}
	if !strings.Contains(cut.Message, "within the read timeout") {
		t.Errorf("408 message %q does not name the read timeout", cut.Message)
	}
	for key, o := range r.Outcomes {
		if key != "408" && key != outcomeClosed {
			t.Errorf("%d slow bodies with the token were answered %s (%s), want 408", o.Count, key, o.Message)
		}
	}
}

// recovered waits until the controller's descriptors are back to what
// they were, then checks the genuine client and /readyz, and that nothing
// but the genuine daemonsets was applied.
func recovered(t *testing.T, genuine *genuineClient, api *apiClient, pid, fdsBefore int) {
	t.Helper()
	deadline := time.Now().Add(recoverWait)
	for {
		n := countFDs(t, pid)
		if n <= fdsBefore+fdSlack {
			t.Logf("controller descriptors after the attack: %d (before: %d)", n, fdsBefore)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("controller holds %d descriptors %v after the attack, %d before", n, recoverWait, fdsBefore)
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a bounded loop
	}
	checkReady(t, api)
	genuine.mustDo(t, "after the attack", http.MethodPost, "/api/v1/apply", genuineManifest("genuine-after"))
	checkDaemonSets(t, genuine, "genuine-during", "genuine-after")
}

// checkDaemonSets checks that the daemonsets are those named: the slow
// bodies applied nothing.
func checkDaemonSets(t *testing.T, genuine *genuineClient, names ...string) {
	t.Helper()
	code, body, _, err := genuine.do(http.MethodGet, "/api/v1/daemonsets", "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/daemonsets after the attack: %d %s %v", code, body, err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("GET /api/v1/daemonsets: %v: %s", err, body)
	}
	ok := len(list) == len(names)
	for _, name := range names {
		ok = ok && strings.Contains(body, `"`+name+`"`)
	}
	if !ok {
		t.Errorf("daemonsets after the attack: want %v only, got %s", names, body)
	}
}

// attackAPIExhausted runs total slow bodies with the admin token, from
// enough source addresses that the default per-source cap does not bound
// them, against a controller whose cap on unauthenticated connections is
// raised (with the default, it refuses part of the burst of connections
// not yet authenticated): its descriptors run out. The API keeps serving
// the connections it has (/readyz over a kept-alive one), its accept loop
// retries, the read timeout cuts the slow bodies, and then a genuine
// client is answered on a fresh connection. Only a holder of the admin
// token can do this, and only for api-read-timeout at a time.
func attackAPIExhausted(t *testing.T, total int, sourceNets [2]string) {
	cfg := controller.Config{DataDir: t.TempDir(), APIMaxUnauthenticatedConns: 1 << 20,
		// Keeps the test's /readyz connection alive while no new one
		// can be accepted.
		APIIdleTimeout: time.Hour}
	ctl := startChild(t, "controller", envConfig+"="+mustJSON(t, cfg))
	fields := parseFields(ctl.line(t, "ready ", time.Minute))
	apiAddr, token := fields["api"], fields["token"]
	api := newAPIClient(apiAddr, token)
	genuine := newGenuineClient(apiAddr, token)
	if code, body := api.readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before the attack = %d %s", code, body)
	}
	pid := ctl.cmd.Process.Pid
	fdsBefore := countFDs(t, pid)
	logsBefore, _ := ctl.logs.snapshot()

	// Enough sources for half of total each within the per-source cap.
	perAttacker := total - total/2
	nSources := perAttacker/controller.DefaultAPIMaxConnsPerSource + 1
	start := time.Now()
	var attackers []*child
	for i, n := range []int{total / 2, perAttacker} {
		var sources []string
		for j := range nSources {
			sources = append(sources, fmt.Sprintf("%s.%d.%d", sourceNets[i], j/250, j%250+1))
		}
		attackers = append(attackers, startChild(t, "api-attacker", envTarget+"="+apiAddr, envCount+"="+strconv.Itoa(n),
			envSource+"="+strings.Join(sources, ","), envToken+"="+token))
	}
	for _, a := range attackers {
		f := parseFields(a.line(t, "opened ", attackWait))
		t.Logf("attacker with the token from %d sources: %s connections opened, %s failed to connect, %s still open",
			nSources, f["opened"], f["failed"], f["open"])
	}
	fdsDuring := peakFDs(t, pid, controllerFiles-fdSlack, 10*time.Second)
	t.Logf("attack: connections opened in %v; controller descriptors %d before, %d at most during (limit %d)",
		time.Since(start).Round(time.Millisecond), fdsBefore, fdsDuring, controllerFiles)
	if total >= controllerFiles && fdsDuring < controllerFiles-fdSlack {
		t.Errorf("the attack did not exhaust the descriptors: at most %d of %d open", fdsDuring, controllerFiles)
	}

	code, body := api.readyz()
	t.Logf("/readyz over a kept-alive connection during the attack: %d %s", code, strings.TrimSpace(body))
	if code == 0 {
		t.Errorf("/readyz over a kept-alive connection failed during the attack: %s", body)
	}
	answeredStart := time.Now()
	attempts := 0
	deadline := time.Now().Add(recoverWait)
	for {
		attempts++
		code, body, _, err := genuine.do(http.MethodGet, "/api/v1/nodes", "")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the genuine client was not answered in %v (%d attempts): %d %s %v", recoverWait, attempts, code, body, err)
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a bounded loop
	}
	t.Logf("genuine GET /api/v1/nodes on a fresh connection answered after %v, %d attempt(s)",
		time.Since(answeredStart).Round(time.Millisecond), attempts)
	genuine.mustDo(t, "once answered", http.MethodPost, "/api/v1/apply", genuineManifest("genuine-during"))

	for i, a := range attackers {
		r := a.report(t)
		r.log(t, fmt.Sprintf("%d with the token", i+1))
		checkCut(t, r)
	}
	t.Logf("attack over after %v", time.Since(start).Round(time.Millisecond))
	for _, a := range attackers {
		a.stop(t)
	}
	recovered(t, genuine, api, pid, fdsBefore)
	logsAfter, byMsg := ctl.logs.snapshot()
	t.Logf("metrics after: %s", api.apiMetrics())
	t.Logf("controller log lines during the attack: %d (since start: %v)", logsAfter-logsBefore, byMsg)
	ctl.stop(t)
}

// fdSlack is how many descriptors more than before the attack count as
// recovered: the genuine node's session, kept-alive connections, files
// the runtime opens.
const fdSlack = 32

// peakFDs returns the most descriptors process pid has open, polled until
// they reach atLeast or bound passes: the controller may still be
// accepting what the kernel has queued.
func peakFDs(t *testing.T, pid, atLeast int, bound time.Duration) int {
	t.Helper()
	peak := 0
	for deadline := time.Now().Add(bound); ; {
		peak = max(peak, countFDs(t, pid))
		if peak >= atLeast || time.Now().After(deadline) {
			return peak
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a bounded loop
	}
}

// countFDs returns how many descriptors process pid has open.
func countFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("count descriptors: %v", err)
	}
	return len(entries)
}

func genuineManifest(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: %s
  namespace: default
spec:
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
      - name: app
        image: busybox:1.36
`, name, name, name)
}

// genuineClient is an operator's client: the admin token, a source no
// attacker uses, and a fresh connection for every request.
type genuineClient struct {
	base, token string
	http        *http.Client
}

func newGenuineClient(addr, token string) *genuineClient {
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(genuineSource)}}
	return &genuineClient{base: "http://" + addr, token: token, http: &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 30 * time.Second}}
}

// do sends one request and returns its status, body and time taken.
func (g *genuineClient) do(method, path, body string) (int, string, time.Duration, error) {
	req, err := http.NewRequest(method, g.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	start := time.Now()
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, "", time.Since(start), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start), err
}

// mustDo is do that fails the test unless the answer is 200.
func (g *genuineClient) mustDo(t *testing.T, when, method, path, body string) time.Duration {
	t.Helper()
	code, resp, took, err := g.do(method, path, body)
	if err != nil || code != http.StatusOK {
		t.Fatalf("genuine %s %s %s: %d %s %v", method, path, when, code, strings.TrimSpace(resp), err)
	}
	return took
}

var apiMetric = regexp.MustCompile(`(?m)^edgeset_api_[^ ]* [0-9.e+]+$`)

// apiMetrics returns the API's refusal metrics, one line.
func (a *apiClient) apiMetrics() string {
	code, body := a.get("/metrics")
	if code != http.StatusOK {
		return fmt.Sprintf("(/metrics: %d %s)", code, body)
	}
	return strings.Join(apiMetric.FindAllString(body, -1), "; ")
}

// request writes cmd to the child's stdin and waits for its answer line.
func (c *child) request(t *testing.T, cmd, prefix string, timeout time.Duration) string {
	t.Helper()
	if _, err := fmt.Fprintln(c.stdin, cmd); err != nil {
		t.Fatalf("child: %v", err)
	}
	return c.line(t, prefix, timeout)
}

// report asks an API attacker for its report, which it gives once all its
// requests have ended or attackWait has passed.
func (c *child) report(t *testing.T) slowReport {
	t.Helper()
	line := c.request(t, "report", "done ", attackWait+time.Minute)
	var r slowReport
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "done ")), &r); err != nil {
		t.Fatalf("attacker report %q: %v", line, err)
	}
	return r
}

// outcomeClosed is the outcome of a connection closed without an answer:
// refused at accept.
const outcomeClosed = "closed"

// slowReport is what an API attacker saw of its slow requests.
type slowReport struct {
	Opened, Failed int
	// Open requests had no answer yet when the report was made.
	Open int
	// Outcomes by answer: "401", "408", ..., or outcomeClosed.
	Outcomes map[string]*outcome
}

// outcome sums up the requests that ended one way.
type outcome struct {
	Count int
	// MaxSent is the most body bytes one of them had sent when it ended.
	MaxSent int
	// Min, Median and Max of the time from the headers to the end.
	Min, Median, Max time.Duration
	// Message is the body of one answer, cut short.
	Message string
}

func (r slowReport) log(t *testing.T, who string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(r.Outcomes)) {
		o := r.Outcomes[k]
		what := "answered " + k
		if k == outcomeClosed {
			what = "closed without an answer (refused at accept)"
		}
		t.Logf("attacker %s: %d %s after %v/%v/%v (min/median/max), at most %d body bytes sent; %s",
			who, o.Count, what, o.Min.Round(time.Millisecond), o.Median.Round(time.Millisecond),
			o.Max.Round(time.Millisecond), o.MaxSent, o.Message)
	}
}

// slowEnd is how one slow request ended.
type slowEnd struct {
	key     string // outcome key
	sent    int
	after   time.Duration
	message string
}

// runAPIAttacker is an API attacker child: it opens envCount connections
// to envTarget from envSource (addresses separated by commas, used in
// turn), each a slow POST /api/v1/apply carrying the
// bearer token envToken if set, and prints "opened opened=N failed=M
// open=K". Then it answers the lines of its stdin: "status" with "status
// open=K", "report" with "done {slowReport}" once every request has ended
// or attackWait has passed. It exits when stdin closes, closing what is
// still open.
func runAPIAttacker() int {
	if err := setFileLimit(0); err != nil {
		fmt.Println("error", err)
		return 1
	}
	count, _ := strconv.Atoi(os.Getenv(envCount))
	target, source := os.Getenv(envTarget), os.Getenv(envSource)
	header := "POST /api/v1/apply HTTP/1.1\r\nHost: edgeset\r\nContent-Type: application/yaml\r\n" +
		"Content-Length: " + strconv.Itoa(slowBodyBytes) + "\r\n"
	if tok := os.Getenv(envToken); tok != "" {
		header += "Authorization: Bearer " + tok + "\r\n"
	}
	header += "\r\n"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu       sync.Mutex // guards ends
		ends     []slowEnd
		open     atomic.Int64
		opened   atomic.Int64
		requests sync.WaitGroup
	)
	failed := dialAll(target, source, count, func(conn net.Conn) {
		opened.Add(1)
		open.Add(1)
		requests.Add(1)
		go func() {
			defer requests.Done()
			end := slowRequest(ctx, conn, header)
			open.Add(-1)
			mu.Lock()
			ends = append(ends, end)
			mu.Unlock()
		}()
	})
	fmt.Printf("opened opened=%d failed=%d open=%d\n", opened.Load(), failed, open.Load())

	allEnded := make(chan struct{})
	go func() { requests.Wait(); close(allEnded) }()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "status":
			fmt.Printf("status open=%d\n", open.Load())
		case "report":
			select {
			case <-allEnded:
			case <-time.After(attackWait):
			}
			mu.Lock()
			fmt.Println("done " + reportOf(ends, int(opened.Load()), failed, int(open.Load())))
			mu.Unlock()
		}
	}
	cancel()
	requests.Wait()
	return 0
}

// slowRequest sends header and one body byte every slowByteEvery on conn
// until the server answers or closes the connection, or ctx ends; it
// closes conn.
func slowRequest(ctx context.Context, conn net.Conn, header string) slowEnd {
	defer conn.Close()
	start := time.Now()
	answer := make(chan slowEnd, 1)
	go func() { answer <- readAnswer(conn) }()
	sent := 0
	if _, err := io.WriteString(conn, header+"x"); err == nil {
		sent = 1
	}
	tick := time.NewTicker(slowByteEvery)
	defer tick.Stop()
	for {
		select {
		case end := <-answer:
			end.sent, end.after = sent, time.Since(start)
			return end
		case <-tick.C:
			if sent < slowBodyBytes {
				if _, err := conn.Write([]byte("x")); err == nil {
					sent++
				}
			}
		case <-ctx.Done():
			_ = conn.Close()
			end := <-answer
			end.key, end.sent, end.after = "stopped", sent, time.Since(start)
			return end
		}
	}
}

// readAnswer reads the server's answer on conn: its status and the start
// of its body, or outcomeClosed if the connection ends without one.
func readAnswer(conn net.Conn) slowEnd {
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
			strings.Contains(err.Error(), "connection reset") {
			return slowEnd{key: outcomeClosed}
		}
		return slowEnd{key: "error", message: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	return slowEnd{key: strconv.Itoa(resp.StatusCode), message: strings.Join(strings.Fields(string(b)), " ")}
}

// reportOf sums ends up as a slowReport in JSON.
func reportOf(ends []slowEnd, opened, failed, open int) string {
	r := slowReport{Opened: opened, Failed: failed, Open: open, Outcomes: map[string]*outcome{}}
	byKey := map[string][]slowEnd{}
	for _, e := range ends {
		byKey[e.key] = append(byKey[e.key], e)
	}
	for key, es := range byKey {
		slices.SortFunc(es, func(a, b slowEnd) int { return int(a.after - b.after) })
		o := &outcome{Count: len(es), Min: es[0].after, Median: es[len(es)/2].after, Max: es[len(es)-1].after,
			Message: es[0].message}
		for _, e := range es {
			o.MaxSent = max(o.MaxSent, e.sent)
		}
		r.Outcomes[key] = o
	}
	b, _ := json.Marshal(r)
	return string(b)
}
