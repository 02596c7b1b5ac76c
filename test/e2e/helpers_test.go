// Package e2e runs edgeset end to end on this machine: the controller with
// its embedded broker in-process, and agents with the real Docker runtime on
// the local engine, each agent a node of its own (testimage.Node) so that
// containers never collide and are removed at cleanup. Without an engine the
// tests skip, or fail under EDGESET_REQUIRE_DOCKER=1.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// Timeouts and periods of the tests: generous bounds, the engine is shared
// on two cores. Nothing asserts how long anything took.
const (
	wait           = 40 * time.Second
	poll           = 50 * time.Millisecond
	resyncInterval = 250 * time.Millisecond
	stopTimeout    = 30 * time.Second
)

// testLogger discards logs unless EDGESET_TEST_LOG is set.
func testLogger(component string) *slog.Logger {
	if os.Getenv("EDGESET_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", component)
}

// fleet is an in-process controller and agents on the local Docker engine.
type fleet struct {
	brokerURL string
	secret    []byte // the fleet secret, for MQTT identities
	api       *api.Client
	apiURL    string         // the controller's API, http://HOST:PORT
	dataDir   string         // the controller's data directory
	docker    *client.Client // raw engine client, to look behind the runtime
	nodes     []string
	agents    []*countingRuntime // by node index
	agentDirs map[string]string  // each agent's data dir, by node
}

// countingRuntime is the Docker runtime counting the agent's reconcile
// passes (each begins with one List).
type countingRuntime struct {
	*docker.Runtime
	lists atomic.Int64
}

func (r *countingRuntime) List(ctx context.Context, node string) ([]edgeagent.ContainerState, error) {
	r.lists.Add(1)
	return r.Runtime.List(ctx, node)
}

// startFleet runs a controller (embedded broker and API on loopback, data in
// a temporary directory) and n agents on the Docker runtime. Cleanup stops
// the agents, then removes their containers, then stops the controller.
func startFleet(t *testing.T, cli *client.Client, n int) *fleet {
	t.Helper()
	return startFleetThen(t, cli, n, nil)
}

// startFleetThen is startFleet that calls before, if set, once the
// controller runs and before any agent starts.
func startFleetThen(t *testing.T, cli *client.Client, n int, before func(*fleet)) *fleet {
	t.Helper()
	dir := t.TempDir()
	ctl, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, testLogger("controller"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done, "controller Run") })
	<-ctl.Synced()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)

	url := "tcp://" + ctl.MQTTAddr().String()
	apiURL := "http://" + ctl.APIAddr().String()
	f := &fleet{brokerURL: url, secret: secret, api: api.NewClient(apiURL, ctl.Token(), nil), apiURL: apiURL, dataDir: dir, docker: cli}
	if before != nil {
		before(f)
	}
	for range n {
		node := testimage.Node(t, cli) // its cleanup runs after the agent's
		f.nodes = append(f.nodes, node)
		f.agents = append(f.agents, f.startAgent(t, node, nil))
	}
	f.waitNodes(t)
	return f
}

// startAgent runs an agent for node on its own Docker runtime and data dir
// (f.agentDirs), registering its sealing key with f's controller as
// edgeset-agent does (controller-url). images, when set, returns the
// agent's image fetcher for its runtime.
func (f *fleet) startAgent(t *testing.T, node string, images func(*docker.Runtime) edgeagent.ImageFetcher) *countingRuntime {
	t.Helper()
	url, secret := f.brokerURL, f.secret
	dataDir := t.TempDir()
	if f.agentDirs == nil {
		f.agentDirs = map[string]string{}
	}
	f.agentDirs[node] = dataDir
	rt, err := docker.New(t.Context(), docker.Options{})
	require.NoError(t, err)
	counting := &countingRuntime{Runtime: rt}
	var fetcher edgeagent.ImageFetcher
	if images != nil {
		fetcher = images(rt)
	}
	n, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{
			NodeName:       node,
			DataDir:        dataDir,
			KeyRegistrar:   api.NewNodeClient(f.apiURL, node, credential.NodeToken(secret, node), nil),
			Logger:         testLogger(node),
			ResyncInterval: resyncInterval,
			RestartBackoff: edgeagent.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second, ResetAfter: time.Minute},
			EventsRetry:    edgeagent.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, ResetAfter: time.Minute},
			Images:         fetcher,
		},
		MQTT: mqttclient.Options{
			BrokerURL:          url,
			Password:           credential.NodeToken(secret, node),
			FirstConnectJitter: time.Millisecond,
			Backoff:            mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: time.Second},
		},
		Status: func(context.Context) schema.NodeStatus {
			return schema.NodeStatus{Labels: map[string]string{schema.LabelPrefetch: "true"}, // as the agent's Announcer says
				Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}}}
		},
	}, counting)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "agent %s Run", node)
		case <-time.After(stopTimeout):
			t.Errorf("agent %s: Run did not return after cancel", node)
		}
		require.NoError(t, rt.Close())
	})
	return counting
}

// waitNodes waits until the controller lists every node of f online.
func (f *fleet) waitNodes(t *testing.T) {
	t.Helper()
	checkfor.Eventually(t, wait, poll, func() error {
		list, err := f.api.ListNodes(t.Context())
		if err != nil {
			return err
		}
		online := map[string]bool{}
		for _, n := range list {
			online[n.Name] = n.Online
		}
		for _, n := range f.nodes {
			if !online[n] {
				return fmt.Errorf("node %s not online (nodes: %v)", n, online)
			}
		}
		return nil
	})
}

// waitPasses waits until every agent has run at least n more reconcile
// passes than when it was called.
func (f *fleet) waitPasses(t *testing.T, n int64) {
	t.Helper()
	targets := make([]int64, len(f.agents))
	for i, a := range f.agents {
		targets[i] = a.lists.Load() + n
	}
	checkfor.Eventually(t, wait, poll, func() error {
		for i, a := range f.agents {
			if got := a.lists.Load(); got < targets[i] {
				return fmt.Errorf("agent %s: %d passes of %d", f.nodes[i], got, targets[i])
			}
		}
		return nil
	})
}

// apply sends a manifest and fails the test if the controller refuses it.
func (f *fleet) apply(t *testing.T, manifest string) api.ApplyResult {
	t.Helper()
	res, err := f.api.Apply(t.Context(), "e2e.yaml", []byte(manifest), false)
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0]
}

// daemonSet returns the daemonset key ("namespace/name") with its status.
func (f *fleet) daemonSet(t *testing.T, key string) api.DaemonSet {
	t.Helper()
	ds, err := f.api.GetDaemonSet(t.Context(), key)
	require.NoError(t, err)
	return ds
}

// tagImage tags image under a new, random tag of the same repository and
// returns it; the tag is removed at cleanup, after the containers using it
// (cleanups registered later run first).
func tagImage(t *testing.T, cli *client.Client, image string) string {
	t.Helper()
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	repo, _, _ := strings.Cut(image, ":")
	tag := repo + ":e2e-b-" + hex.EncodeToString(suffix[:])
	_, err := cli.ImageTag(t.Context(), client.ImageTagOptions{Source: image, Target: tag})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if _, err := cli.ImageRemove(ctx, tag, client.ImageRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove tag %s: %v", tag, err)
		}
	})
	return tag
}

// manifest is a daemonset in namespace e2e running the test app's sleep
// mode from image, never pulled, with the given update strategy (YAML flow
// mapping).
func manifest(name, image, strategy string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: %[1]s, namespace: e2e}
spec:
  selector: {matchLabels: {app: %[1]s}}
  updateStrategy: %[3]s
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - {name: main, image: "%[2]s", imagePullPolicy: Never, args: [sleep]}
`, name, image, strategy)
}

// snapshot is the engine's view of one daemonset's managed containers, by
// node, taken with one list call.
type snapshot map[string][]container.Summary

// containersOf lists the managed containers of daemonset key (running or
// not) on the fleet's nodes, asking the engine directly.
func (f *fleet) containersOf(t *testing.T, key string) snapshot {
	t.Helper()
	res, err := f.docker.ContainerList(t.Context(), client.ContainerListOptions{
		All: true,
		Filters: make(client.Filters).Add("label",
			edgeagent.LabelManaged+"=true", edgeagent.LabelDaemonSet+"="+key),
	})
	require.NoError(t, err)
	snap := snapshot{}
	for _, n := range f.nodes {
		snap[n] = nil
	}
	for _, c := range res.Items {
		n := c.Labels[edgeagent.LabelNode]
		if _, ours := snap[n]; ours {
			snap[n] = append(snap[n], c)
		}
	}
	return snap
}

// running reports whether the node's only container runs image, and why not.
func (s snapshot) running(node, image string) error {
	list := s[node]
	if len(list) != 1 {
		return fmt.Errorf("node %s: %d containers, want 1: %s", node, len(list), s.describe(node))
	}
	if c := list[0]; c.State != container.StateRunning || c.Image != image {
		return fmt.Errorf("node %s: %s, want running %s", node, s.describe(node), image)
	}
	return nil
}

// ids returns the id of each node's containers, for comparing snapshots.
func (s snapshot) ids() map[string][]string {
	out := map[string][]string{}
	for n, list := range s {
		for _, c := range list {
			out[n] = append(out[n], c.ID)
		}
		sort.Strings(out[n])
	}
	return out
}

// describe prints a node's containers: short id, image, state.
func (s snapshot) describe(node string) string {
	var parts []string
	for _, c := range s[node] {
		parts = append(parts, fmt.Sprintf("%.12s %s %s", c.ID, c.Image, c.State))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
