package fault

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/natstest"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sim"
)

// The test binary runs a controller instead of the tests when envDir is
// set: on that data directory, with its broker on envMQTT and its API on
// envAPI, so a restarted controller listens where agents reconnect.
const (
	envDir   = "EDGESET_FAULT_CONTROLLER_DIR"
	envMQTT  = "EDGESET_FAULT_CONTROLLER_MQTT"
	envAPI   = "EDGESET_FAULT_CONTROLLER_API"
	envGrace = "EDGESET_FAULT_CONTROLLER_GRACE"
	envNodes = "EDGESET_FAULT_NODES"
	envLog   = "EDGESET_TEST_LOG"
	// envAgentLog logs the agents' warnings.
	envAgentLog = "EDGESET_TEST_AGENT_LOG"
	// envBrokerURL and envBrokerPW point the controller at an external
	// broker (with its password file) instead of its embedded one.
	envBrokerURL = "EDGESET_FAULT_CONTROLLER_BROKER_URL"
	envBrokerPW  = "EDGESET_FAULT_CONTROLLER_BROKER_PASSWORD_FILE"
	// envNATSAuth* make the controller serve a NATS cluster's auth
	// callout (nats-auth-url, -password-file, -issuer-seed-file).
	envNATSAuthURL  = "EDGESET_FAULT_CONTROLLER_NATS_AUTH_URL"
	envNATSAuthPW   = "EDGESET_FAULT_CONTROLLER_NATS_AUTH_PASSWORD_FILE"
	envNATSAuthSeed = "EDGESET_FAULT_CONTROLLER_NATS_AUTH_SEED_FILE"
)

// dsKey is the daemonset every scenario rolls out.
const dsKey = "monitoring/exporter"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envDir); dir != "" {
		os.Exit(runController(dir))
	}
	code := m.Run()
	natstest.RemoveBinary()
	os.Exit(code)
}

// runController serves a controller until killed and prints "ready TOKEN"
// once its first pass is done.
func runController(dir string) int {
	grace, _ := time.ParseDuration(os.Getenv(envGrace))
	log := slog.New(slog.DiscardHandler)
	if os.Getenv(envLog) != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: os.Getenv(envMQTT), APIAddr: os.Getenv(envAPI), NodeOfflineGrace: grace,
		BrokerURLs: list(os.Getenv(envBrokerURL)), BrokerPasswordFile: os.Getenv(envBrokerPW),
		NATSAuthURLs: list(os.Getenv(envNATSAuthURL)), NATSAuthPasswordFile: os.Getenv(envNATSAuthPW),
		NATSAuthIssuerSeedFile: os.Getenv(envNATSAuthSeed),
		// Every simulated device connects from loopback.
		MQTTExemptSources: []string{"127.0.0.0/8"}, MQTTMaxPendingConnections: 1 << 20}, log)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	go func() {
		<-c.Synced()
		fmt.Printf("ready %s\n", c.Token())
	}()
	if err := c.Run(context.Background()); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// list splits a comma-separated list; none for "".
func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// fleetSize is the number of agents per scenario: EDGESET_FAULT_NODES, or 10.
func fleetSize(t *testing.T) int {
	s := os.Getenv(envNodes)
	if s == "" {
		return 10
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "%s=%q", envNodes, s)
	require.Positive(t, n)
	return n
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// controllerProc is a controller subprocess (the test binary, see
// TestMain) on a fixed data directory and fixed listeners, so that it can be
// killed with SIGKILL and restarted on the same store and ports.
type controllerProc struct {
	t        *testing.T
	dir      string
	mqttAddr string
	apiAddr  string
	grace    time.Duration
	secret   []byte
	api      *api.Client
	// extBrokerURL and extPasswordFile, when set, replace the embedded
	// broker with an external one (see startControllerOnMosquitto).
	extBrokerURL    string
	extPasswordFile string
	// natsAuth, when set, has it serve a NATS cluster's auth callout.
	natsAuth natsAuthEnv

	mu    sync.Mutex // guards cmd and kills
	cmd   *exec.Cmd
	kills int
}

func startControllerProc(t *testing.T, grace time.Duration) *controllerProc {
	p := &controllerProc{t: t, dir: t.TempDir(), mqttAddr: freeAddr(t), apiAddr: freeAddr(t), grace: grace}
	p.start()
	t.Cleanup(p.kill)
	var err error
	p.secret, err = credential.LoadOrCreateFleetSecret(p.dir)
	require.NoError(t, err)
	return p
}

// natsAuthEnv is what a controller serving a NATS cluster's auth
// callout is given: the cluster's client URLs (comma-separated), the auth
// user's password file and the issuer's seed file.
type natsAuthEnv struct {
	urls, passwordFile, seedFile string
}

// brokerURLs are the broker's nodes: the embedded one, or the external
// broker's (a cluster's members).
func (p *controllerProc) brokerURLs() []string {
	if p.extBrokerURL != "" {
		return list(p.extBrokerURL)
	}
	return []string{"tcp://" + p.mqttAddr}
}

// start runs the controller and waits for its first pass. Binding the same
// ports again right after a kill can fail briefly; start retries.
func (p *controllerProc) start() {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		token, err := p.startOnce()
		if err == nil {
			p.api = api.NewClient("http://"+p.apiAddr, token, nil)
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("controller did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *controllerProc) startOnce() (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envDir+"="+p.dir, envMQTT+"="+p.mqttAddr, envAPI+"="+p.apiAddr, envGrace+"="+p.grace.String(),
		envBrokerURL+"="+p.extBrokerURL, envBrokerPW+"="+p.extPasswordFile,
		envNATSAuthURL+"="+p.natsAuth.urls, envNATSAuthPW+"="+p.natsAuth.passwordFile, envNATSAuthSeed+"="+p.natsAuth.seedFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Getenv(envLog) != "" {
		cmd.Stderr = os.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
	}
	fields := strings.Fields(line)
	if len(fields) != 2 || fields[0] != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", fmt.Errorf("controller said %q", line)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	return fields[1], nil
}

// kill sends SIGKILL and reaps the process; safe to call twice.
func (p *controllerProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
	p.kills++
}

// apply applies a manifest.
func (p *controllerProc) apply(manifest string) {
	p.t.Helper()
	checkfor.Eventually(p.t, 45*time.Second, 100*time.Millisecond, func() error {
		_, err := p.api.Apply(context.Background(), "exporter.yaml", []byte(manifest), false)
		return err
	})
}

// daemonSet gets the daemonset, or an error if the API does not answer.
func (p *controllerProc) daemonSet() (api.DaemonSet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.api.GetDaemonSet(ctx, dsKey)
}

// agentOptions shape every agent of a fleet.
type agentOptions struct {
	// startLatency slows every container start, so that a rollout's
	// unavailable windows last long enough to be sampled.
	startLatency time.Duration
	// crashImage, when set, crash-loops every container of that image.
	crashImage string
	// subscribeAtMostOnce subscribes, publishAtMostOnce publishes at QoS 0
	// (a NATS cluster's settings: natsAgents).
	subscribeAtMostOnce, publishAtMostOnce bool
	// settle is the agents' SettleInterval (zero: the default).
	settle time.Duration
}

// agent is one device: an edgeagent.Node with a persistent data directory,
// a fake runtime that outlives the Node (as Docker outlives the agent
// process) and a link that the test can cut.
type agent struct {
	name string
	dir  string
	rt   *fake.Runtime
	link *sim.Link

	mu     sync.Mutex // guards the fields below
	node   *edgeagent.Node
	cancel context.CancelFunc
	done   chan error
	alive  bool
}

// fleet is the agents of one scenario.
type fleet struct {
	t      *testing.T
	ctl    *controllerProc
	opts   agentOptions
	agents []*agent
}

func startFleet(t *testing.T, ctl *controllerProc, n int, opts agentOptions) *fleet {
	f := &fleet{t: t, ctl: ctl, opts: opts}
	for i := range n {
		a := &agent{name: nodeName(i), dir: t.TempDir(), rt: fake.New(), link: sim.NewLink(nil)}
		a.rt.StartLatency = opts.startLatency
		if opts.crashImage != "" {
			a.rt.CrashAfter = func(spec edgeagent.ContainerSpec) (int, time.Duration, bool) {
				return 1, 150 * time.Millisecond, spec.Image == opts.crashImage
			}
		}
		a.rt.AddImage("exporter:1", "exporter:2", "exporter:bad")
		f.agents = append(f.agents, a)
		f.startAgent(a)
	}
	t.Cleanup(func() {
		for _, a := range f.agents {
			f.stopAgent(a)
		}
	})
	f.waitOnline()
	return f
}

// nodeName is the name of a fleet's i-th agent.
func nodeName(i int) string { return fmt.Sprintf("gw-%03d", i) }

// startAgent runs a new Node for a on its data directory and runtime.
func (f *fleet) startAgent(a *agent) {
	f.t.Helper()
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{
			NodeName: a.name, DataDir: a.dir, Logger: agentLogger(),
			ResyncInterval: 500 * time.Millisecond,
			RestartBackoff: edgeagent.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, ResetAfter: time.Minute},
			EventsRetry:    edgeagent.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, ResetAfter: time.Minute},
			ConnTimeout:    5 * time.Second,
		},
		MQTT: mqttclient.Options{
			BrokerURLs: f.ctl.brokerURLs(), Password: credential.NodeToken(f.ctl.secret, a.name),
			Dial: a.link.Dial, ConnectTimeout: 5 * time.Second, KeepAlive: 5 * time.Second,
			FirstConnectJitter: 100 * time.Millisecond,
			Backoff:            mqttclient.Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
		},
		Status: func(context.Context) schema.NodeStatus {
			return schema.NodeStatus{Labels: map[string]string{"role": "gateway"},
				Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}}}
		},
		SubscribeAtMostOnce: f.opts.subscribeAtMostOnce,
		PublishAtMostOnce:   f.opts.publishAtMostOnce,
		SettleInterval:      f.opts.settle,
	}, a.rt)
	require.NoError(f.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	a.mu.Lock()
	a.node, a.cancel, a.done, a.alive = node, cancel, done, true
	a.mu.Unlock()
}

// agentLogger is the agents' logger: their warnings on stderr with
// EDGESET_TEST_AGENT_LOG=1, nothing otherwise (a fleet's lines would
// drown everything else).
func agentLogger() *slog.Logger {
	if os.Getenv(envAgentLog) == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// stopAgent stops a's Node (not its runtime: containers keep running).
func (f *fleet) stopAgent(a *agent) {
	a.mu.Lock()
	cancel, done, alive := a.cancel, a.done, a.alive
	a.alive = false
	a.mu.Unlock()
	if !alive {
		return
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			f.t.Errorf("agent %s: Run: %v", a.name, err)
		}
	case <-time.After(30 * time.Second):
		f.t.Errorf("agent %s did not stop", a.name)
	}
}

// killAgent stops a's Node as a kill would: the link drops first, so no
// goodbye reaches the broker and the will speaks for the node.
func (f *fleet) killAgent(a *agent) {
	a.link.SetDown(true)
	f.stopAgent(a)
	a.link.SetDown(false)
}

// reachable reports whether a's agent runs and holds a broker connection.
func (a *agent) reachable() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.alive && !a.link.Down() && a.node.Client().Connected()
}

// waitOnline waits until the controller lists every agent online.
func (f *fleet) waitOnline() {
	f.t.Helper()
	checkfor.Eventually(f.t, f.bound(), 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		nodes, err := f.ctl.api.ListNodes(ctx)
		if err != nil {
			return err
		}
		online := 0
		for _, n := range nodes {
			if n.Online {
				online++
			}
		}
		if online != len(f.agents) {
			return fmt.Errorf("%d of %d nodes online", online, len(f.agents))
		}
		return nil
	})
}

// bound is how long the fleet may take to converge once faults stop.
func (f *fleet) bound() time.Duration {
	return 30*time.Second + time.Duration(len(f.agents))*150*time.Millisecond
}

// some returns a fraction of the agents (at least one), picked by a fixed
// seed so that a failure replays.
func (f *fleet) some(fraction float64) []*agent {
	n := max(1, int(float64(len(f.agents))*fraction))
	out := make([]*agent, 0, n)
	for _, i := range rand.New(rand.NewPCG(8, 8)).Perm(len(f.agents))[:n] {
		out = append(out, f.agents[i])
	}
	return out
}

// instance is one running daemonset instance in a fake runtime.
type instance struct {
	daemonSet, revision string
}

// running returns the running instances in a's runtime: the containers at
// template index 0 (one per instance).
func (a *agent) running() []instance {
	var out []instance
	for _, c := range a.rt.Containers() {
		if !c.Running || c.Labels[edgeagent.LabelManaged] != "true" {
			continue
		}
		if idx := c.Labels[edgeagent.LabelIndex]; idx != "" && idx != "0" {
			continue
		}
		out = append(out, instance{daemonSet: c.Labels[edgeagent.LabelDaemonSet], revision: c.Labels[edgeagent.LabelRevision]})
	}
	return out
}

// converged waits until the rollout of revision hash is complete, every
// agent runs exactly one instance, of that revision, and the daemonset's
// status agrees with what the runtimes run (invariant c).
func (f *fleet) converged(hash func(api.DaemonSet) string) api.DaemonSet {
	f.t.Helper()
	var ds api.DaemonSet
	start := time.Now()
	defer func() {
		if f.t.Failed() {
			f.dump(hash(ds))
		}
	}()
	checkfor.Eventually(f.t, f.bound(), 100*time.Millisecond, func() error {
		var err error
		if ds, err = f.ctl.daemonSet(); err != nil {
			return err
		}
		want := hash(ds)
		r := ds.Status.Rollout
		if r == nil || !r.Complete || ds.CurrentHash != want {
			return fmt.Errorf("rollout to %s not complete: current %s, %+v", want, ds.CurrentHash, r)
		}
		updated := 0
		for _, a := range f.agents {
			in := a.running()
			if len(in) != 1 || in[0].revision != want {
				return fmt.Errorf("node %s runs %v, want one instance of %s", a.name, in, want)
			}
			updated++
		}
		st := ds.Status
		if st.DesiredNumberScheduled != len(f.agents) || st.NumberReady != updated || st.UpdatedNumberScheduled != updated || st.NumberAvailable != updated {
			return fmt.Errorf("status %+v disagrees with the agents: %d nodes run %s ready", st, updated, want)
		}
		return nil
	})
	f.t.Logf("converged to %s in %s after the faults", ds.CurrentHash, time.Since(start).Round(time.Millisecond))
	return ds
}

// manifest is the exporter daemonset on image, in edgeset.io/v1 with the
// given rolling update bounds, rollout block (YAML flow mapping or "") and
// extra spec fields (lines such as "minReadySeconds: 1").
func manifest(image, maxUnavailable, maxSurge, rollout string, spec ...string) string {
	if rollout != "" {
		rollout = "  rollout: " + rollout + "\n"
	}
	for _, line := range spec {
		rollout += "  " + line + "\n"
	}
	return fmt.Sprintf(`apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: %s, maxSurge: %s}}
%s  template:
    metadata: {labels: {app: exporter}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - {name: exporter, image: %q}
`, maxUnavailable, maxSurge, rollout, image)
}

// dump logs, for a failing test, the containers, instances and generations
// of every node that does not run exactly one instance of revision want.
func (f *fleet) dump(want string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := f.ctl.api.GetDaemonSet(ctx, dsKey)
	if err == nil {
		f.t.Logf("daemonset: current %s, status %+v, rollout %+v", ds.CurrentHash, ds.Status, ds.Status.Rollout)
	}
	for _, a := range f.agents {
		if in := a.running(); len(in) == 1 && in[0].revision == want {
			continue
		}
		f.t.Logf("%s: reachable %v, link down %v", a.name, a.reachable(), a.link.Down())
		for _, c := range a.rt.Containers() {
			f.t.Logf("%s: container %s image %s revision %s running %v exit %d", a.name, c.Name, c.Image, c.Labels[edgeagent.LabelRevision], c.Running, c.ExitCode)
		}
		for _, in := range ds.Instances {
			if in.Node == a.name {
				f.t.Logf("%s: instance %+v", a.name, in)
			}
		}
		f.logNode(ctx, a.name)
	}
	// Nodes whose runtime is right but whose instance the controller does
	// not count as ready on want (a rollout that does not complete).
	logged := 0
	for _, in := range ds.Instances {
		if in.Revision == want && in.Ready && in.Online || logged == 20 {
			continue
		}
		logged++
		f.t.Logf("%s: instance %+v", in.Node, in)
		f.logNode(ctx, in.Node)
		f.logAgent(in.Node)
	}
}

// logAgent logs what the agent of node reports and its connection's
// counters.
func (f *fleet) logAgent(node string) {
	for _, a := range f.agents {
		if a.name != node {
			continue
		}
		a.mu.Lock()
		n := a.node
		a.mu.Unlock()
		if n == nil {
			return
		}
		obs, _ := n.Agent().Observed()
		f.t.Logf("%s: agent reports generation %d, %+v; client %+v", node, obs.ObservedGeneration, obs.Instances, n.Client().Stats())
	}
}

// logNode logs what the controller knows of node's presence and generations.
func (f *fleet) logNode(ctx context.Context, name string) {
	if node, err := f.ctl.api.GetNode(ctx, name); err == nil {
		f.t.Logf("%s: online %v, desired generation %d, observed generation %d", name, node.Online, node.DesiredGeneration, node.ObservedGeneration)
	}
}
