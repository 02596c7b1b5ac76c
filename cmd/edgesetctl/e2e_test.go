package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// cli runs edgesetctl against a controller.
type cli struct {
	t      *testing.T
	server string
	token  string
	// dataDir is the controller's data directory and mqttURL its broker
	// (startFleet only).
	dataDir, mqttURL string
}

func (c cli) run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	all := append([]string{"--server", c.server, "--token", c.token}, args...)
	code = run(all, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func (c cli) ok(args ...string) string {
	c.t.Helper()
	code, out, errOut := c.run(args...)
	require.Equal(c.t, 0, code, "edgesetctl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

// waitUntil waits up to 20 s for fn to hold, what naming it.
func waitUntil(t *testing.T, what string, fn func() bool) {
	t.Helper()
	checkfor.Eventually(t, 20*time.Second, 25*time.Millisecond, func() error {
		if !fn() {
			return fmt.Errorf("not yet: %s", what)
		}
		return nil
	})
}

// startFleet runs a controller and n agents (fake runtime) on loopback.
func startFleet(t *testing.T, n int) cli {
	c, _ := startFleetStoppable(t, n)
	return c
}

// startFleetStoppable is startFleet that also returns a stop for each
// agent (gw-0 first).
func startFleetStoppable(t *testing.T, n int) (cli, []func()) {
	return startFleetWith(t, n, fake.New)
}

// startFleetWith is startFleetStoppable whose agents run on the fake
// engines newRuntime returns, one per agent.
func startFleetWith(t *testing.T, n int, newRuntime func() *fake.Runtime) (cli, []func()) {
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	<-c.Synced()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	var stops []func()
	for i := range n {
		stops = append(stops, startAgent(t, "tcp://"+c.MQTTAddr().String(), secret, fmt.Sprintf("gw-%d", i), newRuntime()))
	}
	return cli{t: t, server: "http://" + c.APIAddr().String(), token: c.Token(), dataDir: dir, mqttURL: "tcp://" + c.MQTTAddr().String()}, stops
}

// startAgent runs an agent on the fake engine rt until the test ends or
// the returned stop is called; edits, if any, change its options.
func startAgent(t *testing.T, url string, secret []byte, name string, rt *fake.Runtime, edits ...func(*edgeagent.NodeOptions)) (stop func()) {
	opts := edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: name, Ephemeral: true, ResyncInterval: 200 * time.Millisecond},
		MQTT: mqttclient.Options{BrokerURL: url, Password: credential.NodeToken(secret, name), FirstConnectJitter: time.Millisecond,
			Backoff: mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}},
		Status: func(context.Context) schema.NodeStatus {
			return schema.NodeStatus{Labels: map[string]string{"role": "gateway", "site": name[len(name)-1:]},
				Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}}}
		},
	}
	for _, edit := range edits {
		edit(&opts)
	}
	node, err := edgeagent.NewNode(opts, rt)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func manifest(t *testing.T, image string) string {
	path := filepath.Join(t.TempDir(), "exporter.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - {name: exporter, image: "%s"}
`, image)), 0o644))
	return path
}

func TestCLIEndToEnd(t *testing.T) {
	c := startFleet(t, 3)
	waitUntil(t, "3 nodes", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Count(out, "node/") == 3
	})

	v1 := manifest(t, "exporter:1")
	assert.Equal(t, "daemonset/monitoring/exporter created\n", c.ok("apply", "-f", v1))
	assert.Equal(t, "daemonset/monitoring/exporter unchanged\n", c.ok("apply", "-f", v1))
	out := c.ok("rollout", "status", "ds", "exporter", "-n", "monitoring", "--interval", "100ms")
	assert.Contains(t, out, `daemonset "monitoring/exporter" successfully rolled out`)

	dss := daemonSetList(t, c.ok("get", "ds", "-A", "-o", "json"))
	require.Len(t, dss, 1)
	assert.Equal(t, 3, dss[0].Status.NumberReady)

	assert.Contains(t, c.ok("get", "nodes", "-l", "site=1"), "gw-1")
	assert.NotContains(t, c.ok("get", "nodes", "-l", "site=1"), "gw-2")
	assert.Contains(t, c.ok("describe", "node", "gw-0"), "monitoring/exporter")
	assert.Contains(t, c.ok("describe", "ds", "exporter", "-n", "monitoring"), "3 ready")

	c.ok("apply", "-f", manifest(t, "exporter:2"))
	c.ok("rollout", "status", "daemonset", "exporter", "-n", "monitoring", "--interval", "100ms")
	hist := c.ok("rollout", "history", "ds", "exporter", "-n", "monitoring")
	assert.Contains(t, hist, "exporter:1")
	assert.Contains(t, hist, "exporter:2")
	assert.Contains(t, c.ok("rollout", "undo", "ds", "exporter", "-n", "monitoring"), "rolled back (revision 1)")
	c.ok("rollout", "status", "ds", "exporter", "-n", "monitoring", "--interval", "100ms")
	assert.Contains(t, c.ok("get", "ds", "-n", "monitoring", "-o", "wide"), "exporter:1")

	c.ok("label", "node", "gw-2", "role=sensor", "--overwrite")
	waitUntil(t, "gw-2 to lose the daemon", func() bool {
		return !strings.Contains(c.ok("get", "instances", "-n", "monitoring"), "gw-2")
	})
	assert.Contains(t, c.ok("delete", "ds", "exporter", "-n", "monitoring"), "deleted")
	waitUntil(t, "every instance gone", func() bool {
		return strings.TrimSpace(c.ok("get", "instances", "-A", "-o", "name")) == ""
	})
}

func TestCLIErrors(t *testing.T) {
	c := startFleet(t, 0)

	code, _, errOut := cli{t: t, server: "http://127.0.0.1:1", token: "x"}.run("get", "nodes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "http://127.0.0.1:1")
	assert.Contains(t, errOut, "make run")

	code, _, errOut = cli{t: t, server: c.server, token: "wrong"}.run("get", "ds")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "refused the API token")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: {}\n"), 0o644))
	code, _, errOut = c.run("apply", "-f", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, bad+":")
	assert.Contains(t, errOut, "spec.template.spec.containers")

	code, _, errOut = c.run("get", "widgets")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "unknown resource type")

	// A name the controller does not know is that, not a controller to
	// look for.
	for _, args := range [][]string{{"get", "cm", "nope", "-n", "edge"}, {"get", "secret", "nope", "-n", "edge"}, {"get", "ds", "nope"}, {"get", "node", "nope"}} {
		code, _, errOut = c.run(args...)
		assert.Equal(t, 1, code, args)
		assert.Contains(t, errOut, "nope", args)
		assert.Contains(t, errOut, "not found", args)
		assert.NotContains(t, errOut, "make run", args)
	}

	code, _, errOut = c.run("describe", "node", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not found")
}

// TestCLINodeVerbs: taint, cordon, drain, uncordon and delete node against
// a live fleet, each asserted by what the fleet then runs.
func TestCLINodeVerbs(t *testing.T) {
	c := startFleet(t, 2)
	waitUntil(t, "2 nodes", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Count(out, "node/") == 2
	})
	c.ok("apply", "-f", manifest(t, "exporter:1"))
	runsOn := func(node string) bool {
		return strings.Contains(c.ok("get", "instances", "-n", "monitoring"), node)
	}
	waitUntil(t, "both nodes running the daemon", func() bool { return runsOn("gw-0") && runsOn("gw-1") })

	assert.Contains(t, c.ok("taint", "node", "gw-0", "maintenance=true:NoExecute"), "node/gw-0 tainted")
	waitUntil(t, "the NoExecute taint to evict", func() bool { return !runsOn("gw-0") })
	c.ok("taint", "node", "gw-0", "maintenance-")
	waitUntil(t, "the daemon back after the taint is removed", func() bool { return runsOn("gw-0") })

	assert.Contains(t, c.ok("cordon", "gw-0"), "cordoned")
	assert.Contains(t, c.ok("describe", "node", "gw-0"), "Unschedulable: true")
	assert.True(t, runsOn("gw-0"), "a cordoned node keeps its daemons")

	out := c.ok("drain", "gw-1")
	assert.Contains(t, out, "node/gw-1 cordoned\nevicting instance monitoring/exporter\n")
	assert.Contains(t, out, "node/gw-1 drained")
	assert.False(t, runsOn("gw-1"), "drain returns once the node reports the daemon stopped")
	n, err := api.NewClient(c.server, c.token, nil).GetNode(context.Background(), "gw-1")
	require.NoError(t, err)
	assert.Empty(t, n.Instances)
	assert.GreaterOrEqual(t, n.ObservedGeneration, n.DesiredGeneration, "the agent acted on the drained desired state")
	assert.Contains(t, c.ok("uncordon", "gw-1"), "uncordoned")
	waitUntil(t, "uncordon to bring it back", func() bool { return runsOn("gw-1") })

	code, _, errOut := c.run("taint", "node", "gw-0", "bad")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "invalid taint spec: bad")
	code, _, errOut = c.run("cordon", "gw-9")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "did you mean gw-0")

	assert.Contains(t, c.ok("delete", "node", "gw-1"), "node/gw-1 deleted")
	waitUntil(t, "the deleted node's daemon gone", func() bool { return !runsOn("gw-1") })

	code, out, errOut = c.run("get", "sources")
	assert.Equal(t, 0, code)
	assert.Empty(t, out, "no manifests-dir: no sources")
	assert.Equal(t, "No resources found\n", errOut)

	v := c.ok("version")
	assert.Contains(t, v, "Client:")
	assert.Contains(t, v, "Controller:")
	for _, shell := range []string{"bash", "zsh", "fish"} {
		assert.NotEmpty(t, c.ok("completion", shell), shell)
	}
}

// TestCLIApplyExamplesDir: the first example of `apply --help` works: the
// examples directory holds manifests only (the simulator's fleet file is in
// configs/sim).
func TestCLIApplyExamplesDir(t *testing.T) {
	c := startFleet(t, 0)
	out := c.ok("apply", "-f", "../../configs/examples/")
	assert.Contains(t, out, "daemonset/monitoring/node-exporter created")
}

// TestCLIErrorsSayWhatHappened: only a failure to connect suggests starting
// a controller; a deadline says it timed out after how long; a server that
// is not an edgeset controller is called that.
func TestCLIErrorsSayWhatHappened(t *testing.T) {
	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var held []net.Conn
	var mu sync.Mutex
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-acceptDone
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	silent := cli{t: t, server: "http://" + ln.Addr().String(), token: "x"}
	code, _, errOut := silent.run("rollout", "status", "ds", "exporter", "--timeout", "300ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "timed out after 300ms waiting for")
	assert.NotContains(t, errOut, "unreachable")
	assert.NotContains(t, errOut, "make run")

	code, _, errOut = cli{t: t, server: "http://127.0.0.1:1", token: "x"}.run("get", "nodes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is edgeset-controller running?", "refused: a connection failure")

	// Not a controller: a plain web server.
	for name, h := range map[string]http.HandlerFunc{
		"404 text": http.NotFound,
		"200 html": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>hello</body></html>")
		},
	} {
		web := httptest.NewServer(h)
		code, _, errOut = cli{t: t, server: web.URL, token: "x"}.run("get", "nodes")
		web.Close()
		assert.Equal(t, 1, code, name)
		assert.Contains(t, errOut, web.URL+" is not an edgeset controller", name)
		assert.NotContains(t, errOut, "make run", name)
	}
}

// TestCLITokenFileBeatsEnvironment: an explicit --token-file wins over
// EDGESET_TOKEN, as docs/configuration.md states (flag first).
func TestCLITokenFileBeatsEnvironment(t *testing.T) {
	c := startFleet(t, 0)
	tokenFile := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(c.token+"\n"), 0o600))
	t.Setenv("EDGESET_TOKEN", "wrong-token-from-the-environment")
	var out, errb bytes.Buffer
	code := run([]string{"--server", c.server, "--token-file", tokenFile, "get", "nodes"}, strings.NewReader(""), &out, &errb)
	assert.Equal(t, 0, code, errb.String())

	// Without the flag the environment is used (and refused here).
	code = run([]string{"--server", c.server, "get", "nodes"}, strings.NewReader(""), &out, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "token from: EDGESET_TOKEN")
}

// TestCLITaintForms: every kubectl taint form works, what does not parse
// is refused with kubectl's message, removing an absent taint is an error
// that changes nothing, and the verb printed says what changed.
func TestCLITaintForms(t *testing.T) {
	c := startFleet(t, 1)
	waitUntil(t, "gw-0", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Contains(out, "node/gw-0")
	})
	ac := api.NewClient(c.server, c.token, nil)
	taints := func() []string {
		n, err := ac.GetNode(context.Background(), "gw-0")
		require.NoError(t, err)
		var out []string
		for _, tn := range n.Taints {
			out = append(out, taintSpec(tn))
		}
		return out
	}

	assert.Equal(t, "node/gw-0 tainted\n", c.ok("taint", "node", "gw-0", "maintenance=true:NoExecute"))
	assert.Equal(t, []string{"maintenance=true:NoExecute"}, taints())
	assert.Equal(t, "node/gw-0 untainted\n", c.ok("taint", "node", "gw-0", "maintenance=true:NoExecute-"), "the kubectl form of removal")
	assert.Empty(t, taints())
	c.ok("taint", "node", "gw-0", "maintenance=true:NoExecute")
	code, _, errOut := c.run("taint", "node", "gw-0", "maintenance=false:NoExecute")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "node gw-0 already has maintenance taint(s) with same effect(s) and --overwrite is false")
	assert.Equal(t, "node/gw-0 modified\n", c.ok("taint", "node", "gw-0", "maintenance=false:NoExecute", "--overwrite"))
	assert.Equal(t, "node/gw-0 unchanged\n", c.ok("taint", "node", "gw-0", "maintenance=false:NoExecute", "--overwrite"))

	// key=value:Effect- removes by key and effect (the value is not compared).
	assert.Equal(t, "node/gw-0 untainted\n", c.ok("taint", "node", "gw-0", "maintenance=true:NoExecute-"))
	assert.Empty(t, taints())
	code, _, errOut = c.run("taint", "node", "gw-0", "maintenance=true:NoExecute-")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `taint "maintenance:NoExecute" not found`)

	c.ok("taint", "node", "gw-0", "a:NoSchedule", "b=1:PreferNoSchedule", "b=2:NoSchedule")
	assert.ElementsMatch(t, []string{"a:NoSchedule", "b=1:PreferNoSchedule", "b=2:NoSchedule"}, taints())
	assert.Equal(t, "node/gw-0 untainted\n", c.ok("taint", "node", "gw-0", "a:NoSchedule-"))
	assert.Equal(t, "node/gw-0 untainted\n", c.ok("taint", "node", "gw-0", "b-"), "key- removes every effect")
	assert.Empty(t, taints())

	// A removal that does not match fails the whole command.
	code, _, errOut = c.run("taint", "node", "gw-0", "x=1:NoSchedule", "gone-")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `taint "gone" not found`)
	assert.Empty(t, taints(), "nothing changed")
	assert.Equal(t, "node/gw-0 tainted\n", c.ok("taint", "node", "gw-0", "x=1:NoSchedule", "y:NoExecute"))
	assert.Equal(t, "node/gw-0 modified\n", c.ok("taint", "node", "gw-0", "z:NoSchedule", "y:NoExecute-"))
	assert.ElementsMatch(t, []string{"x=1:NoSchedule", "z:NoSchedule"}, taints())

	for _, tc := range []struct{ arg, msg string }{
		{"key=value-", "invalid taint spec: key=value"},
		{"a=b", "invalid taint spec: a=b"},
		{"a=b:Bogus", "invalid taint effect: Bogus, unsupported taint effect"},
		{"a=b=c:NoSchedule", "invalid taint spec: a=b=c:NoSchedule"},
		{"a:b:NoSchedule", "invalid taint spec: a:b:NoSchedule"},
		{"b@d:NoSchedule", "invalid taint spec: b@d:NoSchedule"},
	} {
		code, _, errOut = c.run("taint", "node", "gw-0", tc.arg)
		assert.Equal(t, 2, code, tc.arg)
		assert.Contains(t, errOut, tc.msg, tc.arg)
	}
	code, _, errOut = c.run("taint", "node", "gw-0", "d:NoSchedule", "d=2:NoSchedule")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "duplicated taints with the same key and effect: d=2:NoSchedule")
	assert.ElementsMatch(t, []string{"x=1:NoSchedule", "z:NoSchedule"}, taints())
}

// TestCLILabelOverwrite: changing a label's value needs --overwrite, as in
// kubectl; the verb printed says what changed.
func TestCLILabelOverwrite(t *testing.T) {
	c := startFleet(t, 1)
	waitUntil(t, "gw-0", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Contains(out, "node/gw-0")
	})
	label := func(k string) string {
		n, err := api.NewClient(c.server, c.token, nil).GetNode(context.Background(), "gw-0")
		require.NoError(t, err)
		return n.Labels[k]
	}
	code, _, errOut := c.run("label", "node", "gw-0", "site=berlin")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "'site' already has a value (0), and --overwrite is false")
	assert.Equal(t, "0", label("site"))
	assert.Equal(t, "node/gw-0 labeled\n", c.ok("label", "node", "gw-0", "site=berlin", "--overwrite"))
	assert.Equal(t, "berlin", label("site"))
	assert.Equal(t, "node/gw-0 not labeled\n", c.ok("label", "node", "gw-0", "site=berlin"))
	assert.Equal(t, "node/gw-0 labeled\n", c.ok("label", "node", "gw-0", "tier=edge"))
	assert.Equal(t, "node/gw-0 unlabeled\n", c.ok("label", "node", "gw-0", "tier-"))
	assert.Equal(t, "label \"tier\" not found.\nnode/gw-0 not labeled\n", c.ok("label", "node", "gw-0", "tier-"))
}

// TestCLITokenCreate: token create mints through the API by default (the
// controller's fleet secret, wherever edgesetctl runs), recorded as an
// event without the token; the offline --data-dir mode refuses a
// directory without a fleet secret instead of making one up.
func TestCLITokenCreate(t *testing.T) {
	c := startFleet(t, 0)
	secret, err := credential.LoadOrCreateFleetSecret(c.dataDir)
	require.NoError(t, err)
	want := credential.NodeToken(secret, "gw-new")

	out := c.ok("token", "create", "gw-new")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Equal(t, want, lines[len(lines)-1], "the token the controller's broker accepts")
	assert.Contains(t, out, credential.TokenFingerprint(want))

	var evs []api.Event
	waitUntil(t, "the TokenMinted event", func() bool {
		evs, err = api.NewClient(c.server, c.token, nil).Events(context.Background(), api.EventFilter{Object: "node/gw-new"})
		require.NoError(t, err)
		return len(evs) > 0
	})
	require.Len(t, evs, 1)
	assert.Equal(t, "TokenMinted", evs[0].Reason)
	assert.Contains(t, evs[0].Message, credential.TokenFingerprint(want))
	assert.Contains(t, evs[0].Message, "127.0.0.1", "who asked")
	assert.NotContains(t, evs[0].Message, want)

	code, _, errOut := cli{t: t, server: c.server, token: "wrong"}.run("token", "create", "gw-new")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "refused the API token", "minting needs the admin token")

	// Offline: the controller's data directory works ...
	out = c.ok("token", "create", "gw-new", "--data-dir", c.dataDir)
	assert.True(t, strings.HasSuffix(out, want+"\n"))
	// ... and any other is refused, and left alone.
	elsewhere := filepath.Join(t.TempDir(), "not-a-data-dir")
	for _, args := range [][]string{{"token", "create", "gw-new", "--data-dir", elsewhere}, {"token", "revoke", "gw-new", "--data-dir", elsewhere}} {
		code, _, errOut = c.run(args...)
		assert.Equal(t, 1, code, args)
		assert.Contains(t, errOut, "no fleet secret at "+filepath.Join(elsewhere, "fleet.secret"), args)
		assert.NoDirExists(t, elsewhere, args)
	}

	// A revoked node's token is refused by the broker, and being derived
	// from its name, minting it again gives the same token: refused, both
	// ways, naming the list.
	c.ok("token", "revoke", "gw-new", "--data-dir", c.dataDir)
	for _, args := range [][]string{{"token", "create", "gw-new"}, {"token", "create", "gw-new", "--data-dir", c.dataDir}} {
		code, out, errOut = c.run(args...)
		assert.Equal(t, 1, code, args)
		assert.Contains(t, errOut, "node gw-new is revoked (listed in "+filepath.Join(c.dataDir, "revoked-tokens")+")", args)
		assert.NotContains(t, out, want, args)
	}
}

// TestDescribeNodeShowsTelemetry: an agent measuring its device (this
// machine's /proc, its data directory) publishes telemetry, and describe
// node shows it.
func TestDescribeNodeShowsTelemetry(t *testing.T) {
	c := startFleet(t, 0)
	secret, err := credential.LoadOrCreateFleetSecret(c.dataDir)
	require.NoError(t, err)
	rt := fake.New()
	startAgent(t, c.mqttURL, secret, "gw-t", rt, func(o *edgeagent.NodeOptions) {
		o.Telemetry = edgeagent.NewTelemeter("gw-t", t.TempDir(), rt).Measure
		o.TelemetryInterval = 50 * time.Millisecond
	})
	var out string
	waitUntil(t, "telemetry in describe node", func() bool {
		code, stdout, _ := c.run("describe", "node", "gw-t")
		out = stdout
		return code == 0 && strings.Contains(stdout, "in history")
	})
	assert.Contains(t, out, "available of", "memory from /proc/meminfo")
	assert.Contains(t, out, "Disk data:", "the data directory's filesystem")
	assert.NotContains(t, out, "not reported by this agent")
}

// TestAgentAuthRefusedHint: an agent whose token the broker refuses says
// what to check, not only "not Authorized".
func TestAgentAuthRefusedHint(t *testing.T) {
	c := startFleet(t, 0)
	var logs lockedBuffer
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: "gw-bad", Ephemeral: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		MQTT: mqttclient.Options{BrokerURL: c.mqttURL, Password: "a-token-from-another-fleet", FirstConnectJitter: time.Millisecond,
			Backoff: mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}},
	}, fake.New())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "the refused connect logged", func() bool { return strings.Contains(logs.String(), "mqtt connect refused") })
	line := logs.String()
	for _, want := range []string{"not Authorized", "minted by the controller of this broker", "edgesetctl token create gw-bad", "--node-name must match", "not revoked", c.mqttURL} {
		assert.Contains(t, line, want)
	}
}

// TestCLILogsOfflineNode: logs for a node known to be offline fails at
// once, naming the node and when it was last seen, instead of waiting for
// an answer that cannot come.
func TestCLILogsOfflineNode(t *testing.T) {
	c, stops := startFleetStoppable(t, 1)
	ac := api.NewClient(c.server, c.token, nil)
	waitUntil(t, "gw-0 online", func() bool { n, err := ac.GetNode(context.Background(), "gw-0"); return err == nil && n.Online })
	c.ok("apply", "-f", manifest(t, "exporter:1"))
	waitUntil(t, "gw-0 running the daemon", func() bool {
		n, err := ac.GetNode(context.Background(), "gw-0")
		return err == nil && len(n.Instances) == 1 && n.Instances[0].Ready
	})
	stops[0]()
	waitUntil(t, "gw-0 offline", func() bool { n, err := ac.GetNode(context.Background(), "gw-0"); return err == nil && !n.Online })

	code, _, errOut := c.run("logs", "exporter", "-n", "monitoring", "--node", "gw-0")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "node gw-0 is offline (last seen ")
	assert.Contains(t, errOut, "until it reconnects")

	// drain of an offline node says so, and --timeout bounds the wait.
	code, out, errOut := c.run("drain", "gw-0", "--timeout", "300ms")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, errOut, "node gw-0 is offline")
	assert.Contains(t, errOut, "timed out after 300ms waiting for node gw-0's evicted instances to stop")
	assert.Contains(t, errOut, "still running on node gw-0: monitoring/exporter (the drain stays in effect)")
	assert.NotContains(t, errOut, "make run")
}

// TestCLIDeleteFromManifests: delete -f FILE|DIR|- deletes what the
// manifests name, reports what does not exist (exit 1) unless
// --ignore-not-found, as kubectl does.
func TestCLIDeleteFromManifests(t *testing.T) {
	c := startFleet(t, 0)
	ac := api.NewClient(c.server, c.token, nil)
	examples := "../../configs/examples/"
	c.ok("apply", "-f", examples)
	out := c.ok("delete", "-f", examples)
	for _, obj := range []string{"daemonset/monitoring/node-exporter", "daemonset/kube-system/fluentd-elasticsearch", "configmap/logging/fluent-bit", "daemonset/logging/fluent-bit"} {
		assert.Contains(t, out, obj+" deleted\n")
	}
	dss, err := ac.ListDaemonSets(context.Background())
	require.NoError(t, err)
	assert.Empty(t, dss)
	cms, err := ac.ListConfigMaps(context.Background())
	require.NoError(t, err)
	assert.Empty(t, cms)

	code, out, errOut := c.run("delete", "-f", examples)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "Error from server (NotFound): daemonset/monitoring/node-exporter not found")
	assert.Contains(t, errOut, "Error from server (NotFound): configmap/logging/fluent-bit not found")
	assert.Equal(t, "", c.ok("delete", "-f", examples, "--ignore-not-found"))

	// Every object is tried: one missing does not stop the others.
	path := manifest(t, "exporter:1")
	c.ok("apply", "-f", path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	code, out, errOut = c.runIn(string(data)+"---\n"+strings.ReplaceAll(string(data), "name: exporter,", "name: other,"), "delete", "-f", "-")
	assert.Equal(t, 1, code)
	assert.Equal(t, "daemonset/monitoring/exporter deleted\n", out)
	assert.Contains(t, errOut, "daemonset/monitoring/other not found")

	code, _, errOut = c.run("delete", "ds", "gone", "other", "-n", "monitoring")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "daemonset/monitoring/gone not found")
	assert.Equal(t, "", c.ok("delete", "ds/gone", "--ignore-not-found"))
	code, _, errOut = c.run("delete", "-f", path, "ds", "x")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "not both")
}

// TestCLIDryRun: --dry-run=server has the controller run the apply and
// keep nothing; --dry-run=client only reads; --dry-run needs a value, as
// in current kubectl.
func TestCLIDryRun(t *testing.T) {
	c := startFleet(t, 0)
	ac := api.NewClient(c.server, c.token, nil)
	path := manifest(t, "exporter:1")
	stored := func() int {
		dss, err := ac.ListDaemonSets(context.Background())
		require.NoError(t, err)
		return len(dss)
	}

	assert.Equal(t, "daemonset/monitoring/exporter created (server dry run)\n", c.ok("apply", "-f", path, "--dry-run=server"))
	assert.Equal(t, "daemonset/monitoring/exporter created (client dry run)\n", c.ok("apply", "-f", path, "--dry-run=client"))
	assert.Zero(t, stored())
	// As in current kubectl, a value is required.
	for _, bad := range []string{"--dry-run", "--dry-run=true"} {
		code, _, errOut := c.run("apply", "-f", path, bad)
		assert.Equal(t, 2, code, bad)
		assert.Contains(t, errOut, `"none", "server", or "client"`, bad)
	}
	assert.Zero(t, stored())

	c.ok("apply", "-f", path)
	assert.Equal(t, "daemonset/monitoring/exporter unchanged (server dry run)\n", c.ok("apply", "-f", path, "--dry-run=server"))
	assert.Equal(t, "daemonset/monitoring/exporter configured (server dry run)\n", c.ok("apply", "-f", manifest(t, "exporter:2"), "--dry-run=server"))
	assert.Equal(t, "daemonset/monitoring/exporter configured (client dry run)\n", c.ok("apply", "-f", manifest(t, "exporter:2"), "--dry-run=client"))
	ds, err := ac.GetDaemonSet(context.Background(), "monitoring/exporter")
	require.NoError(t, err)
	assert.EqualValues(t, 1, ds.Generation, "no dry run changed the daemonset")

	for _, mode := range []string{"client", "server"} {
		assert.Equal(t, "daemonset/monitoring/exporter deleted ("+mode+" dry run)\n",
			c.ok("delete", "-f", path, "--dry-run="+mode), mode)
		code, _, errOut := c.run("delete", "ds", "nope", "--dry-run="+mode)
		assert.Equal(t, 1, code, mode)
		assert.Contains(t, errOut, "not found", mode)
	}
	assert.Equal(t, 1, stored())

	code, _, errOut := c.run("apply", "-f", path, "--dry-run=maybe")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `Invalid dry-run value (maybe). Must be "none", "server", or "client".`)
}
