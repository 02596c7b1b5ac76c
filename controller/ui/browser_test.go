package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sim"
)

// simNodes is the simulated fleet's size; one more agent (loggerNode)
// serves logs, which the simulator's fake runtime does not (it answers
// every log request with an empty log).
const simNodes = 30

const loggerNode = "logger-0"

var quiet = slog.New(slog.DiscardHandler)

const browserDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logdemo, namespace: default}
spec:
  minReadySeconds: %d
  selector: {matchLabels: {app: logdemo}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {app: logdemo}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - {name: main, image: "registry.local/logdemo:%s"}
`

// findChromium returns the browser to drive, or skips the test (fails it
// under CI=true or EDGESET_REQUIRE_DOCKER=1).
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium not found on PATH (apt-get install chromium): dashboard browser tests skipped"
	if os.Getenv("CI") == "true" || os.Getenv("EDGESET_REQUIRE_DOCKER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// edgesetctl is the CLI built from this tree, as an operator runs it.
type edgesetctl struct{ bin string }

// buildEdgesetctl builds cmd/edgesetctl into the test's directory.
func buildEdgesetctl(t *testing.T) edgesetctl {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edgesetctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/edgeset/edgeset/cmd/edgesetctl").CombinedOutput(); err != nil {
		t.Fatalf("go build edgesetctl: %v\n%s", err, out)
	}
	return edgesetctl{bin: bin}
}

// run runs edgesetctl against fl with its admin token and returns what it
// printed (stdout and stderr); a non-zero exit is part of the output.
func (c edgesetctl) run(t *testing.T, fl *fleet, args ...string) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(tokenFile, []byte(fl.ctl.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.bin, append([]string{"--server", fl.url, "--token-file", tokenFile}, args...)...)
	cmd.Env = append(os.Environ(), "EDGESET_TOKEN=", "EDGESET_TOKEN_FILE=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		out = fmt.Appendf(out, "(exit: %v)", err)
	}
	return string(out)
}

// fleet is a controller with its embedded broker, a simulated fleet and
// the logger agent, all in process.
type fleet struct {
	ctl *controller.Controller
	api *api.Client
	url string
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("controller Run: %v", err)
		}
	})
	<-c.Synced()
	secret, err := sim.ReadFleetSecret(filepath.Join(dir, credential.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	shape, err := sim.ParseShape([]byte("seed: 5\nlabels:\n  role: {gateway: 1}\n  site: {a: 0.4, b: 0.3, c: 0.3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	broker := "tcp://" + c.MQTTAddr().String()
	f, err := sim.New(sim.Options{BrokerURL: broker, Nodes: simNodes, Tokens: sim.SecretTokens(secret), Shape: shape, Ramp: 500})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := f.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("fleet Run: %v", err)
		}
	})
	logger := startLogger(t, broker, sim.SecretTokens(secret))
	wg.Go(func() { _ = logger.Run(ctx) })
	fl := &fleet{ctl: c, api: api.NewClient("http://"+c.APIAddr().String(), c.Token(), nil), url: "http://" + c.APIAddr().String()}
	checkfor.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		nodes, err := fl.api.ListNodes(ctx)
		if err != nil || len(nodes) != simNodes+1 {
			return fmt.Errorf("%d nodes (%v), want %d", len(nodes), err, simNodes+1)
		}
		return nil
	})
	return fl
}

// swingingTelemetry reports a load that changes meaningfully at every
// measure, so the agent publishes each one and the node's plots fill.
func swingingTelemetry() edgeagent.TelemetryFunc {
	var n atomic.Int64
	return func(context.Context) schema.Telemetry {
		k := n.Add(1)
		temp := 40 + float64(k%5)*4
		return schema.Telemetry{Time: time.Now().UTC(), Load1: float64(k%4) * 0.9, CPUs: 4,
			MemoryTotalBytes: 4 << 30, MemoryAvailableBytes: int64(2+k%2) << 30, UptimeSeconds: 3600 + k,
			Disks:              []schema.DiskUsage{{Name: schema.DiskData, Path: "/var/lib/edgeset", SizeBytes: 32 << 30, FreeBytes: 20 << 30}},
			TemperatureCelsius: &temp}
	}
}

// startLogger is an agent whose fake runtime answers log requests with
// three lines naming the container, and reports telemetry.
func startLogger(t *testing.T, broker string, tokens sim.TokenFunc) *edgeagent.Node {
	t.Helper()
	rt := fake.New()
	rt.LogOutput = func(c edgeagent.ContainerState, _ edgeagent.LogOptions) (io.ReadCloser, error) {
		var b strings.Builder
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(&b, "hello from %s line %d\n", loggerNode, i)
		}
		return io.NopCloser(strings.NewReader(b.String())), nil
	}
	token, err := tokens(loggerNode)
	if err != nil {
		t.Fatal(err)
	}
	n, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: loggerNode, Ephemeral: true, Logger: quiet},
		MQTT:  mqttclient.Options{BrokerURLs: []string{broker}, Password: token, FirstConnectJitter: -1, Logger: quiet},
		Status: func(context.Context) schema.NodeStatus {
			return schema.NodeStatus{Labels: map[string]string{"role": "gateway", "site": "a", schema.LabelHostname: loggerNode},
				Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}},
				Info:       schema.NodeInfo{AgentVersion: schema.Version}}
		},
		Telemetry:         swingingTelemetry(),
		TelemetryInterval: 1100 * time.Millisecond, // the controller keeps at most a point a second
	}, rt)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// browser is one headless chromium with the console errors of its pages.
type browser struct {
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

func startBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Error()
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value))
				}
				msg = "console." + string(ev.Type) + ": " + strings.Join(parts, " ")
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.LevelError {
				msg = "log: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	})
	if err := chromedp.Run(ctx, log.Enable(), runtime.Enable(), chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	return b
}

// run runs actions within timeout.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// consoleErrors returns and clears the errors seen so far.
func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := b.errors
	b.errors = nil
	return errs
}

// screenshot saves the page to EDGESET_SCREENSHOTS/name.png when that
// directory is set (make screenshots).
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("EDGESET_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte
	b.run(t, "screenshot "+name, chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&png))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowser drives the dashboard in headless chromium against a live
// controller and a simulated fleet: sign-in, fleet counts, the node table
// filter, a node's instances and logs, pausing a rollout, and no
// JavaScript console error on any page.
func TestBrowser(t *testing.T) {
	exe := findChromium(t)
	ctl := buildEdgesetctl(t)
	fl := startFleet(t)
	ctx := context.Background()
	// Revision 2 waits a minute on each node before the next: its
	// rollout is still going when the dashboard pauses it.
	apply := func(minReady int, tag string) {
		if _, err := fl.api.Apply(ctx, "browser-test", []byte(fmt.Sprintf(browserDaemonSet, minReady, tag)), false); err != nil {
			t.Fatal(err)
		}
	}
	apply(0, "1")
	checkfor.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		ds, err := fl.api.GetDaemonSet(ctx, "default/logdemo")
		if err != nil || ds.Status.NumberReady != simNodes+1 {
			return fmt.Errorf("daemonset ready on %d nodes (%v), want %d", ds.Status.NumberReady, err, simNodes+1)
		}
		return nil
	})
	b := startBrowser(t, exe)
	b.run(t, "check the console listener", chromedp.Navigate("about:blank"), chromedp.Evaluate(`console.error("probe")`, nil))
	checkfor.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		if errs := b.consoleErrors(); len(errs) == 0 {
			return fmt.Errorf("a console.error was not seen: the console check would see nothing")
		}
		return nil
	})

	t.Run("sign in", func(t *testing.T) {
		var loc string
		b.run(t, "open the fleet page", chromedp.Navigate(fl.url+"/ui/"), chromedp.WaitVisible(`#token`, chromedp.ByID), chromedp.Location(&loc))
		if !strings.Contains(loc, "/ui/login") {
			t.Fatalf("signed-out /ui/ went to %s, want the sign-in form", loc)
		}
		b.screenshot(t, "login")
		b.run(t, "sign in", chromedp.SendKeys(`#token`, fl.ctl.Token(), chromedp.ByID), chromedp.Submit(`#token`, chromedp.ByID),
			chromedp.WaitVisible(`[data-count="nodes"]`), chromedp.Location(&loc))
		if !strings.HasSuffix(loc, "/ui/") {
			t.Fatalf("after sign-in at %s, want /ui/", loc)
		}
	})

	t.Run("fleet counts match the API", func(t *testing.T) {
		nodes, err := fl.api.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		online := 0
		for _, n := range nodes {
			if n.Online {
				online++
			}
		}
		var total, on, dss, live string
		b.run(t, "read the counts", chromedp.Text(`[data-count="nodes"]`, &total), chromedp.Text(`[data-count="online"]`, &on),
			chromedp.Text(`[data-count="daemonSets"]`, &dss))
		if total != strconv.Itoa(len(nodes)) || on != strconv.Itoa(online) || dss != "1" {
			t.Errorf("fleet page: %s nodes, %s online, %s daemonsets; API: %d, %d, 1", total, on, dss, len(nodes), online)
		}
		// The live stream connects (and its first counts arrive).
		b.run(t, "wait for the live stream", chromedp.Poll(`document.getElementById("live-status").textContent === "live"`, nil,
			chromedp.WithPollingTimeout(15*time.Second)), chromedp.Text(`#live-status`, &live))
		b.screenshot(t, "fleet")
	})

	t.Run("filter the node table", func(t *testing.T) {
		nodes, err := fl.api.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, n := range nodes {
			if n.Labels["site"] == "a" {
				want++
			}
		}
		var count string
		var rows []string
		b.run(t, "filter by site=a", chromedp.Navigate(fl.url+"/ui/nodes"), chromedp.WaitVisible(`#selector`, chromedp.ByID),
			chromedp.SendKeys(`#selector`, "site=a", chromedp.ByID),
			// Marks the page, to wait for the one the form loads.
			chromedp.Evaluate(`document.body.dataset.before = "1"`, nil),
			chromedp.Submit(`#selector`, chromedp.ByID),
			chromedp.WaitVisible(`body:not([data-before]) #node-count`),
			chromedp.Text(`#node-count`, &count, chromedp.ByID),
			chromedp.Evaluate(`Array.from(document.querySelectorAll("#nodes tbody td.labels")).map(td => td.textContent)`, &rows))
		if !strings.Contains(count, fmt.Sprintf("of %d matching", want)) {
			t.Errorf("node count %q, want %d matching site=a", count, want)
		}
		if len(rows) != want {
			t.Errorf("%d rows, want %d", len(rows), want)
		}
		for _, r := range rows {
			if !strings.Contains(r, "site=a") {
				t.Errorf("row with labels %q kept by the filter site=a", r)
			}
		}
		b.screenshot(t, "nodes")
	})

	t.Run("open a node and follow its logs", func(t *testing.T) {
		var instances, logText string
		b.run(t, "open the node", chromedp.Click(`a[href="/ui/nodes/`+loggerNode+`"]`), chromedp.WaitVisible(`#instances`, chromedp.ByID),
			chromedp.Text(`#instances`, &instances, chromedp.ByID))
		if !strings.Contains(instances, "default/logdemo") || !strings.Contains(instances, "Running") {
			t.Errorf("node page instances %q, want default/logdemo Running", instances)
		}
		var telemetry string
		b.run(t, "read the telemetry", chromedp.Text(`#telemetry`, &telemetry, chromedp.ByID))
		if !strings.Contains(telemetry, "(4 CPUs)") || !strings.Contains(telemetry, "available of 4.0 GiB") {
			t.Errorf("node page telemetry %q, want the agent's report", telemetry)
		}
		b.run(t, "follow the logs", chromedp.Click(`#log-follow`, chromedp.ByID),
			chromedp.Poll(`document.getElementById("log").textContent.includes("line 3")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
			chromedp.Text(`#log`, &logText, chromedp.ByID))
		if !strings.Contains(logText, "hello from "+loggerNode+" line 1") {
			t.Errorf("log view %q, want the instance's log", logText)
		}
		b.screenshot(t, "node")
	})

	t.Run("pause a rollout", func(t *testing.T) {
		apply(60, "2")
		var ds api.DaemonSet
		checkfor.Eventually(t, 20*time.Second, 50*time.Millisecond, func() (err error) {
			ds, err = fl.api.GetDaemonSet(ctx, "default/logdemo")
			if ro := ds.Status.Rollout; err != nil || ro == nil || ro.Target != ds.CurrentHash || ro.Complete {
				return fmt.Errorf("revision 2 rollout %+v (%v), want one in progress", ro, err)
			}
			return nil
		})
		var flash string
		b.run(t, "pause from the daemonset page", chromedp.Navigate(fl.url+"/ui/daemonsets/default/logdemo"),
			chromedp.WaitVisible(`#action-pause`, chromedp.ByID), chromedp.Click(`#action-pause`, chromedp.ByID),
			chromedp.WaitVisible(`.flash`), chromedp.Text(`.flash`, &flash))
		if !strings.Contains(flash, "pause done") {
			t.Errorf("flash %q, want pause done", flash)
		}
		ds, err := fl.api.GetDaemonSet(ctx, "default/logdemo")
		if err != nil {
			t.Fatal(err)
		}
		if ro := ds.Status.Rollout; ro == nil || !ro.Paused || ro.Complete {
			t.Errorf("after Pause in the dashboard the API reports rollout %+v, want paused", ds.Status.Rollout)
		}
		var state string
		b.run(t, "read the state", chromedp.Text(`#ds-state`, &state, chromedp.ByID))
		if state != "paused" {
			t.Errorf("daemonset page state %q, want paused", state)
		}
		// What an operator at a shell sees: edgesetctl follows the
		// rollout, which stays paused, so it gives up at its timeout.
		out := ctl.run(t, fl, "rollout", "status", "daemonset", "logdemo", "--timeout", "3s", "--interval", "200ms")
		if !strings.Contains(out, "; paused: ") || !strings.Contains(out, "not complete") {
			t.Errorf("edgesetctl rollout status after Pause in the dashboard:\n%s\nwant the rollout reported paused", out)
		}
		b.screenshot(t, "daemonset")
	})

	t.Run("every other view", func(t *testing.T) {
		for _, v := range []struct{ path, wait, shot string }{
			{"/ui/daemonsets", `#daemonsets`, "daemonsets"},
			{"/ui/events", `#events`, "events"},
		} {
			b.run(t, "open "+v.path, chromedp.Navigate(fl.url+v.path), chromedp.WaitVisible(v.wait))
			b.screenshot(t, v.shot)
		}
		// The events page is the last one open: an event made now through
		// the API arrives over its live stream, without a reload.
		b.run(t, "wait for the live stream", chromedp.Poll(`document.getElementById("live-status").textContent === "live"`, nil,
			chromedp.WithPollingTimeout(15*time.Second)))
		var before bool
		b.run(t, "read the newest event", chromedp.Evaluate(
			`document.querySelector("#live-events tr").textContent.toLowerCase().includes("resume")`, &before))
		if before {
			t.Fatal("the newest event already mentions a resume: the live check below would prove nothing")
		}
		if _, err := fl.api.Rollout(ctx, "default/logdemo", api.RolloutRequest{Action: api.RolloutResume}); err != nil {
			t.Fatal(err)
		}
		b.run(t, "see the resume event arrive live", chromedp.Poll(
			`document.querySelector("#live-events tr").textContent.toLowerCase().includes("resume")`, nil,
			chromedp.WithPollingTimeout(15*time.Second)))
	})

	t.Run("tablet width", func(t *testing.T) {
		for _, v := range []struct{ path, shot string }{
			{"/ui/", "fleet-tablet"}, {"/ui/nodes", "nodes-tablet"}, {"/ui/nodes/" + loggerNode, "node-tablet"},
		} {
			var overflow bool
			b.run(t, "open "+v.path+" at 820x1180", chromedp.EmulateViewport(820, 1180), chromedp.Navigate(fl.url+v.path),
				chromedp.WaitVisible(`main`, chromedp.ByQuery),
				chromedp.Evaluate(`document.documentElement.scrollWidth > document.documentElement.clientWidth`, &overflow))
			if overflow {
				t.Errorf("%s scrolls sideways at tablet width (820 px)", v.path)
			}
			b.screenshot(t, v.shot)
		}
		b.run(t, "back to 1280x800", chromedp.EmulateViewport(1280, 800))
	})

	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("JavaScript console errors:\n%s", strings.Join(errs, "\n"))
	}
}
